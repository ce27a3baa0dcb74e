"""The benchmark harness's moving parts still work (no speed is asserted here).

The smoke run itself (``python -m benchmarks --smoke``, 40-60 s on two busy
cores) is too slow for the test suite; ``.ci/run`` runs it after the tests,
and it is what exercises the fake CLI against claude-agent-sdk (importing the
SDK alone takes seconds).  These check, in under a second each, what would
make it rot: the deterministic workload, the fake CLI streaming it through the
runner, and the report rendering every state of a figure.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmarks import data
from benchmarks.figures import PROMPT, launcher
from benchmarks.run import render_markdown, render_text
from coding_genesis import CodingGenesisAgent


def _stream(tmp_path: Path) -> data.Stream:
    return data.generate(tmp_path / "stream", 300, big_mib=(0.25,), seed=5)


def test_workload_is_deterministic_and_well_formed(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    again = data.generate(tmp_path / "again", 300, big_mib=(0.25,), seed=5)
    raw = stream.read()
    assert raw == again.read()
    lines = raw.splitlines()
    assert len(lines) == stream.lines
    assert stream.size == len(raw)
    objs = [orjson.loads(line) for line in lines]
    assert objs[0]["type"] == "system" and objs[-1]["type"] == "result"
    assert {o["type"] for o in objs[1:-1]} <= {"assistant", "user"}
    assert max(len(line) + 1 for line in lines) == stream.max_line >= 256 * 1024


@pytest.mark.slow
def test_correctness_lines_are_what_they_claim(tmp_path: Path) -> None:
    assert len(data.line_with("big", 300_000)) >= 300_000
    orjson.loads(data.line_with("big", 300_000))
    for kind in ("invalid_utf8", "broken"):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(data.line_with(kind))
    with pytest.raises(ValueError, match="unknown line kind"):
        data.line_with("nope")


def test_fake_cli_streams_through_the_runner(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    agent = CodingGenesisAgent(
        "claude",
        cli_path=launcher(tmp_path),
        env={"BENCH_FAKE_FILES": stream.files(body_repeat=2)},
        timeout=30,
    )
    result = agent.run_sync(PROMPT)
    assert result["status"] == 0, result["message"]
    assert result["lines"] == stream.lines + stream.body_lines
    assert result["skipped_lines"] == 0
    assert result["message"] == "Done: the benchmark stream is complete."


def test_reports_render_every_state() -> None:
    report = {
        "mode": "smoke",
        "date": "2026-01-01T00:00:00+00:00",
        "duration_s": 1.0,
        "command": "python -m benchmarks --smoke",
        "machine": {
            k: "x"
            for k in (
                "cpu",
                "cores",
                "memory_gib",
                "os",
                "python",
                "coding_genesis",
                "orjson",
                "anyio",
                "psutil",
                "pydantic",
                "claude-agent-sdk",
                "load_average",
            )
        },
        "stream": {"lines": 3, "mib": 0.1, "longest_mib": 0.1},
        "figures": {
            "parser": {
                "title": "1. Parser",
                "aim": "≤ 1.25×",
                "aim_met": True,
                "summary": "fine",
                "rows": [
                    {"what": "bare", "value": 1.0, "unit": "s", "baseline": True, "note": ""},
                    {"what": "ours", "value": 1.1, "unit": "s", "ratio": 1.1, "note": "n"},
                ],
            },
            "sdk": {"title": "3. SDK", "skipped": "not installed"},
            "stop": {"title": "4. Stop", "error": "worker exited with 1:\nboom"},
        },
    }
    md = render_markdown(report, before=report, before_label="earlier")
    assert "| 1. Parser | fine | ≤ 1.25× | yes |" in md
    assert "Skipped: not installed" in md
    assert "boom" in md
    assert "## Before and after the fixes" in md
    assert "1.10×" in render_text(report)


@pytest.mark.parametrize("count", [2, 3, 4])
def test_the_session_figure_gives_every_client_every_predecessor_alike(count: int) -> None:
    """Figure 8's turn order: each client its turns, and each ordered pair of
    successive turns (a client after itself included) about as often as any
    other, so the work one client leaves behind falls on all alike."""
    from collections import Counter
    from itertools import pairwise

    from benchmarks.sessions import balanced

    names = [f"c{i}" for i in range(count)]
    order = balanced(names, 20)
    assert Counter(order) == dict.fromkeys(names, 20)
    follows = Counter(pairwise(order))
    assert set(follows) == {(a, b) for a in names for b in names}
    assert max(follows.values()) - min(follows.values()) <= 3
    # A fixed round, by contrast, gives each client one predecessor.
    assert len(Counter(pairwise(names * 20))) == count


def test_the_bare_acp_loop_speaks_to_an_acp_agent(tmp_path: Path) -> None:
    """Figure 11's baseline (``benchmarks.acp.BareAcp``) against the fake ACP agent: a text
    turn's answer, a permission request answered allow-once and stamped (its round trip
    ends at the call's completed update), the agent's other requests refused (-32601)."""
    import asyncio
    import os

    from benchmarks.acp import BareAcp

    fake = str(Path(__file__).parent / "fakes" / "bin" / "gemini")

    async def drive() -> tuple[str, str, str, BareAcp]:
        bare = BareAcp([fake, "--acp"], dict(os.environ), str(tmp_path))
        try:
            await bare.start("default")
            text = await bare.prompt("hello there")
            asked = await bare.prompt('ASK execute {"command": "touch x"}')
            overlap = await bare.prompt("OVERLAP")
        finally:
            await bare.close()
        return text, asked, overlap, bare

    text, asked, overlap, bare = asyncio.run(asyncio.wait_for(drive(), 30))
    assert text == "fake gemini got: hello there"
    assert asked == "allowed allow_once", asked  # the option of kind allow_once
    assert len(bare.stamps.approvals) == 1, bare.stamps  # ASK: its call completed
    assert all(0 <= s < 30 for s in bare.stamps.approvals)
    assert overlap == (
        "answers: fs/read_text_file=-32601 terminal/create=-32601 "
        "craft/drainMidTurnQueue=-32601 permission=proceed_once"
    ), overlap
