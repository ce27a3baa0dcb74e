"""Figures of the reliability suite, collected by its tests and printed at the
end of the pytest run (see conftest.py) and written as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "add"]

#: One dict per reliability test: runs, leaked processes, zombies, fd/thread deltas...
FIGURES: list[dict[str, Any]] = []


def add(figure: dict[str, Any], json_dir: Path) -> Path:
    """Keep ``figure`` for the terminal summary and rewrite the JSON file."""
    FIGURES.append(figure)
    path = json_dir / "reliability-figures.json"
    path.write_text(json.dumps(FIGURES, indent=2))
    return path
