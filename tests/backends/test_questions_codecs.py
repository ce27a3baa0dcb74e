"""The CLI's questions to the user (``asker=``, issue 41 §10) in each codec and in
``coding_genesis.questions``: claude's ``AskUserQuestion`` through ``can_use_tool``,
codex's ``item/tool/requestUserInput``; several questions asked one by one and
answered together; nobody answering is the words telling the model so."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.backend import CommandSpec
from coding_genesis.backends.claude_control import ClaudeControl
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.control import QuestionAsked, Reply
from coding_genesis.errors import RefusedError
from coding_genesis.questions import (
    DECLINED,
    NO_ONE_ANSWERS,
    Asked,
    UserAnswer,
    UserQuestion,
    ask,
)
from tests.backends.test_acp_codec import protocol, schema_problems
from tests.session.twoway import one_way_backend
from tests.support import cli_request

QUESTIONS = [
    {
        "question": "Which color?",
        "header": "Color",
        "options": [{"label": "red", "description": ""}, {"label": "teal", "description": ""}],
        "multiSelect": True,
    },
    {"question": "Why?", "header": "Why", "options": []},
]


def claude() -> ClaudeControl:
    protocol = ClaudeControl(command=lambda start: CommandSpec(args=()), translator=lambda: None)  # type: ignore[arg-type,return-value]
    protocol.begin(cli_request())
    return protocol


def can_use_tool(protocol: ClaudeControl, request_id: str, tool_input: Any) -> Any:
    request = {"subtype": "can_use_tool", "tool_name": "AskUserQuestion", "input": tool_input}
    return protocol.receive(
        {"type": "control_request", "request_id": request_id, "request": request}
    )


def test_claude_asks_each_question_and_answers_them_together_in_the_tools_input() -> None:
    protocol = claude()
    first, second = can_use_tool(protocol, "r1", {"questions": QUESTIONS})
    assert isinstance(first, QuestionAsked) and isinstance(second, QuestionAsked)
    assert first.question == UserQuestion(
        "Which color?", header="Color", options=("red", "teal"), multiple=True
    )
    assert protocol.answer_question(first, UserAnswer(choices=("red", "teal")), None) == []
    (response,) = protocol.answer_question(second, None, NO_ONE_ANSWERS)
    result = response["response"]["response"]
    assert response["response"]["request_id"] == "r1" and result["behavior"] == "allow"
    assert result["updatedInput"] == {
        "questions": QUESTIONS,
        "answers": {"Which color?": "red, teal", "Why?": f"(no answer: {NO_ONE_ANSWERS})"},
    }
    assert protocol.answer_question(second, UserAnswer("late"), None) == []  # once


def test_claude_denies_with_the_refusal_when_nobody_answers_any() -> None:
    protocol = claude()
    (only,) = can_use_tool(protocol, "r2", {"questions": QUESTIONS[:1]})
    (response,) = protocol.answer_question(only, UserAnswer(declined=True), DECLINED)
    assert response["response"]["response"] == {"behavior": "deny", "message": DECLINED}


@pytest.mark.parametrize(
    "tool_input", [{}, {"questions": "x"}, {"questions": [{"header": "no question"}]}]
)
def test_claude_questions_it_cannot_read_are_denied_at_once(tool_input: Any) -> None:
    (reply,) = can_use_tool(claude(), "r3", tool_input)
    assert isinstance(reply, Reply)
    assert reply.objects[0]["response"]["response"]["behavior"] == "deny"


def test_codex_request_user_input_is_answered_by_question_id() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request())
    questions = [
        {
            "id": "a",
            "header": "A",
            "question": "Go?",
            "options": [{"label": "yes", "description": ""}],
        },
        {"id": "b", "header": "B", "question": "Token?", "isSecret": True},
    ]
    params = {
        "threadId": "",
        "turnId": "",
        "itemId": "i",
        "isBlocking": True,
        "questions": questions,
    }
    first, second = protocol.receive(
        {"id": 5, "method": "item/tool/requestUserInput", "params": params}
    )
    assert isinstance(first, QuestionAsked) and isinstance(second, QuestionAsked)
    assert second.question.secret
    assert protocol.answer_question(first, UserAnswer(choices=("yes",)), None) == []
    (response,) = protocol.answer_question(second, None, NO_ONE_ANSWERS)
    assert response == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"answers": {"a": {"answers": ["yes"]}, "b": {"answers": [NO_ONE_ANSWERS]}}},
    }


def test_codex_asks_for_request_user_input_only_with_an_asker() -> None:
    for asker, features in (
        (None, None),
        (lambda q: "x", {"default_mode_request_user_input": True}),
    ):
        protocol = CodexControl()
        protocol.begin(cli_request(asker=asker))
        params = protocol._thread_params(protocol.request)  # type: ignore[arg-type]
        assert params.get("config", {}).get("features") == features


def asked(asker: Any, timeout: float = 1.0, question: UserQuestion | None = None) -> Asked:
    return anyio.run(lambda: ask(asker, question or UserQuestion("Q?"), timeout=timeout))


def test_an_askers_answer_and_how_it_can_fail() -> None:
    assert asked(lambda q: "teal").answer == UserAnswer("teal")

    async def slow(question: UserQuestion) -> str:
        await anyio.sleep(10)
        return "late"

    def broken(question: UserQuestion) -> str:
        raise RuntimeError("boom")

    assert (asked(slow, timeout=0.05).source, asked(slow, timeout=0.05).refusal) == (
        "timeout",
        NO_ONE_ANSWERS,
    )
    failed = asked(broken)
    assert (failed.source, failed.error, failed.refusal) == (
        "error",
        "RuntimeError: boom",
        NO_ONE_ANSWERS,
    )
    assert asked(lambda q: 42).source == "error"  # an answer of another type
    assert asked(None).source == "none" and asked(None).refusal == NO_ONE_ANSWERS
    assert asked(lambda q: None).refusal == DECLINED


def test_a_secret_questions_answer_is_never_recorded() -> None:
    secret = UserQuestion("Token?", secret=True)
    record = asked(lambda q: "s3cr3t-value", question=secret).record(secret)
    assert record["answered"] is True and record["answer"] is None
    assert "s3cr3t-value" not in str(record)


def test_an_asker_on_a_backend_whose_questions_cannot_reach_us_is_refused() -> None:
    with pytest.raises(RefusedError) as caught:
        CodingGenesisAgent(one_way_backend(), asker=lambda q: "x")
    assert "cannot bring its CLI's questions to the user, which asker= needs" in str(caught.value)
    assert "backends that can: claude, codex, failer, gemini, opencode, qwen" in str(caught.value)
    for backend in ("claude", "codex", "gemini"):
        CodingGenesisAgent(backend, asker=lambda q: "x")  # they can


FORM = {"type": "object", "properties": {"name": {"type": "string"}}}


@pytest.mark.parametrize(
    ("schema", "typed", "result"),
    [
        (FORM, UserAnswer("Ada"), {"action": "accept", "content": {"name": "Ada"}}),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            UserAnswer("7"),
            {"action": "accept", "content": {"n": 7}},
        ),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            UserAnswer("seven"),
            {"action": "decline"},
        ),
        (
            {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            UserAnswer(choices=("yes",)),
            {"action": "accept", "content": {"ok": True}},
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}},
            UserAnswer("x"),
            {"action": "decline"},
        ),
        (FORM, None, {"action": "decline"}),
    ],
)
def test_claude_asks_an_mcp_servers_elicitation_and_fills_a_form_of_one_field(
    schema: Any, typed: UserAnswer | None, result: Any
) -> None:
    protocol = claude()
    request = {
        "subtype": "elicitation",
        "mcp_server_name": "srv",
        "message": "Name?",
        "requested_schema": schema,
    }
    (asked,) = protocol.receive({"type": "control_request", "request_id": "e1", "request": request})
    assert isinstance(asked, QuestionAsked)
    assert (asked.question.kind, asked.question.server, asked.question.text) == (
        "elicitation",
        "srv",
        "Name?",
    )
    refusal = None if typed is not None else NO_ONE_ANSWERS
    (response,) = protocol.answer_question(asked, typed, refusal)
    assert response["response"]["request_id"] == "e1"
    assert response["response"]["response"] == result


def test_an_acp_agents_form_is_asked_only_where_an_asker_can_fill_it() -> None:
    asking = protocol()
    (hello,) = asking.begin(cli_request(asker=lambda q: "Ada")).greeting
    assert hello["params"]["clientCapabilities"]["elicitation"] == {"form": {}}
    assert schema_problems("InitializeRequest", hello["params"]) == []
    form = {"type": "object", "properties": {"answer": {"type": "string"}}}
    params = {"sessionId": "s-1", "mode": "form", "message": "Name?", "requestedSchema": form}
    (asked,) = asking.receive(
        {"jsonrpc": "2.0", "id": 31, "method": "elicitation/create", "params": params}
    )
    assert isinstance(asked, QuestionAsked) and asked.question.kind == "elicitation"
    (answer,) = asking.answer_question(asked, UserAnswer("Ada"), None)
    assert answer["result"] == {"action": "accept", "content": {"answer": "Ada"}}
    assert schema_problems("CreateElicitationResponse", answer["result"]) == []
    silent = protocol()
    (hello,) = silent.begin(cli_request()).greeting
    assert "elicitation" not in hello["params"]["clientCapabilities"]
    (refused,) = silent.receive(
        {"jsonrpc": "2.0", "id": 32, "method": "elicitation/create", "params": params}
    )
    assert isinstance(refused, Reply) and "error" in refused.objects[0]
