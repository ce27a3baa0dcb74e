"""The installed version, from the package metadata (one source: pyproject.toml).

Read on demand and cached: ``importlib.metadata`` costs about 20 ms to import,
which ``import coding_genesis`` and ``genesis --help`` do not pay.
"""

from __future__ import annotations

import functools

__all__ = ["version"]


@functools.cache
def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as _installed

    try:
        return _installed("coding-genesis")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
