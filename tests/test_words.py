"""One word per concept, held: the package, the backends, the docs and README
name what a design document is about rather than its number ("spec 002"),
and spell the American way (docs/architecture.md, "One word per concept")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SOURCES = [
    *sorted((ROOT / "coding_genesis").rglob("*.py")),
    *sorted((ROOT / "backends").rglob("*.py")),
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "README.md",
]
BRITISH = re.compile(
    r"(?<![A-Za-z])(analys(e|ed|es|ing)|normalis\w*|honour\w*|behaviour\w*|colour\w*"
    r"|recognis\w*|initialis\w*|serialis\w*|authoris\w*|signall(ed|ing))(?![a-z])",
    re.IGNORECASE,
)


def _hits(pattern: re.Pattern[str]) -> list[str]:
    hits = []
    for path in SOURCES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


@pytest.mark.slow
def test_no_design_document_is_named_by_its_number() -> None:
    assert _hits(re.compile(r"\bspec 00\d", re.IGNORECASE)) == []


@pytest.mark.slow
def test_the_spelling_is_american() -> None:
    assert _hits(BRITISH) == []


def test_the_sources_are_found() -> None:
    assert len(SOURCES) > 100 and (ROOT / "README.md") in SOURCES
