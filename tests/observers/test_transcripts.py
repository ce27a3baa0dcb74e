"""Transcripts: every run leaves a directory that loses nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis import AgentState, CodingGenesisAgent, ConfigError
from coding_genesis._observers.records import RunLookupError, find_run, list_runs
from coding_genesis._observers.transcript import Transcript
from coding_genesis._util.redact import Redactor
from tests.support import EventLog, FakeCLI, recorded_events

SECRET = "sk-test-Zq81secretvalue"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_a_run_records_raw_stdout_events_stderr_and_result(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"raw": "not json at all"},
            {"raw_hex": "7b22747970 65223a20ff7d0a".replace(" ", "")},  # invalid UTF-8 line
            {"emit": {"type": "stream_event", "event": {"delta": "ignored by the parser"}}},
            {"answer": "done"},
            {"stderr": "warning: something on stderr"},
        ]
    )
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base)
    log = EventLog(agent)
    result = agent.run_sync("do it")

    assert result["status"] == 0
    run_dir = base / result["run_id"]
    assert result["transcript"] == str(run_dir)
    # Raw stdout: byte for byte what the fake printed, skipped lines included.
    raw = (run_dir / "stdout.jsonl").read_bytes()
    assert b"not json at all\n" in raw
    assert b'{"type": \xff}\n' in raw
    assert b"ignored by the parser" in raw
    assert raw.count(b"\n") == result["lines"]
    assert result["skipped_lines"] == 2
    # Events: exactly what subscribers saw, in order (the runner's own recorded
    # in events.jsonl, the CLI's decoded from stdout.jsonl by the same decoder).
    unstamped = [
        {k: v for k, v in e.items() if k not in ("seq", "ts", "timestamp")} for e in log.events
    ]
    assert recorded_events(run_dir) == unstamped
    assert [e["type"] for e in lines(run_dir / "events.jsonl")] == [
        "state",
        "run_started",
        "state",
        "run_finished",
    ]
    assert [e["type"] for e in log.events][:2] == ["state", "run_started"]
    assert log.events[-1]["type"] == "run_finished"
    # Result and stderr tail.
    assert json.loads((run_dir / "result.json").read_text()) == result
    assert "warning: something on stderr" in (run_dir / "stderr.txt").read_text()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["run_id"] == result["run_id"]
    assert meta["backend"] == "claude"
    assert meta["prompt"] == "do it"
    assert oct(run_dir.stat().st_mode & 0o777) == oct(0o700)


def test_transcripts_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCLI(tmp_path, "claude")
    agent = fake.agent(transcripts=False)
    assert agent.transcript_dir is None
    result = agent.run_sync("hello")
    assert result["status"] == 0 and result["transcript"] is None

    # Where `genesis` records runs is decided at the CLI edge, from its options
    # and the environment; the library takes an explicit directory or none.
    from coding_genesis._cli.env import transcript_dir

    monkeypatch.setenv("GENESIS_TRANSCRIPTS", "off")
    assert transcript_dir() is None
    assert transcript_dir("off") is None
    assert transcript_dir(str(tmp_path / "x")) == tmp_path / "x"
    monkeypatch.setenv("GENESIS_TRANSCRIPTS", str(tmp_path / "env"))
    assert transcript_dir() == tmp_path / "env"
    assert CodingGenesisAgent("failer").transcript_dir is None
    monkeypatch.delenv("GENESIS_TRANSCRIPTS")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert transcript_dir() == tmp_path / "state" / "coding-genesis" / "runs"


def test_the_test_session_never_writes_into_the_real_home() -> None:
    from coding_genesis._cli.env import transcript_dir

    assert CodingGenesisAgent("failer").transcript_dir is None  # the library: none
    assert str(transcript_dir()) == os.environ["GENESIS_TRANSCRIPTS"]  # genesis: here
    home = os.path.expanduser("~")
    assert not os.environ["GENESIS_TRANSCRIPTS"].startswith(os.path.join(home, ".local"))


def test_secrets_are_redacted_everywhere_raw_stdout_included(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"answer": f"the key is {SECRET} ok"},
            {"stderr": f"auth with {SECRET}"},
        ]
    )
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base, env={"MY_API_KEY": SECRET})
    result = agent.run_sync("show me the key")
    assert SECRET not in json.dumps(result)
    run_dir = base / result["run_id"]
    for path in run_dir.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path.name
    raw = (run_dir / "stdout.jsonl").read_bytes()
    assert b"the key is [REDACTED] ok" in raw
    assert raw.count(b"\n") == result["lines"]  # nothing else changed


@pytest.mark.parametrize("size", [1, 2, 5, 7, 64])
def test_raw_redaction_holds_across_any_chunk_boundary(
    tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("coding_genesis._observers.transcript._MAX_HOLD", 16)  # long lines too
    redactor = Redactor({"X_TOKEN": SECRET, "OTHER_SECRET": "short-but-ok-value"})
    transcript = Transcript(tmp_path, "r1", redactor)
    data = (
        f'{{"a": "{SECRET}"}}\n'.encode()
        + b"plain line\n"
        + f"{SECRET}{SECRET}short-but-ok-value tail".encode()
    )
    transcript.new_attempt()
    tap = transcript.raw
    for start in range(0, len(data), size):
        tap(data[start : start + size])
    transcript.finish({"status": 0})
    written = (tmp_path / "r1" / "stdout.jsonl").read_bytes()
    redacted = Redactor({"X_TOKEN": SECRET, "OTHER_SECRET": "short-but-ok-value"})
    assert written == redacted.text(data.decode()).encode()
    assert SECRET.encode() not in written


def test_with_secrets_raw_stdout_still_goes_out_line_by_line(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path, "r3", Redactor({"A_TOKEN": SECRET}))
    transcript.new_attempt()
    tap = transcript.raw
    tap(b'{"line": 1}\n{"line": 2, "key": "' + SECRET[:5].encode())
    # Complete lines are on disk at once; only the unfinished one waits.
    assert (tmp_path / "r3" / "stdout.jsonl").read_bytes() == b'{"line": 1}\n'
    tap(SECRET[5:].encode() + b'"}\n')
    assert (tmp_path / "r3" / "stdout.jsonl").read_bytes() == (
        b'{"line": 1}\n{"line": 2, "key": "[REDACTED]"}\n'
    )
    transcript.close()


def test_without_secrets_raw_stdout_is_written_through_untouched(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path, "r2", Redactor({}))
    transcript.new_attempt()
    tap = transcript.raw
    tap(b'{"partial": ')
    # Written as received: a reader sees the bytes before the line is complete.
    assert (tmp_path / "r2" / "stdout.jsonl").read_bytes() == b'{"partial": '
    tap(b"1}\n\xff\xfe\n")
    transcript.close()
    assert (tmp_path / "r2" / "stdout.jsonl").read_bytes() == b'{"partial": 1}\n\xff\xfe\n'


def test_the_transcript_is_written_as_the_run_goes_and_a_cancelled_run_says_so(
    tmp_path: Path, portal: BlockingPortal
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    tool = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "a.py"}}
            ]
        },
    }
    fake.script([{"init": True}, {"emit": tool}, {"hang": True}])
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base, grace=0.2)
    log = EventLog(agent)
    future, cancel_scope = portal.start_task(_cancellable, agent)
    deadline = time.monotonic() + 10
    while not log.of("tool_call"):
        assert time.monotonic() < deadline, "no tool call seen"
        time.sleep(0.01)
    run_dir = base / log.events[0]["run_id"]
    # Mid-run: the raw line and the events of every chunk read so far are on disk.
    assert b'"tool_use"' in (run_dir / "stdout.jsonl").read_bytes()
    assert "tool_call" in [e["type"] for e in recorded_events(run_dir)]
    assert "run_started" in [e["type"] for e in lines(run_dir / "events.jsonl")]
    assert not (run_dir / "result.json").exists()

    portal.call(cancel_scope.cancel)
    assert future.result(timeout=10) is None
    assert agent.state is AgentState.READY
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == 130 and result["error"] == "cancelled"
    assert result["tool_calls"] == 1 and result["tool_usage"] == {"Write": 1}
    assert result["files_modified"] == ["a.py"]
    assert result["session_id"] == recorded_events(run_dir)[2]["session_id"]
    assert recorded_events(run_dir)[-1]["type"] == "run_finished"


async def _cancellable(agent: CodingGenesisAgent, *, task_status: Any) -> None:
    import anyio

    with anyio.CancelScope() as scope:
        task_status.started(scope)
        await agent.run("write a.py")


def test_an_unwritable_transcript_dir_never_breaks_a_run(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    fake = FakeCLI(tmp_path, "claude")
    result = fake.agent(transcripts=blocker / "runs").run_sync("hello")
    assert result["status"] == 0
    assert result["transcript"] is None
    assert any("transcript not written" in w for w in result["warnings"])


@pytest.mark.slow
def test_runs_are_listed_newest_first_and_found_by_prefix(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base)
    first = agent.run_sync("first")
    second = agent.run_sync("second")
    runs = list_runs(base)
    assert [r.run_id for r in runs] == [second["run_id"], first["run_id"]]
    assert find_run(base, "last").run_id == second["run_id"]
    assert find_run(base, "-2").run_id == first["run_id"]
    assert find_run(base, first["run_id"][:10]).result == first
    with pytest.raises(RunLookupError, match="no recorded run"):
        find_run(base, "0" * 32)
    with pytest.raises(RunLookupError, match="not a run id"):
        find_run(base, "../etc")
    with pytest.raises(RunLookupError, match="out of range"):
        find_run(base, "-3")


@pytest.mark.slow
def test_event_timestamps_are_exactly_what_datetime_gives() -> None:
    import datetime as dt
    import random

    from coding_genesis._util.timestamps import iso_ms as _iso

    rng = random.Random(6)
    now = time.time()
    samples = [now + rng.uniform(-1e8, 1e8) for _ in range(20_000)]
    samples += [now + k * 1e-7 for k in range(20_000)]  # many in one second, all roundings
    samples += [1795309431.9999996, 1795309431.0000004, 1795309431.9995, 1.5]
    for ts in samples:
        expected = dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds")
        assert _iso(ts) == expected, ts
    assert _iso(0.0) == "" and _iso(float("nan")) == ""


@pytest.mark.slow
def test_text_that_is_not_unicode_and_impossible_paths_never_break_a_run(
    tmp_path: Path,
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    base = tmp_path / "runs"
    # A request refused before it starts is answered, and is no run: nothing recorded.
    result = fake.agent(transcripts=base).run_sync("bad \ud800 text")
    assert result["status"] == 64 and result["error"] == "invalid_request"
    assert result["run_id"] == "" and not base.exists()
    # Text that is not valid Unicode in what a run records is stored with U+FFFD.
    fake.script([{"init": True}, {"raw_hex": "7b2274797065223a22ff227d0a"}, {"answer": "ok"}])
    result = fake.agent(transcripts=base).run_sync("bad \udcff text?")
    assert result["status"] == 64  # a lone surrogate is refused, like a NUL byte
    result = fake.agent(transcripts=base).run_sync("good text")
    assert result["status"] == 0
    assert json.loads((base / result["run_id"] / "result.json").read_text())["status"] == 0

    with pytest.raises(ConfigError):  # a path no directory can have: a clear error
        fake.agent(transcripts=str(tmp_path / "nul\0byte"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = fake.agent(transcripts=blocker / "runs").run_sync("hello")
    assert result["status"] == 0 and result["transcript"] is None
    assert any("transcript not written" in w for w in result["warnings"])
