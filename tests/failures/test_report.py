"""The spec 004 failure report: its exact format, and the round trip
record -> text -> record for any text, odd characters included."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coding_genesis._failures.report import (
    ReportParseError,
    format_failure_report,
    parse_failure_report,
)
from coding_genesis.result import ChildFailure
from coding_genesis.status import FailureCategory

SPEC_EXAMPLE = ChildFailure(
    category=FailureCategory.TIMEOUT,
    message="Child timed out after 300s",
    session_id="child-xyz",
    duration=300.0,
    completed_steps=["Created 2 files", "Modified 1 file"],
    files_modified=["src/config.py", "tests/test_config.py"],
    blocked_on="Time limit insufficient",
    suggested_retry=True,
    suggested_actions=["Retry with timeout=600s", "Break task into smaller subtasks"],
)


def test_the_standard_format_is_spec_004s() -> None:
    assert format_failure_report(SPEC_EXAMPLE) == (
        "Child agent failed: Child timed out after 300s\n"
        "\n"
        "Category: timeout\n"
        "Duration: 300.0s\n"
        "Retryable: Yes\n"
        "\n"
        "Work completed before failure:\n"
        "  ✓ Created 2 files\n"
        "  ✓ Modified 1 file\n"
        "\n"
        "Files modified: src/config.py, tests/test_config.py\n"
        "\n"
        "Blocked on: Time limit insufficient\n"
        "\n"
        "Suggested recovery actions:\n"
        "  • Retry with timeout=600s\n"
        "  • Break task into smaller subtasks\n"
        "\n"
        "<task_metadata>\n"
        "  <session_id>child-xyz</session_id>\n"
        "  <status>failed</status>\n"
        "  <failure_category>timeout</failure_category>\n"
        "  <retryable>true</retryable>\n"
        "  <reason></reason>\n"
        "</task_metadata>\n"
    )


def test_no_progress_reads_none() -> None:
    failure = SPEC_EXAMPLE.model_copy(
        update={"completed_steps": [], "files_modified": [], "suggested_retry": False}
    )
    report = format_failure_report(failure)
    assert "Work completed before failure:\n  None\n\nFiles modified: none\n" in report
    assert "Retryable: No\n" in report
    assert "<retryable>false</retryable>" in report
    assert parse_failure_report(report) == failure


# spec 004's own parsing helpers, verbatim: what an orchestrator would run.
def extract_category(result: str) -> str | None:
    match = re.search(r"<failure_category>(.+?)</failure_category>", result)
    return match.group(1) if match else None


def is_retryable(result: str) -> bool:
    return "<retryable>true</retryable>" in result


def extract_completed_steps(result: str) -> list[str]:
    steps = []
    in_completed_section = False
    for line in result.split("\n"):
        if "Work completed before failure:" in line:
            in_completed_section = True
            continue
        if in_completed_section:
            if line.strip().startswith("✓"):
                steps.append(line.strip()[2:])
            elif line.strip().startswith("Files modified:"):
                break
    return steps


def extract_files_modified(result: str) -> list[str]:
    match = re.search(r"Files modified: (.+)", result)
    if match:
        files_str = match.group(1)
        if files_str == "none":
            return []
        return [f.strip() for f in files_str.split(",")]
    return []


def extract_blocker(result: str) -> str | None:
    match = re.search(r"Blocked on: (.+)", result)
    return match.group(1) if match else None


def extract_suggested_actions(result: str) -> list[str]:
    actions = []
    in_actions_section = False
    for line in result.split("\n"):
        if "Suggested recovery actions:" in line:
            in_actions_section = True
            continue
        if in_actions_section:
            if line.strip().startswith("•"):
                actions.append(line.strip()[2:])
            elif line.strip().startswith("<task_metadata>"):
                break
    return actions


def test_spec_004_parsers_read_our_report() -> None:
    report = format_failure_report(SPEC_EXAMPLE)
    assert "<status>failed</status>" in report
    assert extract_category(report) == "timeout"
    assert is_retryable(report)
    assert extract_completed_steps(report) == SPEC_EXAMPLE.completed_steps
    assert extract_files_modified(report) == SPEC_EXAMPLE.files_modified
    assert extract_blocker(report) == SPEC_EXAMPLE.blocked_on
    assert extract_suggested_actions(report) == SPEC_EXAMPLE.suggested_actions


def test_spec_004_examples_parse() -> None:
    """The tool_error example of spec 004, as written there."""
    text = (
        "Child agent failed: ModuleNotFoundError: No module named 'pytest'\n\n"
        "Category: tool_error\nDuration: 8.7s\nRetryable: Yes\n\n"
        "Work completed before failure:\n  None\n\nFiles modified: none\n\n"
        "Blocked on: ModuleNotFoundError: No module named 'pytest'\n\n"
        "Suggested recovery actions:\n  • Install missing dependencies\n"
        "  • Run: pip install pytest\n  • Verify installation: pytest --version\n"
    )
    failure = parse_failure_report(text)
    assert failure.category is FailureCategory.TOOL_ERROR
    assert failure.duration == 8.7
    assert failure.suggested_retry is True
    assert failure.completed_steps == [] and failure.files_modified == []
    assert failure.blocked_on == "ModuleNotFoundError: No module named 'pytest'"
    assert failure.suggested_actions[1] == "Run: pip install pytest"
    assert failure.session_id is None


ODD = ChildFailure(
    category=FailureCategory.PARTIAL,
    message="line one\nline two\r\n\ttabbed <b>bold</b> & <failure_category>auth</failure_category>",
    session_id="sess<&>id",
    duration=1e-05,
    completed_steps=[
        "Wrote a, b.py",
        " leading space",
        "trailing space ",
        "None",
        "",
        "\\n literal",
    ],
    files_modified=["a,b.py", "c, d.py", "none", "ünïcødé/файл.py", " edge ", "back\\slash", ""],
    blocked_on="Blocked on: nested\u2028separator",
    suggested_retry=True,
    suggested_actions=["• bullet in text", "<task_metadata>", "✓ tick"],
    tool_usage={"Bash": 2, "mcp:srv/tool,x": 1, 'we"ird\n': 3},
    last_successful_tool="Write",
    exit_code=-15,
    reason="text: '429'",
    retry_after_s=30.5,
)


def test_odd_characters_round_trip() -> None:
    report = format_failure_report(ODD)
    assert parse_failure_report(report) == ODD
    # Still one line per item, and the spec's regex sees the real category.
    assert extract_category(report) == "partial"
    assert report.count("\n  ✓ ") == len(ODD.completed_steps)


def test_tolerant_reading() -> None:
    report = format_failure_report(SPEC_EXAMPLE)
    crlf = report.replace("\n", "\r\n")
    assert parse_failure_report(crlf) == SPEC_EXAMPLE
    trailing = report.replace("\n", "   \n")
    assert parse_failure_report(trailing) == SPEC_EXAMPLE
    embedded = "Some orchestrator log line\n" + report + "\nmore text"
    assert parse_failure_report(embedded) == SPEC_EXAMPLE


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "Child agent failed: x\n\nCategory: nonsense\n",
        "Child agent failed: x\nCategory: timeout\nDuration: soon\n",
        "Child agent failed: x\n<task_metadata>\n<failure_category>timeout</failure_category>\n"
        "<tool_usage>{not json</tool_usage>\n</task_metadata>",
    ],
)
def test_not_a_report(text: str) -> None:
    with pytest.raises(ReportParseError):
        parse_failure_report(text)


def test_not_text() -> None:
    with pytest.raises(ReportParseError):
        parse_failure_report(None)  # type: ignore[arg-type]


any_text = st.text(st.characters(codec="utf-8"), max_size=40)
failures = st.builds(
    ChildFailure,
    category=st.sampled_from(list(FailureCategory)),
    message=any_text,
    session_id=st.none() | any_text,
    duration=st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
    completed_steps=st.lists(any_text, max_size=4),
    files_modified=st.lists(any_text, max_size=4),
    blocked_on=st.none() | any_text,
    suggested_retry=st.booleans(),
    suggested_actions=st.lists(any_text, max_size=4),
    tool_usage=st.dictionaries(any_text, st.integers(0, 10**6), max_size=3),
    last_successful_tool=st.none() | any_text,
    exit_code=st.none() | st.integers(-64, 255),
    reason=any_text,
    retry_after_s=st.none()
    | st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failures)
def test_round_trip_property(failure: ChildFailure) -> None:
    assert parse_failure_report(format_failure_report(failure)) == failure


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(failures)
def test_every_item_stays_on_its_own_line(failure: ChildFailure) -> None:
    report = format_failure_report(failure)
    lines = report.splitlines()
    # str.splitlines() splits on more than "\n" (\x1c, \u2028, ...): escaped, so same count.
    assert len(lines) == report.count("\n")
    steps = [ln for ln in lines if ln.startswith("  ✓ ")]
    assert len(steps) == len(failure.completed_steps)
    tags = re.findall(r"^\s*<(\w+)>", report, re.M)
    assert tags.count("failure_category") == 1


def test_record_dict_keeps_the_classifier_keys() -> None:
    data: dict[str, Any] = ODD.to_dict()
    assert list(data)[:5] == [
        "category",
        "retryable",
        "reason",
        "retry_after_s",
        "retryable_reason",
    ]
    assert data["category"] == "partial" and data["retryable"] is ODD.retryable is True
