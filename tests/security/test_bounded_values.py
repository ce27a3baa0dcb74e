"""Finding 1: a CLI line nested hundreds of levels deep never makes a run
raise, nor drops its event; every consumer sees a bounded, marked value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from coding_genesis._cli.main import main
from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._util.parser import MAX_DEPTH, TOO_DEEP, JsonLinesParser, bound_depth
from coding_genesis._util.redact import Redactor
from tests.support import FakeCLI, present, recorded_events

SECRET = "sk-ant-deep-Zq9secretvalue"


def nested(depth: int, leaf: Any) -> str:
    """JSON text of ``depth`` nested objects around ``leaf`` (built as text:
    no JSON library has to recurse that deep to make it)."""
    return '{"a":' * depth + json.dumps(leaf) + "}" * depth


def deep_tool_line(depth: int, leaf: str) -> str:
    return (
        '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1",'
        '"name":"Deep","input":' + nested(depth, leaf) + "}]}}"
    )


def deep_result_line(depth: int, leaf: str) -> str:
    return (
        '{"type":"result","subtype":"success","is_error":false,"result":"done",'
        '"session_id":"s1","usage":' + nested(depth, leaf) + "}"
    )


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def script(fake: FakeCLI, depth: int, leaf: str) -> None:
    fake.script(
        [
            {"init": True},
            {"raw": deep_tool_line(depth, leaf), "nl": True},
            {
                "emit": {
                    "type": "user",
                    "message": {
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]
                    },
                }
            },
            {"raw": deep_result_line(depth, leaf), "nl": True},
        ]
    )


def decode(data: bytes) -> list[dict[str, Any]]:
    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally
    from coding_genesis.backends import get_backend

    seen: list[dict[str, Any]] = []
    translator = get_backend("claude").translator()
    Decoder(translator, RunTally("/tmp"), on_event=lambda e: seen.append(e.to_dict())).feed_all(
        data
    )
    return seen


def test_the_decoder_bounds_depth_and_marks_the_cut() -> None:
    for depth in (300, 990):
        (call,) = [
            e
            for e in decode(deep_tool_line(depth, "leaf").encode() + b"\n")
            if e["type"] == "tool_call"
        ]
        assert depth_of(call["input"]) <= MAX_DEPTH
        assert TOO_DEEP in orjson.dumps(call).decode()
        (usage,) = [
            e for e in decode(deep_result_line(depth, "x").encode()) if e["type"] == "usage"
        ]
        assert depth_of(usage["usage"]) <= MAX_DEPTH
    # A shallow value is the very object the parser gave (no copy, no cost).
    shallow = {"type": "x", "a": [1, {"b": 2}]}
    assert JsonLinesParser().feed(orjson.dumps(shallow) + b"\n") == [shallow]
    assert bound_depth(shallow) is shallow
    # Brackets inside strings are not nesting: kept whole.
    text = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "{[" * 500}}
            ]
        },
    }
    (call,) = [e for e in decode(orjson.dumps(text) + b"\n") if e["type"] == "tool_call"]
    assert call["input"] == {"command": "{[" * 500}


def test_consumers_never_raise_on_deep_values_from_the_library_api() -> None:
    deep: Any = "leaf " + SECRET
    for _ in range(2000):
        deep = {"a": deep}
    assert TOO_DEEP.encode() in safe_dumps({"usage": deep})
    redacted = Redactor({"API_KEY": SECRET}).deep({"usage": deep})
    assert SECRET not in safe_dumps(redacted).decode()


@pytest.mark.parametrize("depth", [300, 990])
@pytest.mark.parametrize("with_secret", [False, True], ids=["no-secret", "secret"])
def test_a_deeply_nested_line_never_breaks_a_run(
    tmp_path: Path, depth: int, with_secret: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaf = f"leaf {SECRET}" if with_secret else "leaf"
    if with_secret:
        monkeypatch.setenv("GENESIS_TEST_API_KEY", SECRET)
    else:
        monkeypatch.delenv("GENESIS_TEST_API_KEY", raising=False)
    fake = FakeCLI(tmp_path, "claude")
    script(fake, depth, leaf)
    base = tmp_path / "runs"
    seen: list[dict[str, Any]] = []
    agent = fake.agent(transcripts=base, cwd=tmp_path)
    agent.subscribe(lambda e: seen.append(e.to_dict()))
    result = agent.run_sync("go")

    assert result["status"] == 0, result
    assert result["tool_calls"] == 1
    assert result["skipped_lines"] == 0
    assert depth_of(result["usage"]) <= MAX_DEPTH
    calls = [e for e in seen if e["type"] == "tool_call"]
    assert len(calls) == 1 and TOO_DEEP in json.dumps(calls[0])

    run_dir = Path(present(result["transcript"]))
    stored = json.loads((run_dir / "result.json").read_text())
    assert stored["status"] == 0 and TOO_DEEP in json.dumps(stored["usage"])
    events = recorded_events(run_dir)
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["Deep"]
    assert TOO_DEEP in json.dumps([e for e in events if e["type"] == "tool_call"])
    if with_secret:
        for name in ("result.json", "events.jsonl", "stdout.jsonl"):
            assert SECRET not in (run_dir / name).read_text(), name
        assert SECRET not in json.dumps(events)
        assert SECRET not in json.dumps(result)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [300, 990])
def test_genesis_run_events_and_show_survive_deep_lines(
    tmp_path: Path, depth: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GENESIS_TEST_API_KEY", SECRET)
    fake = FakeCLI(tmp_path, "claude")
    script(fake, depth, f"leaf {SECRET}")
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    base = tmp_path / "runs"
    argv = ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", str(base)]
    assert main([*argv, "--events", "go"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [e["name"] for e in lines if e.get("type") == "tool_call"] == ["Deep"]
    assert lines[-1]["status"] == 0

    assert main([*argv, "--json", "go"]) == 0
    assert json.loads(capsys.readouterr().out)["tool_calls"] == 1

    assert main(["show", "last", "--transcript-dir", str(base)]) == 0
    out = capsys.readouterr().out
    assert "Deep" in out and SECRET not in out
    assert main(["show", "last", "--events", "--transcript-dir", str(base)]) == 0
    shown = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [e["name"] for e in shown if e["type"] == "tool_call"] == ["Deep"]
