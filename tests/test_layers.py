"""The layers of docs/architecture.md hold: `lint-imports` checks the contracts
in pyproject.toml (run by .ci/run), and a broken layer makes it fail; no private
name crosses its subpackage."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "coding_genesis"


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return str(exe)


def _copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copytree(
        PACKAGE,
        project / "coding_genesis",
        symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return project


def _run(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(project)},
    )


def test_the_contracts_hold_and_a_broken_layer_fails(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    kept = _run(project)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "0 broken" in kept.stdout, kept.stdout

    # One forbidden import: the supervision layer reaching up to the agent.
    process = project / "coding_genesis" / "_supervision" / "process.py"
    process.write_text(process.read_text() + "\nimport coding_genesis.agent  # noqa\n")
    broken = _run(project)
    assert broken.returncode != 0, broken.stdout
    assert "coding_genesis._supervision.process -> coding_genesis.agent" in broken.stdout


def test_a_type_checking_import_counts(tmp_path: Path) -> None:
    """An annotation is an edge like any other: one imported for type checkers
    only, from the supervision layer up to the agent, breaks the layers too."""
    project = _copy_project(tmp_path)
    process = project / "coding_genesis" / "_supervision" / "process.py"
    process.write_text(
        process.read_text()
        + "\nif TYPE_CHECKING:\n    from coding_genesis.agent import CodingGenesisAgent  # noqa\n"
    )
    broken = _run(project)
    assert broken.returncode != 0, broken.stdout
    assert "coding_genesis._supervision.process -> coding_genesis.agent" in broken.stdout


def test_the_server_sits_below_the_command_line(tmp_path: Path) -> None:
    """``genesis serve`` hands the server what the command line found; the
    server never reaches up into ``_cli`` (not even lazily, in a function)."""
    project = _copy_project(tmp_path)
    requests = project / "coding_genesis" / "_serve" / "requests.py"
    requests.write_text(
        requests.read_text()
        + "\n\ndef _up() -> object:\n"
        + "    from coding_genesis._cli import run_many  # noqa\n\n"
        + "    return run_many\n"
    )
    broken = _run(project)
    assert broken.returncode != 0, broken.stdout
    assert "coding_genesis._serve.requests -> coding_genesis._cli.run_many" in broken.stdout


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(["coding_genesis", *parts]), path))
    return out


def _unit(module: str) -> str:
    """The subpackage a module belongs to (a top-level module is its own unit)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_crosses_its_subpackage() -> None:
    crossings = []
    for module, path in _modules():
        tree = ast.parse(path.read_text())
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if not source.startswith("coding_genesis"):
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    aliases[alias.asname or alias.name] = full
                    # importing a private *module* of one's own subpackage is fine
                    if (
                        _private(alias.name)
                        and _unit(source) != _unit(module)
                        and _unit(full) != _unit(module)
                    ):
                        crossings.append(f"{module}: from {source} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("coding_genesis") and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                target = aliases[node.value.id]
                if _unit(target) != _unit(module):
                    crossings.append(f"{module}: {node.value.id}.{node.attr} ({target})")
    assert not crossings, "\n".join(crossings)


def test_no_module_imports_the_package_root() -> None:
    """The root imports every public name (under TYPE_CHECKING, and lazily):
    a module that imports it reaches every layer at once."""
    found = []
    for module, path in _modules():
        if module == "coding_genesis":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [
                    f"{module}: import {a.name}" for a in node.names if a.name == "coding_genesis"
                ]
            elif (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module == "coding_genesis"
            ):
                found.append(f"{module}: from coding_genesis import ...")
    assert not found, "\n".join(found)


def _unmarked_lazy_imports(path: Path) -> list[int]:
    """The lines of function-level imports of the package in ``path`` that no
    ``# lazy: <why>`` comment explains (on the import, or above a run of imports)."""
    lines = path.read_text().splitlines()
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                ours = any(a.name.startswith("coding_genesis") for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                ours = node.level > 0 or (node.module or "").startswith("coding_genesis")
            else:
                continue
            if not ours:
                continue
            said = lines[node.lineno - 1 : node.end_lineno]
            at = node.lineno - 2
            while at >= 0:  # up through the run of imports (and blank lines) it is in
                text = lines[at].strip()
                said.append(text)
                if (
                    text
                    and not text.startswith(("import ", "from ", "#", ")"))
                    and not (text.endswith(",") and " " not in text)
                ):
                    break
                at -= 1
            if not any("# lazy:" in line for line in said):
                found.append(node.lineno)
    return found


def test_every_function_level_import_says_why_it_is_lazy() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for _, path in _modules()
        for line in _unmarked_lazy_imports(path)
    ]
    assert not found, "add `# lazy: <why>` above or on: " + ", ".join(found)


def test_the_lazy_rule_sees_an_unmarked_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from coding_genesis import errors\n\n"
        "def g():\n    # lazy: start-up\n    import coding_genesis.errors\n"
    )
    assert _unmarked_lazy_imports(module) == [2]
