"""Small statistics and measurement helpers shared by the figures."""

from __future__ import annotations

import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Timing",
    "machine_info",
    "median",
    "paired_ratio",
    "peak_rss_mib",
    "percentile",
    "reset_peak_rss",
    "rss_mib",
    "timed",
]

T = TypeVar("T")


class Timing:
    """Wall and CPU seconds of one measured call (CPU: this process only)."""

    __slots__ = ("cpu", "value", "wall")

    def __init__(self, wall: float, cpu: float, value: Any) -> None:
        self.wall = wall
        self.cpu = cpu
        self.value = value


def timed(fn: Callable[[], T]) -> Timing:
    """Run ``fn`` once after a full collection; time it by wall and CPU clock."""
    gc.collect()
    w0 = time.perf_counter()
    c0 = time.process_time()
    value = fn()
    return Timing(time.perf_counter() - w0, time.process_time() - c0, value)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def paired_ratio(subject: Sequence[float], baseline: Sequence[float]) -> float:
    """Median of per-repetition ratios: each pair ran back to back, so a noisy
    moment on the shared machine hits both sides of the same pair."""
    ratios = [s / b for s, b in zip(subject, baseline, strict=True) if b > 0]
    return median(ratios)


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mib() -> float:
    """Resident set size of this process now."""
    kib = _status_kib("VmRSS")
    if kib is None:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return kib / 1024


def reset_peak_rss() -> bool:
    """Start a new peak-RSS window (Linux ``clear_refs`` 5); False if unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mib() -> float:
    """Peak resident set size (since start, or since :func:`reset_peak_rss`)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return kib / 1024


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = out.stdout.strip() or "unknown"
    return commit + ("+dirty" if dirty.stdout.strip() else "")


def machine_info(root: Path) -> dict[str, Any]:
    """What the numbers were measured on."""
    mem = _mem_total_gib()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1) if mem else None,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "coding_genesis": f"{_version('coding-genesis')} (git {_git_commit(root)})",
        "orjson": _version("orjson"),
        "anyio": _version("anyio"),
        "psutil": _version("psutil"),
        "pydantic": _version("pydantic"),
        "claude-agent-sdk": _version("claude-agent-sdk"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
