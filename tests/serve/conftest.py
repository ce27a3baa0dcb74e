"""The serve extra is optional: without FastAPI and uvicorn these tests skip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="genesis serve needs the serve extra (fastapi)")
pytest.importorskip("uvicorn", reason="genesis serve needs the serve extra (uvicorn)")
pytest.importorskip("httpx", reason="the server's tests need httpx (the test extra)")

from tests.serve.support import Served, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for a module's route tests (each test starts its own runs)."""
    tmp: Path = tmp_path_factory.mktemp("serve")
    with serving(tmp, "--concurrency", "2", "--queue", "50") as server:
        yield server
