"""The fake ACP agent of ``bin/gemini --acp``, ``bin/qwen --acp``, ``bin/opencode acp``: the one
the conformance kit ships (``coding_genesis/testing/fake_acp.py``, standard library only; its
docstring lists what each prompt does), loaded from its file so that a fake agent's start does
not import the package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["main"]


def _kit_fake() -> ModuleType:
    package = importlib.util.find_spec("coding_genesis")
    assert package is not None and package.submodule_search_locations
    path = Path(next(iter(package.submodule_search_locations))) / "testing" / "fake_acp.py"
    spec = importlib.util.spec_from_file_location("_genesis_fake_acp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    result: int = _kit_fake().main()
    return result


if __name__ == "__main__":
    sys.exit(main())
