"""Transcripts keep the raw stdout; the CLI's events are derived from it on
reading, and observers hear only the kinds they ask for."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coding_genesis._observers.records import read_run
from coding_genesis._pipeline.bus import EventBus
from coding_genesis.backends import translator_for
from coding_genesis.events import EventKind, TextEvent
from coding_genesis.observer import RunInfo
from coding_genesis.run_events import LIFECYCLE_KINDS, RunStartedEvent
from tests.support import EventLog, FakeCLI, present, recorded_events

SECRET = "sk-test-Derived81secretvalue"


class _Recorder:
    """An observer whose run observers keep what they hear."""

    def __init__(self, kinds: frozenset[EventKind] | None) -> None:
        self.kinds = kinds
        self.heard: list[str] = []

    def start(self, run: RunInfo) -> _RecorderRun:
        return _RecorderRun(self)


class _RecorderRun:
    def __init__(self, owner: _Recorder) -> None:
        self._owner = owner
        if owner.kinds is not None:
            self.event_kinds = owner.kinds

    def event(self, event: Any) -> None:
        self._owner.heard.append(event.kind.value)

    def stdout(self, chunk: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def response_fields(self) -> Mapping[str, Any]:
        return {}

    def finish(self, response: Mapping[str, Any]) -> None:
        pass


TOOL = {
    "type": "assistant",
    "message": {
        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
    },
}


def test_observers_hear_the_kinds_they_ask_for(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"emit": TOOL}, {"answer": "done"}])
    some = _Recorder(frozenset({EventKind.RUN_STARTED, EventKind.TOOL_CALL}))
    every = _Recorder(None)
    result = fake.agent(observers=[some, every]).run_sync("go")
    assert result["status"] == 0, result
    assert some.heard == ["run_started", "tool_call"]
    assert every.heard[:2] == ["state", "run_started"] and every.heard[-1] == "run_finished"
    assert {"session", "tool_call", "text", "result"} <= set(every.heard)


def test_a_bus_subscriber_with_kinds_hears_only_those() -> None:
    bus = EventBus("a")
    heard: list[str] = []
    assert not bus.has_subscribers and not bus.wants(EventKind.TEXT)
    unsubscribe = bus.subscribe(lambda e: heard.append(e.kind.value), kinds=LIFECYCLE_KINDS)
    assert bus.has_subscribers
    assert bus.wants(EventKind.RUN_STARTED) and not bus.wants(EventKind.TEXT)
    bus.publish(TextEvent("hi"), "r1")
    started = bus.publish(RunStartedEvent("claude", "claude", 1, "/", 1.0), "r1")
    assert heard == ["run_started"] and started.seq == 2
    unsubscribe()
    assert not bus.has_subscribers and not bus.wants(EventKind.RUN_STARTED)


def test_the_transcript_derives_the_cli_events_from_stdout(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("GENESIS_TEST_API_KEY", SECRET)
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"emit": TOOL},
            {
                "emit": {
                    "type": "assistant",
                    "message": {"content": [{"type": "text", "text": f"key {SECRET}"}]},
                }
            },
            {"answer": "done"},
        ]
    )
    base = tmp_path / "runs"
    agent = fake.agent(transcripts=base)
    log = EventLog(agent)
    result = agent.run_sync("go")
    assert result["status"] == 0, result
    run_dir = Path(present(result["transcript"]))
    # Only the runner's own events are written; the CLI's come from stdout.jsonl.
    written = [json.loads(x)["type"] for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert set(written) <= {k.value for k in LIFECYCLE_KINDS}
    assert json.loads((run_dir / "meta.json").read_text())["layout"] == 2
    derived = recorded_events(run_dir, stamps=True)
    live = log.events
    assert [e["type"] for e in derived] == [e["type"] for e in live]
    started = next(e for e in live if e["type"] == "run_started")
    after = next(
        e
        for e in derived
        if e["type"] not in {"state", "run_started"}
        and e["type"] in {k.value for k in LIFECYCLE_KINDS}
    )
    previous = started["ts"]
    for event in derived:
        if event["type"] not in {k.value for k in LIFECYCLE_KINDS}:
            # Decoded on reading: the attempt's run id, agent and seq; a time estimated
            # within the attempt, in the order printed (issue 28: no longer all its start).
            assert event["run_id"] == result["run_id"] and event["node"] == started["node"]
            assert event["seq"] == started["seq"] and event["ts_estimated"] is True
            assert previous <= event["ts"] <= after["ts"]
            previous = event["ts"]
    decoded = [e for e in derived if e.get("ts_estimated")]
    assert decoded[-1]["ts"] > decoded[0]["ts"]  # spread over the attempt, not one time
    # Secrets: masked in the raw stdout, so in everything derived from it.
    assert SECRET not in (run_dir / "stdout.jsonl").read_text()
    assert SECRET not in json.dumps(derived)
    assert any("[REDACTED]" in str(e.get("text")) for e in derived if e["type"] == "text")


def test_a_transcript_of_the_earlier_layout_is_read_as_written(tmp_path: Path) -> None:
    run = tmp_path / "abc123"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"run_id": "abc123", "backend": "claude"}))
    line = {"type": "system", "subtype": "init", "session_id": "s1"}
    (run / "stdout.jsonl").write_text(json.dumps(line) + "\n")
    events = [
        {
            "type": "run_started",
            "backend": "claude",
            "program": "claude",
            "pid": 1,
            "cwd": "/",
            "timeout": 1.0,
        },
        {"type": "session", "session_id": "s1"},
        {"type": "run_finished", "status": 0, "error": None, "category": None},
    ]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    record = read_run(run)
    assert record is not None
    # Every event was in events.jsonl then: nothing is decoded twice.
    assert [e.kind.value for e in record.events(translator_for)] == [
        "run_started",
        "session",
        "run_finished",
    ]
