"""What one turn of a live session may set for itself (``send(..., model=,
permissions=, output_schema=)``): each option checked by its declaration
(``Request.for_turn``), then by the capability check's ``turn`` row, which
refuses an option the session's protocol cannot set for a turn
(``ControlProtocol.turn_options``: codex's ``turn/start`` takes all three):
that turn answers 64 in the check's words, nothing reaches the CLI, and the
session lives on.  A turn starts through ``ControlProtocol.start_turn``, whose
default is ``begin_turn(prompt)``: a plug-in's protocol keeps working."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.backends import get_backend, registered_backends
from coding_genesis.capabilities import (
    ROWS,
    backends_that,
    check,
    session_refusal,
    steer_refusal,
)
from coding_genesis.control import Answered, ControlIntent, ControlProtocol, Outgoing
from coding_genesis.errors import ConfigError
from coding_genesis.request import SEND_OPTION_NAMES, TURN_OPTIONS, Request
from tests.backends.test_host_tool_codecs import Bare
from tests.session.twoway import TwoWayBackend, TwoWayProtocol, agent, one_way_backend
from tests.support import cli_request

_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
#: A value of each per-turn option.
_VALUES: dict[str, Any] = {
    "model": "other-model",
    "permissions": "read-only",
    "output_schema": _SCHEMA,
}


def words(backend: str, option: str) -> str:
    return (
        f"backend {backend!r} cannot set {option}= for one turn of a live session "
        "(the session's setting holds; open a session with it instead); "
        f"backends that can: {', '.join(backends_that(f'turn {option}')) or '(none)'}"
    )


def test_the_turn_options_are_the_send_keywords_but_the_timeout() -> None:
    assert {"model", "permissions", "output_schema"} == TURN_OPTIONS
    assert TURN_OPTIONS | {"timeout"} == SEND_OPTION_NAMES
    assert ROWS[-1] == "turn"


def test_for_turn_checks_each_option_by_its_declaration() -> None:
    session = cli_request(cwd="/w", model="first")
    turn = session.for_turn("go", model="second", output_schema=_SCHEMA)
    assert (turn.prompt, turn.model, turn.turn_options) == (
        "go",
        "second",
        frozenset({"model", "output_schema"}),
    )
    assert turn.output_schema is not None and turn.output_schema.schema["type"] == "object"
    same = session.for_turn("go", model="", permissions=None)  # "" and None: the session's
    assert (same.model, same.permissions, same.turn_options) == ("first", None, frozenset())
    with pytest.raises(ConfigError, match="permissions must be one of"):
        session.for_turn("go", permissions="root")
    with pytest.raises(ConfigError, match="model must be a string"):
        session.for_turn("go", model=3)
    with pytest.raises(ConfigError, match="object"):
        session.for_turn("go", output_schema={"type": "string"})


#: The backends whose protocol sets each option for one turn (codex: fields of
#: ``turn/start``; claude and the failer, which speaks its protocol: control
#: requests before the turn; the ACP agents with a mode per level: session/set_mode;
#: qwen's model: session/set_config_option).
_TAKE = {
    "model": {"claude", "codex", "failer", "qwen"},
    "permissions": {"claude", "codex", "failer", "gemini", "qwen"},
    "output_schema": {"claude", "codex", "failer", "gemini", "opencode", "qwen"},
}


@pytest.mark.parametrize("option", sorted(TURN_OPTIONS))
def test_every_other_backend_refuses_an_option_for_one_turn_in_the_checks_words(
    option: str,
) -> None:
    """A backend takes a turn option where its protocol maps it; each other
    refuses it in the check's words, naming those that can."""
    assert set(backends_that(f"turn {option}")) == _TAKE[option]
    for name in registered_backends():
        backend = get_backend(name)
        turn = cli_request(cwd="/w").for_turn("go", **{option: _VALUES[option]})
        refused = check(backend, turn, "turn")
        assert check(backend, cli_request(cwd="/w").for_turn("go"), "turn") is None
        if name in _TAKE[option]:
            assert refused is None, name
            continue
        assert refused is not None, name
        assert (refused.option, refused.message) == ("turn", words(name, option))


class _ModelPerTurn(TwoWayProtocol):
    turn_options = frozenset({"model", "permissions"})


class _ModelPerTurnBackend(TwoWayBackend):
    name = "modelpt"
    permission_levels = frozenset({"edit"})

    def control(self) -> ControlProtocol | None:
        return _ModelPerTurn()


def test_a_protocol_takes_the_turn_options_it_declares() -> None:
    backend = _ModelPerTurnBackend()
    session = cli_request(cwd="/w")
    assert check(backend, session.for_turn("go", model="m"), "turn") is None
    schema = check(backend, session.for_turn("go", model="m", output_schema=_SCHEMA), "turn")
    assert schema is not None and schema.message.startswith(
        "backend 'modelpt' cannot set output_schema= for one turn"
    )
    # a level the backend cannot enforce is refused, as at a session's open
    assert check(backend, session.for_turn("go", permissions="edit"), "turn") is None
    level = check(backend, session.for_turn("go", permissions="read-only"), "turn")
    assert level is not None and level.option == "turn" and "read-only" in level.message


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_refused_turn_answers_64_and_the_session_lives_on(tmp_path: Path) -> None:
    async with agent(tmp_path).session() as s:
        first = await s.send_result("TEXT one")
        refused = await s.send_result("TEXT two", model="other-model")
        assert (refused.status, refused.error) == (64, "invalid_request")
        assert refused.message == words("twoway", "model")
        bad = await s.send_result("TEXT two", permissions="root")  # type: ignore[arg-type]
        assert bad.status == 64 and "permissions must be one of" in bad.message
        with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['modle'\]"):
            await s.send_result("TEXT two", modle="x")  # type: ignore[call-arg]
        after = await s.send_result("TEXT three")
        assert (first.status, after.status, after.message) == (0, 0, "three")
        assert [r.turn for r in s.results] == [1, 2]  # nothing of the refused turns ran


class _BeginOnly(Bare):
    """A plug-in's protocol of before ``start_turn``: it defines ``begin_turn`` alone."""

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        return [{"op": "turn", "prompt": prompt}]


def test_start_turn_defaults_to_begin_turn_with_the_prompt() -> None:
    """The session calls start_turn; a protocol without it is asked begin_turn
    (the two-way fake's protocol, which every session test drives, is one)."""
    protocol = _BeginOnly()
    turn = cli_request(cwd="/w").for_turn("hello")
    assert protocol.start_turn(turn) == [{"op": "turn", "prompt": "hello"}]
    assert "start_turn" not in vars(TwoWayProtocol)
    facts = ("can_fork", "deltas", "can_compact", "context_usage", "asks_questions")
    assert not any(getattr(protocol, fact) for fact in (*facts, "takes_mcp_servers"))
    assert protocol.turn_options == protocol.prompt_parts == frozenset()


@pytest.mark.parametrize(
    ("what", "words"),
    [
        ("fork", "fork a session (a new one from its history)"),
        ("compact", "compact its context on demand"),
        ("context_usage", "say its context's use now"),
    ],
)
def test_every_backend_refuses_what_its_protocol_cannot(what: str, words: str) -> None:
    """A session's fork, compaction and context use: "cannot" on every backend
    whose protocol does not say it can (claude's and codex's do, and the
    failer's, which is claude's), in one wording that names those that can."""
    can = backends_that(what)
    assert set(can) == {"claude", "codex", "failer"}
    for name in registered_backends():
        refused = session_refusal(get_backend(name), what)
        if name in can:
            assert refused is None, name
        else:
            assert (
                refused == f"backend {name!r} cannot {words}; backends that can: {', '.join(can)}"
            )

    class Forking(TwoWayProtocol):
        can_fork: ClassVar[bool] = True
        can_compact: ClassVar[bool] = True
        context_usage: ClassVar[bool] = True

    class ForkingBackend(TwoWayBackend):
        def control(self) -> ControlProtocol | None:
            return Forking()

    assert session_refusal(ForkingBackend(), what) is None


def test_steering_is_refused_in_the_same_words() -> None:
    can = backends_that("steer")
    assert "codex" in can
    refused = steer_refusal(one_way_backend())
    assert refused == (
        f"backend 'oneway' cannot steer a running turn; backends that can: {', '.join(can)}"
    )
    assert steer_refusal(get_backend("codex")) is None


@pytest.mark.parametrize(
    ("opened", "wanted"), [("read-only", "edit"), ("read-only", "full"), ("full", "edit")]
)
def test_claude_refuses_a_level_its_opening_fixed_out_of_reach(opened: str, wanted: str) -> None:
    """claude keeps the rules of argv (``--disallowedTools``, ``--allowedTools``)
    for the process's life: a session opened read-only cannot widen, one opened
    full cannot become edit; the other switches pass."""
    backend = get_backend("claude")
    session = cli_request(cwd="/w", permissions=opened)
    refused = check(backend, session.for_turn("go", permissions=wanted), "turn")
    assert refused is not None and refused.option == "turn"
    assert refused.message == (
        f"backend 'claude' cannot switch a live session opened with permissions={opened!r} "
        f"to {wanted!r} for a turn (it fixed the {opened!r} rules when the session started); "
        f"open a session with permissions={wanted!r} instead"
    )
    # the level the session opened at holds for its turns, whatever a turn switched to
    switched = session.for_turn("go", permissions="read-only").for_turn("go", permissions=wanted)
    assert check(backend, switched, "turn") is not None


@pytest.mark.parametrize(
    ("opened", "wanted"),
    [
        (None, "read-only"),
        (None, "full"),
        ("edit", "read-only"),
        ("edit", "full"),
        ("full", "read-only"),
    ],
)
def test_claude_takes_the_other_switches(opened: Any, wanted: str) -> None:
    session = cli_request(cwd="/w", permissions=opened)
    assert check(get_backend("claude"), session.for_turn("go", permissions=wanted), "turn") is None
    assert check(get_backend("codex"), session.for_turn("go", permissions=wanted), "turn") is None


class _RefusedSwitch(TwoWayProtocol):
    """A protocol that switches the model by a call its CLI cannot answer."""

    turn_options = frozenset({"model"})

    def turn_calls(self, turn: Request) -> list[ControlIntent]:
        return [ControlIntent("set_model", {"model": turn.model})] if turn.model else []


class _RefusedSwitchBackend(TwoWayBackend):
    def control(self) -> ControlProtocol | None:
        return _RefusedSwitch()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_switch_the_cli_refuses_fails_the_turn_unprompted_and_the_session_lives_on(
    tmp_path: Path,
) -> None:
    """A call before the turn (``turn_calls``) answered with an error fails
    that turn in the answer's words before its prompt is written."""
    agent = CodingGenesisAgent(
        _RefusedSwitchBackend(),
        cwd=str(tmp_path),
        timeout=20,
        grace=1.0,
        ledger=str(tmp_path / "ledger"),
    )
    async with agent.session() as s:
        failed = await s.send_result("TEXT two", model="m-b")
        after = await s.send_result("TEXT three")
    assert failed.status == 1, failed
    assert failed.message.startswith("twoway refused set_model: twoway cannot set_model")
    assert (after.status, after.message) == (0, "three")


def test_an_acp_turn_switches_its_mode_and_the_model_option_session_new_declared() -> None:
    """ACP: the level's mode by ``session/set_mode`` (as the opening set it),
    the model by ``session/set_config_option`` of the option of category
    "model"; nothing when unchanged; no model option: the call says why."""
    protocol = get_backend("qwen").control()
    assert protocol is not None
    session = cli_request(cwd="/w", permissions="read-only")
    protocol.begin(session)
    protocol.receive({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    options = [{"id": "model", "category": "model", "type": "select", "currentValue": "a"}]
    new = {"sessionId": "s", "configOptions": options}
    protocol.receive({"jsonrpc": "2.0", "id": 2, "result": new})  # then set_mode plan (id 3)
    assert protocol.turn_calls(session.for_turn("go", permissions="read-only")) == []
    turn = session.for_turn("go", permissions="edit", model="b")
    calls = protocol.turn_calls(turn)
    assert [(c.name, dict(c.params)) for c in calls] == [
        ("set_mode", {"modeId": "auto-edit"}),
        ("set_model", {"value": "b"}),
    ]
    key, (mode,) = protocol.call(calls[0])
    assert (mode["method"], mode["params"]) == (
        "session/set_mode",
        {"sessionId": "s", "modeId": "auto-edit"},
    )
    (answered,) = protocol.receive({"jsonrpc": "2.0", "id": key, "result": {}})
    assert answered == Answered(key, result={})
    key, (model,) = protocol.call(calls[1])
    assert (model["method"], model["params"]) == (
        "session/set_config_option",
        {"sessionId": "s", "configId": "model", "value": "b"},
    )
    error = {"code": -32603, "message": "Internal error", "data": "no such model"}
    (refused,) = protocol.receive({"jsonrpc": "2.0", "id": key, "error": error})
    assert isinstance(refused, Answered) and refused.key == key and refused.error
    # the mode switched, the model did not
    assert [c.name for c in protocol.turn_calls(turn)] == ["set_model"]
    bare = get_backend("qwen").control()
    assert bare is not None
    bare.begin(session)
    with pytest.raises(ValueError, match="declared no model option"):
        bare.call(calls[1])
