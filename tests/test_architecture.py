"""The architecture page (docs/architecture.md) names every module of the tree
as it is: each path in its module table exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "coding_genesis"


def _table_rows() -> list[tuple[str, str]]:
    text = PAGE.read_text()
    section = text.split("## Where every module went", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows.append((cells[0], cells[1]))
    return rows


def test_the_module_table_covers_the_old_flat_layout() -> None:
    befores = {re.sub(r"`", "", before) for before, _ in _table_rows()}
    assert len(befores) >= 55, befores
    assert {"process.py", "agent.py", "failures.py", "commands/*.py"} <= befores


def test_every_new_path_the_table_names_exists() -> None:
    missing = []
    for _, after in _table_rows():
        for path in re.findall(r"`([^`]+)`", after):
            if "*" in path:
                folder = PACKAGE / path.split("*", 1)[0]
                if not any(folder.glob("*.py")):
                    missing.append(path)
            elif not (PACKAGE / path).is_file():
                missing.append(path)
    assert not missing, f"the architecture page names modules that do not exist: {missing}"


def test_every_module_of_the_package_is_named_by_the_tree_table() -> None:
    """The page's tree table names each top-level entry of the package."""
    text = PAGE.read_text().split("## Layers", 1)[0]
    named = set(re.findall(r"`([\w/.]+?)/?`", text))
    entries = {
        p.name
        for p in PACKAGE.iterdir()
        if not p.name.startswith("__") and p.name != "py.typed" and p.suffix in (".py", "")
    }
    assert entries <= named | {"backends"}, entries - named


def test_no_module_is_over_600_lines_and_the_agent_class_is_small() -> None:
    import ast

    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if "backends" not in p.parts and (n := len(p.read_text().splitlines())) > 600
    }
    assert not long, long
    agent = ast.parse((PACKAGE / "agent.py").read_text())
    cls = next(
        n for n in agent.body if isinstance(n, ast.ClassDef) and n.name == "CodingGenesisAgent"
    )
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 <= 450
