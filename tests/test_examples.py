"""The examples of the docs' Embedding page (docs/embedding.md): shown verbatim, and run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import SUBREAPER_WRAPPER

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
EMBEDDING = (ROOT / "docs" / "embedding.md").read_text()


def run_example(name: str, timeout: float = 60) -> str:
    # Under a subreaper of its own: the processes of the example's Ray cluster
    # outlive it briefly, and must not become children of this test process.
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER_WRAPPER, sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", ["embed_asyncio.py", "embed_langgraph.py", "embed_ray.py"])
def test_docs_show_the_example_verbatim(name: str) -> None:
    code = (EXAMPLES / name).read_text()
    assert f"```python\n{code}```" in EMBEDDING


@pytest.mark.slow
def test_asyncio_example() -> None:
    out = run_example("embed_asyncio.py").splitlines()
    assert out[-4:] == [
        "0 0 None None",
        "1 1 cli_error agent_error",
        "2 1 cli_error rate_limit",
        "3 1 incomplete partial",
    ]
    assert "  #2 run_started" in out


@pytest.mark.slow
def test_langgraph_example_streams_events() -> None:
    pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
    out = run_example("embed_langgraph.py").splitlines()
    events = [line.removeprefix("event: ") for line in out if line.startswith("event: ")]
    assert events[:2] == ["state", "run_started"]
    assert events[-1] == "run_finished"
    assert "text" in events
    assert out[-1].startswith("status: 0 message: ")


@pytest.mark.slow
def test_ray_example() -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    out = run_example("embed_ray.py", timeout=110).splitlines()
    assert out[-1] == "[(0, 0), (1, 1), (2, 0), (3, 1), (4, 0), (5, 1), (6, 0), (7, 1)]"
