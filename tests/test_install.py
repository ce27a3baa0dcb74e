"""A clean install: the wheel and the editable install expose only ``coding_genesis``.

The backends live in the repository's top-level ``backends/`` folder but ship
as ``coding_genesis.backends`` (``coding_genesis/backends`` is a symlink to it).
A user's project with a ``backends`` package of its own must not shadow them,
and ``tests`` / ``benchmarks`` must not become importable.  Each test builds
the project and installs it into a fresh venv (dependencies from the
configured package index).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

USER_BACKENDS = '"""A user\'s own package that happens to be called backends."""\n\nMINE = True\n'

#: Run by the fresh venv's python; argv[1] is where coding_genesis must come from.
CHECK = """\
import importlib, sys
from pathlib import Path

from coding_genesis import CodingGenesisAgent

r = CodingGenesisAgent("failer").run_sync("hello")
assert r["status"] == 0, r
import coding_genesis.backends

source = Path(sys.argv[1]).resolve()
for module in (sys.modules["coding_genesis"], coding_genesis.backends):
    assert Path(module.__file__).resolve().is_relative_to(source), module.__file__

user_backends = sys.argv[2] == "user-backends"
names = ["tests", "benchmarks"] + ([] if user_backends else ["backends"])
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    raise AssertionError(f"{name} is importable: {sys.modules[name].__file__}")
if user_backends:
    import backends
    assert getattr(backends, "MINE", False), backends.__file__
print("clean")
"""


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=240, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


def _fresh_venv(path: Path) -> Path:
    """A venv without pip (fast); the running pip installs into it with ``--python``."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    return path / "bin" / "python"


def _pip_install(python: Path, *args: str) -> None:
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *args])


def _child_env(tmp_path: Path) -> dict[str, str]:
    """No way back into this checkout or this venv: no PYTHONPATH, no user site, a private HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.pop("VIRTUAL_ENV", None)
    home = tmp_path / "home"
    home.mkdir()
    env.update(HOME=str(home), PYTHONNOUSERSITE="1", XDG_STATE_HOME=str(home / "state"))
    return env


def _user_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "backends").mkdir(parents=True)
    (project / "backends" / "__init__.py").write_text(USER_BACKENDS)
    return project


def _build_wheel(source: Path, dist: Path) -> Path:
    """``pip wheel`` (the build backend comes from the index); checks what it holds."""
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("coding_genesis-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert {n.split("/")[0] for n in names} == {
        "coding_genesis",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    backends = sorted(
        p.name for p in (ROOT / "backends").iterdir() if p.suffix in (".py", ".typed")
    )
    assert sorted(n.split("/")[-1] for n in names if n.startswith("coding_genesis/backends/")) == (
        backends
    )
    return wheel


def test_wheel_installs_only_coding_genesis(tmp_path: Path) -> None:
    wheel = _build_wheel(ROOT, tmp_path / "dist")

    venv = tmp_path / "venv"
    python = _fresh_venv(venv)
    _pip_install(python, str(wheel))
    env = _child_env(tmp_path)
    project = _user_project(tmp_path)

    done = _run([str(python), "-c", CHECK, str(venv), "user-backends"], cwd=project, env=env)
    assert done.stdout.strip() == "clean"
    # The console script, from the user's project too.
    _run(
        [str(venv / "bin" / "genesis"), "run", "--backend", "failer", "hello"], cwd=project, env=env
    )


def test_editable_install_exposes_only_coding_genesis(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = _fresh_venv(venv)
    _pip_install(python, "-e", str(ROOT))
    env = _child_env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = _user_project(tmp_path)

    # coding_genesis comes from the checkout; nothing else of it is importable.
    done = _run([str(python), "-c", CHECK, str(ROOT), "none"], cwd=elsewhere, env=env)
    assert done.stdout.strip() == "clean"
    done = _run([str(python), "-c", CHECK, str(ROOT), "user-backends"], cwd=project, env=env)
    assert done.stdout.strip() == "clean"


def test_wheel_built_from_the_sdist_has_the_backends(tmp_path: Path) -> None:
    """``python -m build`` makes the wheel from the sdist: coding_genesis/backends (a
    symlink in the checkout) must be in the sdist as files, and the backends once."""
    builder = _fresh_venv(tmp_path / "builder")
    _pip_install(builder, "hatchling>=1.24")
    sdist_dir = tmp_path / "sdist"
    done = _run(
        [
            str(builder),
            "-c",
            "import sys; from hatchling.build import build_sdist; print(build_sdist(sys.argv[1]))",
            str(sdist_dir),
        ],
        cwd=ROOT,
    )
    sdist = sdist_dir / done.stdout.split()[-1]
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1]: m for m in tf.getmembers()}
    assert members["coding_genesis/backends/__init__.py"].isfile()
    assert not any(name.startswith("backends/") for name in members)
    _build_wheel(sdist, tmp_path / "dist")
