"""The text failure report (the "standard format" with
``<task_metadata>``) of a :class:`~coding_genesis.result.ChildFailure`, and a
parser that reads a report back into the record.

The text format is exactly the failure-recovery one, so its regex helpers
(``<failure_category>(.+?)</failure_category>``, ``Blocked on: (.+)``,
``Files modified: (.+)``...) work on it.  To make the round trip exact for any
text, free-text values are escaped only where they would break a line-based
reader: backslash, line breaks and control characters (``\\n``, ``\\u2028``...),
leading/trailing spaces, ``,`` inside file names, and ``<`` before one of our
metadata tag names.  Ordinary text is written as is.

Beyond the standard four metadata tags, ``<task_metadata>`` also carries the
record's other fields (exit_code, tool_usage, ...) so nothing is lost; only the
stderr tail stays out of the report (it is log detail, in the response).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

import orjson

from coding_genesis._util.homes import public
from coding_genesis.result import ChildFailure
from coding_genesis.status import FailureCategory

__all__ = [
    "REPORT_PREFIX",
    "ReportParseError",
    "format_failure_report",
    "parse_failure_report",
]

#: First words of a failure report.
REPORT_PREFIX = "Child agent failed: "
_NONE = "none"


class ReportParseError(ValueError):
    """The text is not a failure report in the standard format."""


# -- the text report ------------------------------------------------------

#: Metadata tags, in report order (the standard four first).
_TAGS = (
    "session_id",
    "status",
    "failure_category",
    "retryable",
    "reason",
    "retry_after_s",
    "exit_code",
    "last_successful_tool",
    "tool_usage",
)
_TAG_START = re.compile(r"<(/?)(task_metadata|" + "|".join(_TAGS) + r")\b", re.I)
# Characters str.splitlines() breaks on, and other controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\\nrt,])")


def _escape(text: str, *, comma: bool = False) -> str:
    out = text.replace("\\", "\\\\")
    out = _CONTROL.sub(lambda m: _ESCAPES.get(m.group(0), f"\\u{ord(m.group(0)):04x}"), out)
    out = _TAG_START.sub(lambda m: "\\u003c" + m.group(0)[1:], out)
    if comma:
        out = out.replace(",", "\\,")
    if out[:1].isspace():
        out = f"\\u{ord(out[0]):04x}" + out[1:]
    if len(out) > 1 and out[-1:].isspace():
        out = out[:-1] + f"\\u{ord(out[-1]):04x}"
    return out


def _unescape(text: str) -> str:
    def sub(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("u"):
            return chr(int(code[1:], 16))
        return {"n": "\n", "r": "\r", "t": "\t"}.get(code, code)

    return _UNESCAPE.sub(sub, text)


def _file_item(path: str) -> str:
    escaped = _escape(path, comma=True)
    # A file literally named "none" must not read as "no files".
    return "\\u006eone" if escaped == _NONE else escaped


def _split_files(text: str) -> list[str]:
    if text == _NONE:
        return []
    items: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if text.startswith(", ", i):
            items.append("".join(current))
            current = []
            i += 2
            continue
        current.append(ch)
        i += 1
    items.append("".join(current))
    return [_unescape(item) for item in items]


def format_failure_report(failure: ChildFailure, *, readable: bool = False) -> str:
    """The standard failure report; ``readable``: for a person (``genesis show``),
    its metadata as ``name: value`` lines instead of the ``<task_metadata>`` block
    a program parses."""
    lines = [
        f"{REPORT_PREFIX}{_escape(failure.message)}",
        "",
        f"Category: {failure.category.value}",
        f"Duration: {failure.duration!r}s",
        f"Retryable: {'Yes' if failure.suggested_retry else 'No'}",
        "",
        "Work completed before failure:",
    ]
    if failure.completed_steps:
        lines += [f"  ✓ {_escape(step)}" for step in failure.completed_steps]
    else:
        lines.append("  None")
    files = ", ".join(_file_item(f) for f in failure.files_modified) or _NONE
    lines += ["", f"Files modified: {files}", ""]
    if failure.blocked_on is not None:
        lines += [f"Blocked on: {_escape(failure.blocked_on)}", ""]
    lines.append("Suggested recovery actions:")
    lines += [f"  • {_escape(action)}" for action in failure.suggested_actions]
    meta: dict[str, str] = {
        "session_id": failure.session_id or "",
        "status": "failed",
        "failure_category": failure.category.value,
        "retryable": "true" if failure.suggested_retry else "false",
        "reason": failure.reason,
    }
    if failure.retryable_reason:
        meta["retryable_reason"] = failure.retryable_reason
    if failure.retry_after_s is not None:
        meta["retry_after_s"] = repr(failure.retry_after_s)
    if failure.exit_code is not None:
        meta["exit_code"] = str(failure.exit_code)
    if failure.last_successful_tool is not None:
        meta["last_successful_tool"] = failure.last_successful_tool
    if failure.tool_usage:
        meta["tool_usage"] = orjson.dumps(failure.tool_usage).decode()
    if readable:
        lines += ["", "Metadata:"]
        lines += [f"  {tag.replace('_', ' ')}: {value or '-'}" for tag, value in meta.items()]
        return "\n".join(lines) + "\n"
    lines += ["", "<task_metadata>"]
    lines += [
        f"  <{tag}>{html.escape(_escape(value), quote=False)}</{tag}>"
        for tag, value in meta.items()
    ]
    lines.append("</task_metadata>")
    return "\n".join(lines) + "\n"


_META_LINE = re.compile(r"^\s*<(\w+)>(.*)</\1>\s*$")


def _after(line: str, prefix: str) -> str | None:
    """The rest of ``line`` after ``prefix`` (an empty value lost its trailing space)."""
    if line.startswith(prefix):
        return line[len(prefix) :]
    return "" if line == prefix.rstrip() else None


def parse_failure_report(text: str) -> ChildFailure:  # noqa: C901
    """Read a failure report back into a :class:`ChildFailure` (stderr tail empty).

    Tolerant of CRLF line ends, trailing spaces and missing optional sections;
    raises :class:`ReportParseError` when the text is no failure report.
    """
    if not isinstance(text, str):
        raise ReportParseError(f"expected report text, got {type(text).__name__}")
    lines = [line.rstrip(" \t\r") for line in text.split("\n")]
    start = next((i for i, ln in enumerate(lines) if _after(ln, REPORT_PREFIX) is not None), None)
    if start is None:
        raise ReportParseError(f"no {REPORT_PREFIX.strip()!r} line")
    fields: dict[str, Any] = {"message": _unescape(_after(lines[start], REPORT_PREFIX) or "")}
    steps: list[str] = []
    actions: list[str] = []
    meta: dict[str, str] = {}
    section = ""
    for line in lines[start + 1 :]:
        stripped = line.strip()
        if section == "meta":
            if stripped == "</task_metadata>":
                section = "done"
                continue
            match = _META_LINE.match(line)
            if match:
                meta[match.group(1)] = _unescape(html.unescape(match.group(2)))
            continue
        if stripped == "<task_metadata>":
            section = "meta"
            continue
        if (value := _after(line, "Category: ")) is not None:
            fields["category_text"] = value.strip()
        elif (value := _after(line, "Duration: ")) is not None:
            fields["duration"] = value.strip().removesuffix("s")
        elif (value := _after(line, "Retryable: ")) is not None:
            fields["retry_text"] = value.strip()
        elif line.startswith("Work completed before failure:"):
            section = "steps"
        elif (value := _after(line, "Files modified: ")) is not None:
            fields["files_modified"] = _split_files(value)
            section = ""
        elif (value := _after(line, "Blocked on: ")) is not None:
            fields["blocked_on"] = _unescape(value)
            section = ""
        elif line.startswith("Suggested recovery actions:"):
            section = "actions"
        elif section == "steps" and (value := _after(line, "  ✓ ")) is not None:
            steps.append(_unescape(value))
        elif section == "actions" and (value := _after(line, "  • ")) is not None:
            actions.append(_unescape(value))
    category_text = str(meta.get("failure_category") or fields.get("category_text") or "")
    try:
        category = FailureCategory(category_text)
    except ValueError:
        raise ReportParseError(f"unknown failure category {category_text!r}") from None
    retry_text = meta.get("retryable") or fields.get("retry_text", "")
    try:
        duration = float(fields.get("duration", 0.0))
        exit_code = int(meta["exit_code"]) if "exit_code" in meta else None
        retry_after = float(meta["retry_after_s"]) if "retry_after_s" in meta else None
        tool_usage: Mapping[str, int] = (
            orjson.loads(meta["tool_usage"]) if "tool_usage" in meta else {}
        )
        return ChildFailure(
            category=category,
            message=fields["message"],
            session_id=meta.get("session_id") or None,
            duration=duration,
            completed_steps=steps,
            files_modified=fields.get("files_modified", []),
            blocked_on=fields.get("blocked_on"),
            suggested_retry=retry_text.lower() in ("true", "yes"),
            retryable_reason=meta.get("retryable_reason", ""),
            suggested_actions=actions,
            tool_usage=dict(tool_usage),
            last_successful_tool=meta.get("last_successful_tool"),
            exit_code=exit_code,
            reason=meta.get("reason", ""),
            retry_after_s=retry_after,
        )
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise ReportParseError(f"malformed failure report: {exc}") from exc


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(format_failure_report)
public(parse_failure_report)
