"""Trials: the same request run N times (``run_many(..., repeat=N)``), and the
summary of its N results: pass rate by status and by verify, cost and
duration spread.  Only the few numbers a summary needs are held per trial."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coding_genesis.errors import ConfigError

__all__ = ["TrialTally", "check_repeat"]


def check_repeat(repeat: object) -> int:
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ConfigError(f"repeat must be a positive integer, got {repeat!r}")
    return repeat


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": round(min(values), 6),
        "max": round(max(values), 6),
        "mean": round(statistics.fmean(values), 6),
        "median": round(statistics.median(values), 6),
        "total": round(sum(values), 6),
    }


@dataclass(slots=True)
class TrialTally:
    """The results of one input's trials, folded as they come."""

    index: int
    repeat: int
    statuses: list[int] = field(default_factory=list)
    verify: list[str | None] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    def add(self, result: Mapping[str, Any]) -> bool:
        """Fold one trial's result in; True once all trials are in."""
        self.statuses.append(int(result.get("status", 1)))
        verify = result.get("verify")
        self.verify.append(str(verify.get("status")) if isinstance(verify, Mapping) else None)
        cost = result.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.costs.append(float(cost))
        duration = result.get("duration_s")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self.durations.append(float(duration))
        return len(self.statuses) >= self.repeat

    def summary(self) -> dict[str, Any]:
        runs = len(self.statuses)
        passed = sum(1 for s in self.statuses if s == 0)
        by_status: dict[str, int] = {}
        for status in self.statuses:
            by_status[str(status)] = by_status.get(str(status), 0) + 1
        verified = [v for v in self.verify if v is not None]
        verify_passed = sum(1 for v in verified if v == "passed")
        return {
            "type": "summary",
            "index": self.index,
            "repeat": self.repeat,
            "runs": runs,
            "passed": passed,
            "pass_rate": round(passed / runs, 6) if runs else None,
            "by_status": by_status,
            "verify": {
                "ran": len(verified),
                "passed": verify_passed,
                "failed": len(verified) - verify_passed,
                "pass_rate": round(verify_passed / len(verified), 6) if verified else None,
            },
            "cost_usd": _spread(self.costs),
            "duration_s": _spread(self.durations),
        }
