"""Structured output: an attempt's answer checked against its request's output
schema, before the failure analysis.

A success whose answer matches becomes a result with ``output`` (a dict, or
an instance of the pydantic model); one whose answer does not is a failure,
``invalid_output`` (status 1), that the retry loop retries once, resuming
the session with the validation error (:data:`OUTPUT_RETRY`: also when no
retry policy was given, and for a live session's turn, as a second turn).
A CLI that gave up on the schema itself (its failure hint says
``invalid_output``: claude's ``error_max_structured_output_retries``) failed
the same way.

A CLI whose protocol has no field for the schema (ACP:
``ControlProtocol.schema_in_prompt``) is told it in each turn's prompt
(:func:`schema_prompt`, the one wording) and its answer checked the same way.
"""

from __future__ import annotations

import json

from coding_genesis._util.schema import OutputSchema
from coding_genesis.backend import Backend
from coding_genesis.result import RunResult
from coding_genesis.retry import Action, CategoryPolicy, RetryPolicy
from coding_genesis.status import ErrorCode, FailureCategory, Status

__all__ = ["OUTPUT_RETRY", "checked_output", "schema_prompt"]

#: The retries of a request with an output schema and no retry policy: one,
#: at once, for an answer that did not match.
OUTPUT_RETRY = RetryPolicy(
    categories={
        FailureCategory.INVALID_OUTPUT: CategoryPolicy(max_retries=1, on_give_up=Action.FAIL)
    }
)

#: The answer quoted in the failure's message, at most.
_QUOTED = 500


def schema_prompt(prompt: str, output: OutputSchema | None) -> str:
    """``prompt`` as a CLI that takes no schema of its own is sent it: the
    request, then the shape its final answer must have (None: as is)."""
    if output is None:
        return prompt
    schema = json.dumps(output, ensure_ascii=False, separators=(",", ":"))
    return (
        f"{prompt}\n\n"
        "Your final answer must be one JSON value matching this JSON Schema, and nothing "
        "else: no words around it, no code fence.\n"
        f"JSON Schema: {schema}"
    )


def checked_output(result: RunResult, output: OutputSchema | None, backend: Backend) -> RunResult:
    """``result`` with its validated ``output``, or turned into an
    ``invalid_output`` failure (``output``: the request's schema; None: as is)."""
    if output is None:
        return result
    if result.is_error:
        if result.error is ErrorCode.CLI_ERROR and _gave_up(result, backend):
            return result.model_copy(update={"error": ErrorCode.INVALID_OUTPUT})
        return result
    value, errors = output.check(result.message if result.error is None else "")
    if not errors:
        return result.model_copy(update={"output": value})
    answer = result.message.strip()
    if len(answer) > _QUOTED:
        answer = answer[:_QUOTED] + "…"
    lines = "\n".join(f"- {error}" for error in errors)
    message = f"{backend.name}'s answer does not match {output.name}:\n{lines}"
    if answer:
        message += f"\nThe answer was: {answer}"
    return result.model_copy(
        update={
            "status": int(Status.FAILED),
            "is_error": True,
            "error": ErrorCode.INVALID_OUTPUT,
            "message": message,
        }
    )


def _gave_up(result: RunResult, backend: Backend) -> bool:
    """The CLI says its answer kept failing the schema (its own words, read by
    its failure hint)."""
    try:
        return backend.failure_hint(result) == FailureCategory.INVALID_OUTPUT.value
    except Exception:  # noqa: BLE001 (a plug-in's hint must not cost the result)
        return False
