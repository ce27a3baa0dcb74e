"""Throwaway users for the cross-user tests, and a Python they can run.

The interpreter running the suite (and the checkout's venv) often lives where
no other user may look (``/root/.pyenv``, mode 0700): a second user then
cannot run ``genesis`` at all.  :func:`build_shared_python` makes, in a
directory open to everyone, a venv from a system interpreter others can
execute, with the package's runtime dependencies installed and a copy of the
package importable through ``PYTHONPATH``."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

import coding_genesis

REPO_ROOT = Path(__file__).parent.parent.parent
#: System interpreters tried, in order, when ours cannot be run by others.
CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")
MIN_VERSION = (3, 11)
#: Where the users' runs and the decoys put their directories.
SHARED_DIRS = ("/dev/shm", "/tmp")


@dataclass(frozen=True)
class SharedPython:
    """An interpreter another user can execute and the ``PYTHONPATH`` under
    which it imports ``coding_genesis``."""

    python: str
    pythonpath: str


class BuildError(Exception):
    """No environment others can run could be built here (the reason)."""


def others_can_run(path: str) -> str | None:
    """Why a user who is neither the owner nor in the group cannot execute
    ``path`` (every directory above it searchable, the file executable), or
    ``None`` when they can."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return f"{real} is not executable by others"
        for parent in real.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return f"{parent} cannot be searched by others"
    except OSError as exc:
        return f"{path}: {exc}"
    return None


def runtime_dependencies() -> list[str]:
    """The requirements of ``[project] dependencies`` in pyproject.toml."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _clean_env() -> dict[str, str]:
    """Our environment without what would make another interpreter or venv
    look at ours."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYENV")}


def _run(args: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            args, env=_clean_env(), capture_output=True, text=True, timeout=timeout, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{what}: {exc}") from exc
    if done.returncode != 0:
        raise BuildError(
            f"{what} failed ({done.returncode}): {(done.stderr or done.stdout)[-400:]}"
        )


def _system_python() -> str:
    reasons = []
    for candidate in CANDIDATES:
        if not os.path.exists(candidate):
            reasons.append(f"no {candidate}")
            continue
        why = others_can_run(candidate)
        if why is not None:
            reasons.append(why)
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(*sys.version_info[:2])"],
            env=_clean_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        version = tuple(int(n) for n in probe.stdout.split()) if probe.returncode == 0 else ()
        if version < MIN_VERSION:
            reasons.append(f"{candidate} is Python {version or '?'}, not >= {MIN_VERSION}")
            continue
        return candidate
    raise BuildError("no system Python others can run: " + "; ".join(reasons))


def open_to_all(root: Path) -> None:
    """Every directory 0755, every file 0644 (0755 if its owner may run it);
    links are left alone (they resolve inside or to the system interpreter)."""
    for here, dirs, files in os.walk(root):
        os.chmod(here, 0o755)
        for name in files:
            path = os.path.join(here, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, 0o755 if mode & stat.S_IXUSR else 0o644)
        for name in dirs:
            if os.path.islink(os.path.join(here, name)):
                dirs.remove(name)  # never walked into; os.walk does not follow it anyway


def build_shared_python(root: Path) -> SharedPython:
    """In ``root`` (made by the caller, removed by the caller): ``venv/`` from
    a system interpreter, with the runtime dependencies, and ``site/`` holding
    a copy of the package (links followed: ``backends`` becomes a directory).
    Raises :class:`BuildError` with the reason when it cannot."""
    python = _system_python()
    venv = root / "venv"
    _run([python, "-m", "venv", str(venv)], f"{python} -m venv", timeout=120)
    shared = venv / "bin" / "python"
    _run(
        [
            *(str(shared), "-m", "pip", "install", "-q", "--disable-pip-version-check"),
            *runtime_dependencies(),
        ],
        "pip install of the runtime dependencies",
        timeout=300,
    )
    site = root / "site"
    package = Path(coding_genesis.__file__).parent
    shutil.copytree(
        package,
        site / package.name,
        symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    open_to_all(root)
    return SharedPython(str(shared), str(site))


def check_runnable(user: str, shared: SharedPython) -> str | None:
    """Why ``user`` cannot import the package with ``shared``, or ``None``."""
    probe = subprocess.run(
        [
            *("runuser", "-u", user, "--", "env", f"PYTHONPATH={shared.pythonpath}"),
            *(shared.python, "-c", "import coding_genesis._cli.main, anyio, psutil"),
        ],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    return None if probe.returncode == 0 else probe.stderr[-400:]


# -- leaving nothing behind --------------------------------------------------------------


def shared_entries() -> set[str]:
    """Every entry of the shared directories, by path."""
    found: set[str] = set()
    for base in SHARED_DIRS:
        try:
            found.update(os.path.join(base, name) for name in os.listdir(base))
        except OSError:
            continue
    return found


def _owner(path: str) -> int | None:
    try:
        return os.lstat(path).st_uid
    except OSError:
        return None


def _remove(path: str) -> None:
    if os.path.islink(path) or not os.path.isdir(path):
        Path(path).unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def remove_traces(uids: Iterable[int], before: set[str]) -> None:
    """Remove, from the shared directories, what the runs of ``uids`` made
    (any new entry one of them owns) and whatever is named for them
    (``coding-genesis-<uid>…``, ``coding-genesis-worktrees-<uid>…``: our
    directories, and decoys made in their names)."""
    uids = set(uids)
    if not uids:
        return
    alternatives = "|".join(str(u) for u in uids)
    named = re.compile(rf"coding-genesis(?:-worktrees)?-(?:{alternatives})(?:-.*)?$")
    for path in shared_entries():
        if named.match(os.path.basename(path)) or (path not in before and _owner(path) in uids):
            _remove(path)


def end_processes_of(uids: Iterable[int]) -> None:
    """Kill, by pid, every process still running as one of ``uids`` (only
    the throwaway users' own, i.e. the test's): ``userdel`` refuses a user
    with processes."""
    uids = set(uids)
    procs = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.info["uids"] is not None and proc.info["uids"].real in uids:
                proc.kill()
                procs.append(proc)
        except psutil.Error:
            continue
    psutil.wait_procs(procs, timeout=5)


def user_exists(name: str) -> bool:
    return subprocess.run(["id", name], capture_output=True, check=False).returncode == 0


def remove_users(names: Iterable[str]) -> list[str]:
    """``userdel -r`` each (``-f`` if that was refused) and its home removed
    whatever ``userdel`` did; the names still present afterwards."""
    names = list(names)
    for name in names:
        try:
            home = pwd.getpwnam(name).pw_dir
        except KeyError:
            continue
        subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
        if user_exists(name):
            subprocess.run(["userdel", "-f", "-r", name], capture_output=True, check=False)
        if home.startswith("/home/") and os.path.isdir(home):
            shutil.rmtree(home, ignore_errors=True)
    return [name for name in names if user_exists(name)]
