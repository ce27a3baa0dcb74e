"""``invalid_output``: an answer that does not match its ``output_schema=``, through the
one failure analysis, the retry tables and the continuation prompt; and what makes one
(coding_genesis._pipeline.output.checked_output)."""

from __future__ import annotations

from coding_genesis._failures.analysis import analyze
from coding_genesis._failures.taxonomy import LAST_RESORT_MESSAGES, USER_HINTS
from coding_genesis._pipeline.output import OUTPUT_RETRY, checked_output
from coding_genesis._pipeline.retrying import continuation_prompt
from coding_genesis._util.schema import output_schema
from coding_genesis.backends import ClaudeBackend, CodexBackend
from coding_genesis.result import RunResult
from coding_genesis.retry import Action, RetryPolicy
from coding_genesis.status import ErrorCode, FailureCategory

SHAPE = output_schema(
    {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
)


def answered(text: str, **fields: object) -> RunResult:
    return RunResult(status=0, message=text, backend="codex", session_id="thread-1", **fields)  # type: ignore[arg-type]


def test_a_matching_answer_is_the_output_and_a_free_one_is_untouched() -> None:
    assert checked_output(answered('{"n": 1}'), SHAPE, CodexBackend()).output == {"n": 1}
    free = answered("anything")
    assert checked_output(free, None, CodexBackend()) is free


def test_a_wrong_answer_is_a_failure_that_names_each_problem() -> None:
    result = checked_output(answered('{"n": "one"}', data={"n": "one"}), SHAPE, CodexBackend())
    assert (result.status, result.is_error, result.error) == (1, True, ErrorCode.INVALID_OUTPUT)
    assert result.message == (
        "codex's answer does not match output_schema:\n"
        "- $.n: expected integer, got string\n"
        'The answer was: {"n": "one"}'
    )
    assert result.data == {"n": "one"} and result.output is None
    empty = checked_output(answered("", error=ErrorCode.EMPTY_OUTPUT), SHAPE, CodexBackend())
    assert empty.error == "invalid_output" and "the answer is empty" in empty.message


def test_claude_giving_up_on_the_schema_is_invalid_output_and_other_failures_stay() -> None:
    gave_up = RunResult(
        status=1,
        message="Failed to provide valid structured output after 5 attempts",
        is_error=True,
        error=ErrorCode.CLI_ERROR,
        result_subtype="error_max_structured_output_retries",
    )
    assert checked_output(gave_up, SHAPE, ClaudeBackend()).error == "invalid_output"
    assert checked_output(gave_up, SHAPE, CodexBackend()).error == "cli_error"
    assert checked_output(gave_up, None, ClaudeBackend()).error == "cli_error"
    timed_out = gave_up.model_copy(update={"error": ErrorCode.TIMEOUT, "status": 124})
    assert checked_output(timed_out, SHAPE, ClaudeBackend()) is timed_out


def test_the_analysis_retries_it_once_at_once_then_fails() -> None:
    wrong = checked_output(answered('{"error": "from the answer"}'), SHAPE, CodexBackend())
    result = analyze(wrong, CodexBackend(), node="codex", timeout=60)
    failure = result.failure
    assert failure is not None and failure.category is FailureCategory.INVALID_OUTPUT
    assert failure.retryable and "validation error" in failure.retryable_reason
    assert failure.reason == "runner: invalid_output"
    context = result.error_context
    assert context is not None and context["user_hint"].startswith(USER_HINTS[failure.category])
    for policy in (RetryPolicy.default(), OUTPUT_RETRY):
        first = policy.decide(failure, retries_done=0)
        assert (first.action, first.delay_s) == (Action.RETRY, 0.0)
        assert policy.decide(failure, retries_done=1).action is Action.FAIL
    assert set(OUTPUT_RETRY.categories) == {FailureCategory.INVALID_OUTPUT}
    assert LAST_RESORT_MESSAGES[FailureCategory.INVALID_OUTPUT]


def test_the_continuation_quotes_the_validation_error_not_the_answer_s_fields() -> None:
    wrong = checked_output(answered('{"error": "from the answer"}'), SHAPE, CodexBackend())
    prompt = continuation_prompt("Count them", wrong, "invalid_output")
    assert "Blocker encountered (invalid_output): codex's answer does not match" in prompt
    assert "- $: missing required property 'n'" in prompt
    assert "Your final answer did not have the required structured format" in prompt
    assert "Blocker encountered (invalid_output): from the answer" not in prompt
    assert prompt.endswith("Original request:\nCount them")
