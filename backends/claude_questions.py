"""claude's questions to the user (``asker=``), beside :mod:`.claude_control`.

The model asks with its ``AskUserQuestion`` tool (1-4 questions, each with 2-4
options and a free "Other"); in a live session claude asks our
``can_use_tool`` before it runs, and, as claude-agent-sdk's permission
component does, we answer ``allow`` with ``updatedInput`` holding
``answers: {question: answer}`` (sdk-tools.d.ts: "answers collected by the
permission component"): the tool's result, which the model reads, carries
them.  Each question reaches the asker on its own; the answer goes back once
all are answered.  When nobody answers any of them the call is denied with the
words telling the model to decide by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.control import QuestionAsked

from ._questions import Gathered, Gathering, labelled_question

__all__ = ["ASK_TOOL", "asked", "permission_result"]

#: claude's tool that asks the user.
ASK_TOOL = "AskUserQuestion"


def asked(
    gathering: Gathering, request_id: str, tool_input: Mapping[str, Any]
) -> tuple[QuestionAsked, ...]:
    """Each question of one ``AskUserQuestion`` call (none: it could not be read)."""
    raw = tool_input.get("questions")
    questions = [labelled_question(q) for q in (raw if isinstance(raw, list) else ())]
    if not questions or any(q is None for q in questions):
        return ()
    return gathering.open(request_id, [q for q in questions if q is not None], tool_input)


def permission_result(gathered: Gathered) -> dict[str, Any]:
    """``can_use_tool``'s answer once every question is in: allowed with the
    answers in its input, or denied with what the model reads (none answered)."""
    if not gathered.answers:
        return {"behavior": "deny", "message": next(iter(gathered.refusals.values()), "")}
    answers = {q.text: gathered.words(i) for i, q in enumerate(gathered.questions)}
    return {"behavior": "allow", "updatedInput": {**gathered.payload, "answers": answers}}
