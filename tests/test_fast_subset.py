"""The fast subset of the tests (issue 45): README names one command that leaves out the
real CLIs and the tests marked ``slow``, the contributor docs name the same one, README's
test command (the one ``.ci/run`` runs) still runs everything, and every area of the suite
keeps tests in the fast subset.

A test is marked where it is written (``@pytest.mark.slow``, a module's ``pytestmark``, or
``@slow`` on a scenario), never from a list kept elsewhere: the checks below read those.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TESTS = ROOT / "tests"
FAST = 'python -m pytest -m "not real_cli and not slow"'
#: Tests of the real CLIs only, by design: all of them are ``real_cli``.
ONLY_REAL_CLI = {"real_cli"}


def test_the_markers_of_the_fast_subset_are_registered(pytestconfig: pytest.Config) -> None:
    # An unregistered mark is a warning, which filterwarnings turns into an error.
    names = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert {"real_cli", "slow"} <= names


def test_readme_and_getting_started_name_the_fast_subset() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        assert f"`{FAST}`" in page.read_text(), f"{page.name} does not name `{FAST}`"


def test_readme_s_test_command_selects_every_test(pytestconfig: pytest.Config) -> None:
    readme = (ROOT / "README.md").read_text()
    assert re.search(r'pip install -e "\.\[test\]" && python -m pytest$', readme, re.M)
    assert re.search(r"^python -m pytest$", (ROOT / ".ci" / "run").read_text(), re.M)
    addopts = shlex.split(str(pytestconfig.getini("addopts")))
    assert not {"-m", "-k"} & set(addopts), addopts


def _is_slow(node: ast.expr) -> bool:
    """``pytest.mark.slow``, alone or in a list of marks."""
    if isinstance(node, ast.List):
        return any(_is_slow(item) for item in node.elts)
    return ast.unparse(node) == "pytest.mark.slow"


def fast_tests(module: Path) -> list[str]:
    """The test functions of ``module`` that carry no ``slow`` mark."""
    tree = ast.parse(module.read_text())
    marks = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "pytestmark"
    ]
    if any(_is_slow(mark) for mark in marks):
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
        and not any(_is_slow(d) for d in node.decorator_list)
    ]


def test_a_slow_mark_is_found_on_the_function_and_on_the_module(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "import pytest\n\n@pytest.mark.slow\ndef test_a(): ...\n\n"
        "@pytest.mark.timeout(5)\ndef test_b(): ...\n"
    )
    assert fast_tests(module) == ["test_b"]
    module.write_text(
        "import pytest\n\npytestmark = [pytest.mark.anyio, pytest.mark.slow]\n\ndef test_a(): ...\n"
    )
    assert fast_tests(module) == []


def test_every_area_keeps_tests_in_the_fast_subset() -> None:
    areas = {p.parent for p in TESTS.rglob("test_*.py")}
    assert len(areas) >= 15
    bare = sorted(
        area.relative_to(TESTS).as_posix()
        for area in areas
        if area.name not in ONLY_REAL_CLI
        and not any(fast_tests(module) for module in area.glob("test_*.py"))
    )
    assert not bare, f"every test of {bare} is marked slow: leave a quick one in each"


def quick_scenarios(feature: Path) -> list[str]:
    """The scenarios of ``feature`` without a ``@slow`` tag (pytest-bdd reads tags as marks;
    a tag line stands right above what it tags)."""
    lines = feature.read_text().splitlines()
    tagged = {i + 1 for i, line in enumerate(lines) if "@slow" in line.split()}
    if any(line.lstrip().startswith("Feature:") for i, line in enumerate(lines) if i in tagged):
        return []
    return [
        line.strip()
        for i, line in enumerate(lines)
        if line.lstrip().startswith(("Scenario:", "Scenario Outline:")) and i not in tagged
    ]


def test_every_feature_keeps_a_scenario_in_the_fast_subset(tmp_path: Path) -> None:
    sample = tmp_path / "x.feature"
    sample.write_text("Feature: x\n  @slow\n  Scenario: a\n    Given a\n\n  Scenario: b\n")
    assert quick_scenarios(sample) == ["Scenario: b"]
    features = sorted((TESTS / "features").glob("*.feature"))
    assert len(features) >= 15
    bare = [page.name for page in features if not quick_scenarios(page)]
    assert not bare, f"every scenario of {bare} is tagged @slow: leave a quick one in each"
