"""The ``codex app-server`` codec (``CodexControl``) and its translator, on the recordings of
the real codex 0.169 (``tests/fakes/recordings/twoway/codex_*.jsonl``, made by
``tests/fakes/record_codex_control.py``) and on hostile input.

A recording is replayed through a fresh codec: every line codex wrote goes to ``receive``;
every line we wrote must be exactly what the codec writes for the same intent (the intent is
read from the recorded line: a turn's prompt, an approval's answer, an interrupt).  Each
object the codec writes is checked against the committed schema (``backends/schemas/``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from coding_genesis.approval import Decision
from coding_genesis.backend import Translator
from coding_genesis.backends import CodexBackend
from coding_genesis.backends.codex_control import FORWARDED, NOT_SERVED, OPT_OUT, CodexControl
from coding_genesis.backends.codex_events import AppServerTranslator
from coding_genesis.control import (
    FORWARD,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    TurnBegan,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.events import (
    CliRetryEvent,
    Event,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from coding_genesis.hooks import HookEvent
from coding_genesis.options import Permissions
from coding_genesis.request import Request
from coding_genesis.usage import normalize_usage
from tests.backends.schema_lite import load, problems
from tests.support import cli_request

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "fakes" / "recordings" / "twoway"
SCHEMAS = ROOT / "backends" / "schemas" / "codex-app-server"
SANDBOXES: dict[str, Permissions] = {
    "read-only": "read-only",
    "workspace-write": "edit",
    "danger-full-access": "full",
}
WORDS = {
    "accept": Decision.allow(),
    "acceptForSession": Decision.allow(always=True),
    "decline": Decision.deny(),
    "cancel": Decision.deny(end_turn=True),
}


# -- replaying a recording -------------------------------------------------------------


@dataclass
class Turn:
    events: list[Event] = field(default_factory=list)
    ended: TurnEnded | None = None
    asks: list[PermissionAsk] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@dataclass
class Replay:
    turns: list[Turn] = field(default_factory=list)
    ready: list[str | None] = field(default_factory=list)
    meanings: list[Incoming] = field(default_factory=list)
    written: list[Outgoing] = field(default_factory=list)


def lines(name: str) -> list[dict[str, Any]]:
    path = RECORDINGS / f"codex_{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _start(
    recorded: list[dict[str, Any]], index: int, hooks: frozenset[HookEvent] = frozenset()
) -> Request:
    """The session start a process of the recording was made with (from its thread
    request), with ``hooks`` (none were asked for: hooks only observe codex)."""
    for line in recorded[index:]:
        msg = line.get("msg") or {}
        if line["dir"] == ">" and msg.get("method") in ("thread/start", "thread/resume"):
            params = msg["params"]
            return cli_request(
                cwd=params["cwd"],
                approvals=params["approvalPolicy"] == "untrusted",
                permissions=SANDBOXES[params["sandbox"]],
                resume=params.get("threadId"),
                hooks=hooks,
            )
    raise AssertionError("no thread request")


def replay(name: str, hooks: frozenset[HookEvent] = frozenset()) -> Replay:
    recorded = lines(name)
    out = Replay()
    protocol = CodexControl()
    produced: list[Outgoing] = []
    asks: dict[Any, PermissionAsk] = {}
    translator: Translator = AppServerTranslator()
    for index, line in enumerate(recorded):
        msg: dict[str, Any] = line.get("msg") or {}
        if line["dir"] == "#":
            note = line["note"]
            if "process" in note:
                protocol = CodexControl()
            if "interrupt_before_turn_id" in note:
                assert protocol.interrupt() == []
            continue
        if line["dir"] == "<":
            for meaning in protocol.receive(msg):
                out.meanings.append(meaning)
                if meaning is FORWARD and out.turns:  # (not what comes before the first turn)
                    out.turns[-1].events.extend(translator.translate(msg))
                elif isinstance(meaning, Reply):
                    produced.extend(meaning.objects)
                elif isinstance(meaning, Ready):
                    out.ready.append(meaning.session_id)
                elif isinstance(meaning, PermissionAsk):
                    asks[meaning.key] = meaning
                    out.turns[-1].asks.append(meaning)
                elif isinstance(meaning, TurnEnded):
                    out.turns[-1].ended = meaning
            continue
        if not produced:  # our own intent: derive it from the line we wrote
            method = msg.get("method")
            if method == "initialize":
                produced = protocol.begin(_start(recorded, index, hooks)).greeting
            elif method == "turn/start":
                produced = protocol.begin_turn(msg["params"]["input"][0]["text"])
                translator = protocol.translator()
                out.turns.append(Turn())
            elif method == "turn/interrupt":
                produced = protocol.interrupt()
            elif method == "turn/steer":
                produced = protocol.steer(msg["params"]["input"][0]["text"])
            elif "result" in msg and "decision" in msg["result"]:
                word = msg["result"]["decision"]
                out.turns[-1].answers.append(word)
                produced = protocol.answer(asks.pop(msg["id"]), WORDS[word])
        assert produced, f"{name}: line {index + 1}: we wrote {msg}, the codec had nothing"
        ours = produced.pop(0)
        assert ours == msg, f"{name}: line {index + 1}"
        out.written.append(ours)
    assert not produced, f"{name}: the codec had more to write: {produced}"
    return out


ALL = sorted(p.stem.removeprefix("codex_") for p in RECORDINGS.glob("codex_*.jsonl"))


def test_the_recordings_are_there() -> None:
    assert {"two_turns", "command_approved", "interrupt", "steer", "resume"} <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_each_recording_replays_without_faults(name: str) -> None:
    played = replay(name)
    assert played.turns and all(turn.ended is not None for turn in played.turns)
    assert not [m for m in played.meanings if isinstance(m, ProtocolFault)]
    assert played.ready and all(played.ready)
    for turn in played.turns:
        assert len(turn.of(ResultEvent)) == 1, turn.events
        assert turn.of(SessionEvent)[0].session_id == played.ready[-1]


def usage_of(turn: Turn) -> tuple[int, int, int]:
    (usage,) = turn.of(UsageEvent)
    assert usage.usage is not None
    tokens = normalize_usage(usage.usage)
    return tokens.input, tokens.output, tokens.cache_read


def test_two_turns_each_with_its_own_usage() -> None:
    played = replay("two_turns")
    assert [t.of(TextEvent)[0].text for t in played.turns] == ["First answer.", "Second answer."]
    assert [t.ended for t in played.turns] == [TurnEnded("completed")] * 2
    # codex reports the thread's running total (19, then 38 tokens): each turn has its own 19.
    assert [usage_of(t) for t in played.turns] == [(12, 7, 0), (12, 7, 0)]
    (result,) = played.turns[1].of(ResultEvent)
    assert (result.is_error, result.subtype) == (False, "turn.completed")


def test_an_approved_command() -> None:
    (turn,) = replay("command_approved").turns
    (ask,) = turn.asks
    request = ask.request
    assert (request.kind, request.tool, request.command) == (
        "command",
        "commandExecution",
        "/bin/bash -lc 'echo approved'",
    )
    assert request.tool_call_id == turn.of(ToolCallEvent)[0].id
    assert turn.answers == ["accept"]
    (call,), (done,) = turn.of(ToolCallEvent), turn.of(ToolResultEvent)
    assert (call.name, done.is_error, done.exit_code, done.output) == (
        "command_execution",
        False,
        0,
        "approved\n",
    )
    assert usage_of(turn) == (24, 14, 0)  # two model calls


def test_a_declined_command_goes_on_with_the_turn() -> None:
    (turn,) = replay("command_declined").turns
    assert turn.answers == ["decline"]
    assert turn.ended == TurnEnded("completed")
    (done,) = turn.of(ToolResultEvent)
    assert done.is_error
    assert "rejected by user" in turn.of(TextEvent)[-1].text


def test_a_refusal_that_ends_the_turn_and_the_session_goes_on() -> None:
    first, second = replay("command_declined_end_turn").turns
    assert first.answers == ["cancel"]
    assert first.ended is not None and first.ended.how == "interrupted"
    assert first.ended.message and "approver" in first.ended.message
    (result,) = first.of(ResultEvent)
    assert (result.is_error, result.subtype) == (True, "turn.interrupted")
    assert second.ended == TurnEnded("completed")


def test_an_approved_file_change_names_its_paths() -> None:
    (turn,) = replay("file_change_approved").turns
    (ask,) = turn.asks
    # The request itself carries no changes: they come from the item codex started.
    assert (ask.request.kind, ask.request.paths) == ("write", ("/srv/run/work/notes.txt",))
    assert ask.request.input["changes"][0]["kind"] == {"type": "add"}
    (call,) = turn.of(ToolCallEvent)
    assert (call.name, list(call.files)) == ("file_change", ["/srv/run/work/notes.txt"])


def test_a_moved_file_puts_both_ends_in_the_request() -> None:
    (turn,) = replay("file_change_moved").turns
    (ask,) = turn.asks
    request = ask.request
    # Recorded: codex reports `*** Move to:` as the source's change with a move_path.
    assert request.input["changes"][0]["kind"] == {
        "type": "update",
        "move_path": "/srv/run/outside/moved.txt",
    }
    assert request.paths == (
        "/srv/run/work/a.txt",
        "/srv/run/outside/moved.txt",
        "/srv/run/work/b.txt",
        "/srv/run/work/c.txt",
    )
    assert request.moves == (("/srv/run/work/a.txt", "/srv/run/outside/moved.txt"),)
    assert request.unreadable is None
    assert turn.answers == ["decline"]


def change_ask(*changes: Any, **params: Any) -> PermissionAsk:
    """The approval request of one file change announced with ``changes``."""
    protocol = ready()
    item = {"type": "fileChange", "id": "i", "changes": list(changes), "status": "inProgress"}
    started = {"threadId": "t", "turnId": "u", "item": item}
    assert protocol.receive({"method": "item/started", "params": started}) == (FORWARD,)
    asked = approval(3, "item/fileChange/requestApproval")
    asked["params"].pop("command")
    asked["params"].update(params)
    ask: PermissionAsk = only(protocol.receive(asked), PermissionAsk)
    return ask


def change(path: Any, kind: Any, **more: Any) -> dict[str, Any]:
    return {"path": path, "kind": kind, "diff": "", **more}


def test_every_path_of_a_change_is_in_the_request() -> None:
    ask = change_ask(
        change("/w/a", {"type": "update", "move_path": "/etc/x"}),
        change("/w/b", {"type": "update", "move_path": None}),
        change("/w/c", {"type": "delete"}),
        change("/w/d", {"type": "add"}),
        change("/w/a", {"type": "update"}),  # named twice: once in paths
        change("/w/e", {"type": "update", "move_path": "/w/f"}),
        grantRoot="/w",
    )
    request = ask.request
    assert request.paths == ("/w/a", "/etc/x", "/w/b", "/w/c", "/w/d", "/w/e", "/w/f", "/w")
    assert request.moves == (("/w/a", "/etc/x"), ("/w/e", "/w/f"))
    assert request.unreadable is None


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ([change("/w/a", {"type": "copy", "to": "/etc/x"})], "unknown kind"),
        ([change("/w/a", {"type": "update", "move_path": "/x", "also": "/y"})], "unknown kind"),
        ([change("/w/a", {"type": "add", "move_path": "/etc/x"})], "move of an unknown shape"),
        ([change("/w/a", {"type": "update", "move_path": 7})], "move of an unknown shape"),
        ([change("/w/a", {"type": "update", "move_path": ""})], "move of an unknown shape"),
        ([change(["/w/a"], {"type": "add"})], "path is not a string"),
        ([change("", {"type": "add"})], "path is not a string"),
        ([change("/w/a", "add")], "unknown kind"),
        ([change("/w/a", {"type": "add"}, old_path="/etc/x")], "unknown shape"),
        ([change("/w/ok", {"type": "add"}), "/w/a"], "unknown shape"),
        ([], "names no file"),
    ],
)
def test_a_change_of_a_shape_codex_does_not_write_is_unreadable(
    changes: list[Any], why: str
) -> None:
    request = change_ask(*changes).request
    assert request.unreadable is not None and why in request.unreadable, request.unreadable


def test_a_grant_root_that_is_not_a_path_is_unreadable() -> None:
    request = change_ask(change("/w/a", {"type": "add"}), grantRoot=["/"]).request
    assert request.unreadable is not None and "grantRoot" in request.unreadable


def test_changes_that_are_no_list_are_unreadable() -> None:
    protocol = ready()
    item = {"type": "fileChange", "id": "i", "changes": {"path": "/w/a"}, "status": "inProgress"}
    protocol.receive({"method": "item/started", "params": {"threadId": "t", "item": item}})
    asked = approval(3, "item/fileChange/requestApproval")
    request = only(protocol.receive(asked), PermissionAsk).request
    assert request.unreadable is not None and "no list of changes" in request.unreadable


def test_a_patch_updated_before_the_question_is_what_is_asked_about() -> None:
    protocol = ready()
    item = {"type": "fileChange", "id": "i", "changes": [change("/w/a", {"type": "add"})]}
    protocol.receive({"method": "item/started", "params": {"threadId": "t", "item": item}})
    moved = [change("/w/a", {"type": "update", "move_path": "/etc/x"})]
    updated = {"threadId": "t", "turnId": "u", "itemId": "i", "changes": moved}
    assert protocol.receive({"method": "item/fileChange/patchUpdated", "params": updated}) == (
        FORWARD,
    )
    request = only(
        protocol.receive(approval(3, "item/fileChange/requestApproval")), PermissionAsk
    ).request
    assert request.paths == ("/w/a", "/etc/x")
    # Once the item completed its changes are let go (a later question about it is unreadable).
    protocol.receive({"method": "item/completed", "params": {"threadId": "t", "item": item}})
    later = only(protocol.receive(approval(4, "item/fileChange/requestApproval")), PermissionAsk)
    assert later.request.unreadable is not None


def test_interrupts() -> None:
    first, second = replay("interrupt").turns
    assert first.ended == TurnEnded("interrupted")
    assert second.ended == TurnEnded("completed")
    (early,) = replay("interrupt_early").turns
    assert early.ended == TurnEnded("interrupted")


def test_an_interrupt_before_the_turn_is_active_waits_for_turn_started() -> None:
    """codex refuses ``turn/interrupt`` until ``turn/started``, even with the turn id known."""
    recorded = [line for line in lines("interrupt_early") if line["dir"] != "#"]
    order = [
        line["msg"].get("method") or ("response" if "id" in line["msg"] else "")
        for line in recorded
    ]
    assert order.index("turn/interrupt") == order.index("turn/started") + 1


def test_steer_reaches_the_running_turn() -> None:
    (turn,) = replay("steer").turns
    assert turn.ended == TurnEnded("completed")
    assert turn.of(TextEvent)[-1].text == "Steered answer."


def test_resume_counts_only_the_new_turn() -> None:
    played = replay("resume")
    assert played.ready[0] == played.ready[1]
    resumed = [m for m in played.written if m.get("method") == "thread/resume"]
    assert resumed[0]["params"]["excludeTurns"] is True
    # codex repeats the thread's last usage (of the old turn) on resume: not this turn's.
    assert [usage_of(t) for t in played.turns] == [(12, 7, 0), (12, 7, 0)]
    # Nor with a translator made before that repeat was heard.
    second = lines("resume")[
        [ln.get("note", {}).get("process") for ln in lines("resume")].index(2) :
    ]
    translator = AppServerTranslator()
    events = [e for ln in second if ln["dir"] == "<" for e in translator.translate(ln["msg"])]
    (usage,) = [e for e in events if isinstance(e, UsageEvent)]
    assert usage.usage is not None and normalize_usage(usage.usage).input == 12


# -- what the codec writes matches the schema ------------------------------------------

PARAMS = {
    "initialize": "v1/InitializeParams.json",
    "thread/start": "v2/ThreadStartParams.json",
    "thread/resume": "v2/ThreadResumeParams.json",
    "turn/start": "v2/TurnStartParams.json",
    "turn/steer": "v2/TurnSteerParams.json",
    "turn/interrupt": "v2/TurnInterruptParams.json",
}


def schema_problems(obj: Outgoing, schemas: Path = SCHEMAS) -> list[str]:
    """What in ``obj`` (a line the codec writes) the schema in ``schemas`` refuses."""
    if "method" in obj and "id" in obj:
        found = problems(load(schemas / "JSONRPCRequest.json"), obj)
        return found + problems(load(schemas / PARAMS[obj["method"]]), obj["params"])
    if "method" in obj:
        return problems(load(schemas / "JSONRPCNotification.json"), obj) + problems(
            load(schemas / "ClientNotification.json"), obj
        )
    if "error" in obj:
        return problems(load(schemas / "JSONRPCError.json"), obj)
    return problems(load(schemas / "JSONRPCResponse.json"), obj) + problems(
        load(schemas / "CommandExecutionRequestApprovalResponse.json"), obj["result"]
    )


_TURN_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_a_turn_sets_its_model_sandbox_and_schema_on_turn_start() -> None:
    """``turn/start`` carries the turn's own options (codex keeps model and
    sandbox for the later turns; the schema is the turn's); a turn without
    them sends none, and the turn's SessionEvent names the switched model."""
    protocol = CodexControl()
    start = cli_request(cwd="/w", model="m-a", permissions="edit")
    protocol.begin(start)
    protocol.receive({"id": 1, "result": {}})
    protocol.receive({"id": 2, "result": {"thread": {"id": "t"}, "model": "m-a"}})
    (plain,) = protocol.start_turn(start.for_turn("x"))
    assert set(plain["params"]) == {"threadId", "input"}
    translator = protocol.translator()
    turn = start.for_turn("y", model="m-b", permissions="read-only", output_schema=_TURN_SCHEMA)
    (own,) = protocol.start_turn(turn)
    params = own["params"]
    assert (params["model"], params["sandboxPolicy"]) == ("m-b", {"type": "readOnly"})
    assert params["outputSchema"]["properties"] == _TURN_SCHEMA["properties"]
    started = {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}}
    (event,) = translator.translate(started)
    assert isinstance(event, SessionEvent) and event.model == "m-b"


def everything_written() -> Iterator[Outgoing]:
    for name in ALL:
        yield from replay(name).written
    protocol = CodexControl()
    start = cli_request(cwd="/w", model="gpt-5.5", permissions="full", approvals=True)
    yield from protocol.begin(start).greeting
    (reply,) = protocol.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    yield from reply.objects
    protocol.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    for level in ("read-only", "edit", "full"):  # a turn's own options
        yield from protocol.start_turn(
            start.for_turn("x", model="m-b", permissions=level, output_schema=_TURN_SCHEMA)
        )
    protocol.begin_turn("x")
    protocol.receive({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}})
    yield from protocol.steer("more")
    yield from protocol.interrupt()
    ask = only(protocol.receive(approval(0)), PermissionAsk)
    for decision in WORDS.values():
        yield from protocol.answer(ask, decision)
    for meaning in protocol.receive({"id": 5, "method": "item/tool/call", "params": {}}):
        if isinstance(meaning, Reply):
            yield from meaning.objects


def test_every_object_the_codec_writes_matches_the_schema() -> None:
    written = list(everything_written())
    assert {o.get("method") for o in written} >= {*PARAMS, "initialized"}
    for obj in written:
        assert schema_problems(obj) == [], obj


def test_what_codex_wrote_matches_the_schema() -> None:
    """The recorded messages we read, against the files we rely on (a check of the checker)."""
    assert recorded_problems(SCHEMAS) == []


def recorded_problems(schemas: Path) -> list[str]:
    """What the schema in ``schemas`` refuses of the messages codex wrote in the
    recordings, of the kinds we read (each kind must be recorded)."""
    files = {
        "turn/completed": "v2/TurnCompletedNotification.json",
        "item/started": "v2/ItemStartedNotification.json",
        "item/completed": "v2/ItemCompletedNotification.json",
        "thread/tokenUsage/updated": "v2/ThreadTokenUsageUpdatedNotification.json",
        "item/commandExecution/requestApproval": "CommandExecutionRequestApprovalParams.json",
        "item/fileChange/requestApproval": "FileChangeRequestApprovalParams.json",
    }
    seen = set()
    found: list[str] = []
    for name in ALL:
        for line in lines(name):
            method = (line.get("msg") or {}).get("method")
            if line["dir"] == "<" and method in files:
                seen.add(method)
                found += problems(load(schemas / files[method]), line["msg"]["params"])
    assert seen == set(files)
    return found


def test_every_notification_recorded_is_known() -> None:
    for name in ALL:
        unknown = [m for m in replay(name).meanings if isinstance(m, Unknown)]
        assert unknown == [], name


def test_the_method_names_the_codec_knows_exist() -> None:
    names = json.loads((SCHEMAS / "methods.json").read_text(encoding="utf-8"))
    assert_the_codecs_methods_in(names)


def assert_the_codecs_methods_in(names: dict[str, list[str]]) -> None:
    """Each method the codec writes, answers or reads is one of ``names`` (methods.json's form)."""
    assert set(FORWARDED) <= set(names["serverNotifications"])
    assert set(OPT_OUT) <= set(names["serverNotifications"])
    assert {*PARAMS} <= set(names["clientRequests"])
    assert {"item/commandExecution/requestApproval", "item/fileChange/requestApproval"} <= set(
        names["serverRequests"]
    )


# -- the command and the opening ------------------------------------------------------


def test_command_and_thread_params() -> None:
    protocol = CodexBackend().control()
    assert isinstance(protocol, CodexControl) and protocol is not CodexBackend().control()
    assert protocol.can_steer
    start = cli_request(
        cwd="/w",
        model="gpt-5.5",
        permissions="read-only",
        max_turns=3,
        cli_max_retries=2,
        options={
            "config": {"model_provider": "fake"},
            "sandbox": "danger-full-access",
            "profile": "p",
        },
        extra_args=("--enable", "x"),
    )
    spec = protocol.begin(start).command
    assert spec.args == (
        "app-server",
        "-c",  # the project's .codex/ unread, even if the user trusted it
        'projects={"/w"={trust_level="untrusted"},"/"={trust_level="untrusted"}}',
        "-c",
        "model_provider=fake",
        "-c",
        "model_providers.fake.request_max_retries=2",
        "-c",
        "model_providers.fake.stream_max_retries=2",
        "--enable",
        "x",
    )
    assert spec.stdin is None
    assert len(spec.warnings) == 3  # max_turns, the sandbox option, the profile
    (reply,) = protocol.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    initialized, thread = reply.objects
    assert initialized == {"jsonrpc": "2.0", "method": "initialized"}
    assert thread["method"] == "thread/start"
    assert thread["params"] == {
        "cwd": "/w",
        "approvalPolicy": "never",
        "sandbox": "read-only",
        "model": "gpt-5.5",
    }


def test_approvals_ask_untrusted() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w", approvals=True))
    (reply,) = protocol.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    assert reply.objects[1]["params"] == {"cwd": "/w", "approvalPolicy": "untrusted"}


# -- hostile input ---------------------------------------------------------------------


def approval(rid: Any, method: str = "item/commandExecution/requestApproval") -> dict[str, Any]:
    params = {"threadId": "t", "turnId": "u", "itemId": "i", "startedAtMs": 1, "command": "ls"}
    return {"id": rid, "method": method, "params": params}


def ready() -> CodexControl:
    """A codec whose thread ``t`` is open and whose turn ``u`` runs."""
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w"))
    protocol.receive({"id": 1, "result": {}})
    protocol.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    protocol.begin_turn("go")
    protocol.receive({"id": 3, "result": {"turn": {"id": "u"}}})  # codex answers, then starts it
    protocol.receive({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}})
    return protocol


def only(meanings: Any, kind: type) -> Any:
    assert len(meanings) == 1 and isinstance(meanings[0], kind), meanings
    return meanings[0]


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"foo": 1},
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"id": 99, "result": {}},  # an id we never sent
        {"id": "3", "result": {}},  # ours are integers
        {"id": True, "result": {}},
        {"id": [1], "result": {}},
        {"id": None, "error": {"code": -32700, "message": "parse error"}},
        {"method": 7},
        {"method": "item/commandExecution/requestApproval", "id": 1.5, "params": {}},
        {"method": "item/commandExecution/requestApproval", "id": {"x": 1}},
        {"method": "turn/completed", "params": {"threadId": "t", "turn": "done"}},
    ],
)
def test_garbage_is_a_fault(obj: dict[str, Any]) -> None:
    only(ready().receive(obj), ProtocolFault)


def test_not_a_mapping_is_a_fault() -> None:
    for thing in ([1, 2], "text", 3, None):
        only(ready().receive(thing), ProtocolFault)  # type: ignore[arg-type]


def test_error_responses() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w"))
    fault = only(
        protocol.receive({"id": 1, "error": {"code": -32600, "message": "no"}}), ProtocolFault
    )
    assert fault.fatal and "initialize" in fault.message and "no" in fault.message
    protocol = ready()
    protocol.begin_turn("again")  # id 4 (3 was the first turn/start)
    fault = only(
        protocol.receive({"id": 4, "error": {"code": -32600, "message": "busy"}}), ProtocolFault
    )
    assert not fault.fatal
    only(protocol.receive({"id": 3, "error": "a string"}), ProtocolFault)
    # An interrupt refused after its turn ended is no fault: the race is expected.
    protocol = ready()
    (write,) = protocol.interrupt()
    protocol.receive(
        {
            "method": "turn/completed",
            "params": {"threadId": "t", "turn": {"id": "u", "status": "completed"}},
        }
    )
    assert (
        protocol.receive(
            {"id": write["id"], "error": {"code": -32600, "message": "no active turn"}}
        )
        == ()
    )


def test_a_thread_start_without_a_thread_id_is_fatal() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w"))
    protocol.receive({"id": 1, "result": {}})
    assert only(protocol.receive({"id": 2, "result": {"thread": {}}}), ProtocolFault).fatal


@pytest.mark.parametrize("method", ["item/tool/call", "item/tool/requestUserInput", "made/up"])
def test_requests_we_do_not_serve_get_an_error(method: str) -> None:
    reply = only(ready().receive({"id": 7, "method": method, "params": {}}), Reply)
    (error,) = reply.objects
    assert error["id"] == 7 and error["error"]["code"] == NOT_SERVED


def test_an_approval_without_params_is_refused_and_a_fault() -> None:
    meanings = ready().receive({"id": 7, "method": "item/fileChange/requestApproval"})
    assert [type(m) for m in meanings] == [Reply, ProtocolFault]


def test_a_file_change_it_was_not_told_of_has_no_paths() -> None:
    ask = only(ready().receive(approval(3, "item/fileChange/requestApproval")), PermissionAsk)
    assert (ask.request.kind, ask.request.paths) == ("write", ())
    assert ask.request.unreadable is not None  # denied, nobody asked


def test_unknown_and_foreign_notifications() -> None:
    protocol = ready()
    assert only(protocol.receive({"method": "made/up", "params": {}}), Unknown).type == "made/up"
    other = {"method": "turn/completed", "params": {"threadId": "x", "turn": {"id": "u"}}}
    only(protocol.receive(other), Unknown)
    assert protocol.turn_running  # another thread's turn did not end ours


def test_a_late_turn_completed_is_only_forwarded() -> None:
    protocol = ready()
    stale = {"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "old"}}}
    assert protocol.receive(stale) == (FORWARD,)


def test_input_changes_cannot_reach_codex() -> None:
    protocol = ready()
    ask = only(protocol.receive(approval(0)), PermissionAsk)
    (answer,) = protocol.answer(ask, Decision.allow({"command": "rm -rf /"}))
    assert answer == {"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}}


def test_a_failed_turn() -> None:
    protocol = ready()
    translator = protocol.translator()
    error = {
        "message": "exceeded retry limit, last status: 429 Too Many Requests",
        "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
    }
    retry = {
        "method": "error",
        "params": {
            "threadId": "t",
            "turnId": "u",
            "willRetry": True,
            "error": {"message": "Reconnecting... 1/5", "additionalDetails": "last status: 429"},
        },
    }
    events = translator.translate(retry)
    assert [e.kind for e in events] == ["cli_retry", "error"]
    retried = events[0]
    assert isinstance(retried, CliRetryEvent)
    assert (retried.attempt, retried.max_retries, retried.error_status) == (1, 5, 429)
    done = {
        "method": "turn/completed",
        "params": {"threadId": "t", "turn": {"id": "u", "status": "failed", "error": error}},
    }
    (ended,) = [m for m in protocol.receive(done) if isinstance(m, TurnEnded)]
    assert ended.how == "failed" and ended.message and "429" in ended.message
    (result,) = translator.translate(done)
    assert isinstance(result, ResultEvent)
    assert (result.is_error, result.subtype, result.api_error_status) == (True, "turn.failed", 429)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
METHODS = st.sampled_from(
    [
        "turn/completed",
        "turn/started",
        "item/started",
        "item/completed",
        "thread/tokenUsage/updated",
        "error",
        "item/fileChange/requestApproval",
        "item/commandExecution/requestApproval",
        "x",
    ]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(method=METHODS, params=JSON, rid=JSON, with_id=st.booleans())
def test_never_raises(method: str, params: Any, rid: Any, with_id: bool) -> None:
    protocol = ready()
    obj: dict[str, Any] = {"method": method, "params": params}
    if with_id:
        obj["id"] = rid
    protocol.receive(obj)
    protocol.receive({"id": rid, "result": params})
    protocol.translator().translate(obj)
    AppServerTranslator().translate(
        {
            "method": method,
            "params": {"item": params, "turn": params, "tokenUsage": params, "error": params},
        }
    )


# -- a line too deep to parse, answered from what could be read of it ----------------------


def unread(**fields: Any) -> UnparsedLine:
    return UnparsedLine({tuple(k.split("__")): v for k, v in fields.items()})


@pytest.mark.parametrize(
    ("method", "tool", "kind"),
    [
        ("item/commandExecution/requestApproval", "commandExecution", "command"),
        ("item/fileChange/requestApproval", "fileChange", "write"),
    ],
)
def test_an_unparsed_approval_request_is_declined_as_unreadable(
    method: str, tool: str, kind: str
) -> None:
    protocol = ready()
    (ask,) = protocol.unparsed(unread(method=method, id=5, params__itemId="i"))
    assert isinstance(ask, PermissionAsk)
    request = ask.request
    assert (request.tool, request.kind, request.tool_call_id) == (tool, kind, "i")
    assert request.unreadable and "too deep" in request.unreadable
    assert protocol.answer(ask, Decision.deny()) == [
        {"jsonrpc": "2.0", "id": 5, "result": {"decision": "decline"}}
    ]


def test_an_unparsed_request_of_another_kind_gets_an_error() -> None:
    reply = only(ready().unparsed(unread(method="item/tool/call", id="x")), Reply)
    (error,) = reply.objects
    assert error["id"] == "x" and error["error"]["code"] == -32602
    assert "too deep" in error["error"]["message"]


def test_an_unparsed_answer_to_our_request_fails_it() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w"))
    fault = only(protocol.unparsed(unread(id=1)), ProtocolFault)
    assert fault.fatal and "initialize" in fault.message
    assert ready().unparsed(unread(id=99)) == ()  # not ours


def test_an_unparsed_turn_end_ends_the_running_turn() -> None:
    protocol = ready()
    assert protocol.unparsed(unread(method="turn/completed", params__turn__id="old")) == ()
    ended = only(
        protocol.unparsed(
            unread(method="turn/completed", params__threadId="t", params__turn__id="u")
        ),
        TurnEnded,
    )
    assert ended.how == "failed" and "(status unread)" in (ended.message or "")
    assert not protocol.turn_running
    protocol = ready()
    ended = only(
        protocol.unparsed(
            unread(
                method="turn/completed", params__turn__id="u", params__turn__status="interrupted"
            )
        ),
        TurnEnded,
    )
    assert ended.how == "interrupted"
    assert ready().unparsed(unread(method="item/completed")) == ()


def started(tid: str) -> dict[str, Any]:
    return {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": tid}}}


def completed(tid: str, status: str = "completed") -> dict[str, Any]:
    turn = {"id": tid, "status": status}
    return {"method": "turn/completed", "params": {"threadId": "t", "turn": turn}}


def between_turns() -> CodexControl:
    """A codec whose thread ``t`` is open and whose turn ``u`` has ended."""
    protocol = ready()
    protocol.receive(completed("u"))
    assert not protocol.turn_running
    return protocol


def test_a_turn_codex_begins_by_itself_is_adopted_and_ends() -> None:
    """codex starts a turn between ours (a compaction, a thread goal): it is the
    CLI's turn, which its ``turn/completed`` ends (dropped before: a hang)."""
    protocol = between_turns()
    assert protocol.receive(started("own")) == (FORWARD, TurnBegan())
    assert protocol.turn_running and protocol.own_turn and protocol.turn_id == "own"
    assert protocol.receive(completed("own")) == (FORWARD, TurnEnded("completed"))
    assert not protocol.turn_running and not protocol.own_turn
    # and the next turn of ours is ours again
    protocol.begin_turn("next")
    protocol.receive({"id": 4, "result": {"turn": {"id": "v"}}})
    assert protocol.receive(started("v")) == (FORWARD,)
    assert not protocol.own_turn


def test_codexs_own_turn_takes_an_interrupt_and_a_steer() -> None:
    protocol = between_turns()
    protocol.receive(started("own"))
    (steer,) = protocol.steer("more")
    assert steer["method"] == "turn/steer" and steer["params"]["expectedTurnId"] == "own"
    (stop,) = protocol.interrupt()
    assert stop["method"] == "turn/interrupt" and stop["params"]["turnId"] == "own"
    assert protocol.receive(completed("own", "interrupted")) == (
        FORWARD,
        TurnEnded("interrupted"),
    )


def test_a_turn_codex_began_while_our_turn_start_was_unanswered_is_not_ours() -> None:
    """Its ``turn/started`` came before the answer to ours: the answer tells
    which is ours; codex's own end does not end our turn."""
    protocol = between_turns()
    protocol.begin_turn("mine")
    assert protocol.interrupt() == []  # kept until our turn is active
    assert protocol.receive(started("own")) == (FORWARD,)  # not taken as ours
    assert protocol.receive({"id": 4, "result": {"turn": {"id": "mine"}}}) == ()
    assert protocol.turn_id == "mine" and not protocol.own_turn
    assert protocol.receive(completed("own")) == (FORWARD,)  # not ours: ours runs on
    assert protocol.turn_running
    (reply,) = only(protocol.receive(started("mine"))[1:], Reply).objects
    assert reply["method"] == "turn/interrupt" and reply["params"]["turnId"] == "mine"
    assert protocol.receive(completed("mine", "interrupted"))[-1] == TurnEnded("interrupted")


def test_our_turn_started_before_its_answer_is_active_at_the_answer() -> None:
    protocol = between_turns()
    protocol.begin_turn("mine")
    assert protocol.steer("early") == []  # queued: the turn is not active yet
    assert protocol.receive(started("mine")) == (FORWARD,)
    reply = only(protocol.receive({"id": 4, "result": {"turn": {"id": "mine"}}}), Reply)
    assert [o["method"] for o in reply.objects] == ["turn/steer"]
    assert protocol.receive(completed("mine")) == (FORWARD, TurnEnded("completed"))


def test_a_refused_turn_start_leaves_codexs_own_turn_to_end() -> None:
    """codex refused our turn/start while a turn of its own ran (begun as ours
    was sent): the fault ends our turn, and codex's end of its own comes as
    the end the session waits for before its next turn."""
    protocol = between_turns()
    protocol.begin_turn("mine")
    assert protocol.receive(started("own")) == (FORWARD,)
    refused = {"id": 4, "error": {"code": -32600, "message": "a turn is running"}}
    assert not only(protocol.receive(refused), ProtocolFault).fatal
    assert protocol.own_turn and protocol.turn_id == "own"
    assert protocol.receive(completed("own")) == (FORWARD, TurnEnded("completed"))
    # refused with no turn of codex's under way: nothing runs
    protocol.begin_turn("again")
    only(protocol.receive({"id": 5, "error": {"code": -32600, "message": "no"}}), ProtocolFault)
    assert not protocol.turn_running and protocol.interrupt() == []
