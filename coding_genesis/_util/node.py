"""Node scripts: an npm CLI started without its wrapper.

Some npm CLIs install a ``bin`` that only spawns the real CLI in a second node
process (qwen: ``cli-entry.js`` ``spawnSync``s ``node --expose-gc cli.js``); a SIGTERM
to the wrapper leaves the real CLI and its tools running.  A backend declares the
real entry point as a NodeScript; node_launch (called by the core's program
resolution) turns the found wrapper into ``node [node_args] <package>/<script>``
under a node recent enough, or says why it cannot.  Backends stay pure: only this
code looks at the filesystem and runs ``node --version``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NodeScript", "node_launch", "node_major"]


@dataclass(frozen=True, slots=True)
class NodeScript:
    """The real entry point of an npm CLI, declared by its backend."""

    #: The npm package, e.g. ``"@qwen-code/qwen-code"``.
    package: str
    #: The entry point inside the package, e.g. ``"cli.js"``.
    script: str
    #: Arguments of node before the script (what the wrapper would have added).
    node_args: tuple[str, ...] = ()
    #: The oldest node major version the CLI runs under (0: any).
    min_node: int = 0
    #: The variable naming the node to use (read by the command line only).
    node_env_var: str = ""


_VERSION = re.compile(r"v?(\d+)\.")
_versions: dict[tuple[str, float], int | None] = {}


def node_major(node: str) -> int | None:
    """The major version of the node at ``node`` (cached per path and mtime)."""
    try:
        key = (node, os.stat(node).st_mtime)
    except OSError:
        return None
    if key in _versions:
        return _versions[key]
    major: int | None = None
    try:
        out = subprocess.run(  # noqa: S603 (a node binary found by path, a list argv)
            [node, "--version"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
        match = _VERSION.match(out.stdout.decode("ascii", "replace").strip())
        major = int(match.group(1)) if match else None
    except (OSError, subprocess.SubprocessError):
        major = None
    _versions[key] = major
    return major


def _package_dir(program: str, package: str) -> Path | None:
    """The installed ``package`` that ``program`` (its bin, maybe a symlink) belongs to."""
    try:
        real = Path(os.path.realpath(program))
    except OSError:
        return None
    for parent in list(real.parents)[:6]:
        manifest = parent / "package.json"
        try:
            name = json.loads(manifest.read_text("utf-8")).get("name")
        except (OSError, ValueError, AttributeError):
            continue
        if name == package:
            return parent
    return None


def _bundled_node(package_dir: Path, package: str) -> Path:
    """``node_modules/node/bin/node`` beside the package (``npm install node@22``)."""
    depth = package.count("/") + 1
    node_modules = package_dir.parents[depth - 1]
    return node_modules / "node" / "bin" / "node"


def node_launch(program: str, spec: NodeScript, node: str | None) -> list[str] | str | None:
    """argv that runs ``spec`` directly, an error message, or None to run
    ``program`` as it is (it is not that package's bin, e.g. a fake CLI).

    The node is ``node`` if given (checked), else the first recent enough of
    ``node`` on ``PATH`` and the one installed beside the package.
    """
    package_dir = _package_dir(program, spec.package)
    if package_dir is None:
        return None
    script = package_dir / spec.script
    if not script.is_file():
        return None
    need = spec.min_node
    if node is not None:
        found = shutil.which(node) if os.sep not in node else node
        major = node_major(found) if found else None
        if found is None or major is None:
            return f"node {node!r} (for {spec.package}) not found or not runnable"
        if major < need:
            return f"{spec.package} needs node >= {need}; {found} is node {major}"
        return [found, *spec.node_args, str(script)]
    seen: list[str] = []
    candidates = [shutil.which("node"), str(_bundled_node(package_dir, spec.package))]
    for cand in candidates:
        if not cand or not os.path.isfile(cand) or not os.access(cand, os.X_OK):
            continue
        major = node_major(cand)
        if major is not None and major >= need:
            return [cand, *spec.node_args, str(script)]
        seen.append(f"{cand} is node {major}")
    hint = f" (set {spec.node_env_var})" if spec.node_env_var else ""
    found_text = "; ".join(seen) or "no node found"
    return f"{spec.package} needs node >= {need}: {found_text}{hint}"
