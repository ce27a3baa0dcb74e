"""Run one figure in this (fresh) process: ``python -m benchmarks.worker NAME PARAMS OUT``.

PARAMS and OUT are JSON files.  A fresh process per figure keeps one figure's
memory, imports and garbage out of the next one's numbers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .figures import FIGURES, PROBES


def main(argv: list[str]) -> int:
    name, params_path, out_path = argv
    params = json.loads(Path(params_path).read_text())
    fn = PROBES[name] if name in PROBES else FIGURES[name][1]
    result = fn(params)
    Path(out_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
