"""Text shown to people by several subcommands (plain ASCII lines; rich
is only used where a table helps)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis._util.display import printable
from coding_genesis._util.words import UNKNOWN, counted, money, short_count

__all__ = [
    "budget_line",
    "cli_words",
    "failure_report",
    "isolation_lines",
    "short_id",
    "stopped_lines",
    "summary_lines",
    "terminal_line",
    "tools_text",
    "usage_line",
    "warning_lines",
]


def short_id(run_id: str | None) -> str:
    return (run_id or "")[:12]


def tools_text(usage: Mapping[str, int], limit: int = 6) -> str:
    items = sorted(usage.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{name} x{count}" if count > 1 else name for name, count in items[:limit]]
    if len(items) > limit:
        parts.append(f"+{len(items) - limit} more")
    return ", ".join(parts)


def _seconds(value: object) -> str:
    return f"{value:.1f}s" if isinstance(value, int | float) else "?"


def _count(n: object) -> str:
    if not isinstance(n, int | float):
        return "?"
    return short_count(n) if n >= 10_000 else f"{int(n)}"


#: Library option names as the command line spells them (its flags).
_CLI_FLAGS = (
    ("give prices= to price it", "give --prices to price it"),
    ("prices=", "--prices "),
    ("max_cost_usd=", "--max-cost "),
    ("max_tokens=", "--max-tokens "),
    ("max_turns=", "--budget-turns "),
    ("max_tool_calls=", "--budget-tool-calls "),
)


def cli_words(text: str) -> str:
    """A library message as the command line says it: its flags, not the
    library's keyword arguments (``--prices``, not ``prices=``)."""
    for words, flag in _CLI_FLAGS:
        text = text.replace(words, flag)
    return text


def usage_line(result: Mapping[str, Any]) -> str | None:
    """Tokens, cost and its source, turns, context use and speed, in one line
    (from the result's ``metering``, coding_genesis._observers.metering); None without it.
    Tokens the CLI never reported are "unknown", not 0; a reported 0 is 0."""
    metering = result.get("metering")
    if not isinstance(metering, Mapping):
        return None
    tokens = metering.get("tokens") or {}
    if result.get("usage_source") == UNKNOWN or not tokens:
        parts = [f"tokens {UNKNOWN} (the CLI reported none)"]
    else:
        total = tokens.get("total")
        parts = [
            (counted(int(total), "token", short=True) if isinstance(total, int | float) else "?")
            + f" (in {_count(tokens.get('input'))}, out {_count(tokens.get('output'))}, "
            f"cache read {_count(tokens.get('cache_read'))}, "
            f"cache write {_count(tokens.get('cache_write'))})"
        ]
    cost, source = result.get("cost_usd"), result.get("cost_source")
    if isinstance(cost, int | float):
        parts.append(f"{money(cost)} ({source})")
    elif source:
        parts.append(f"cost {source}")
    if metering.get("turns"):
        parts.append(counted(int(metering["turns"]), "turn"))
    context = metering.get("context")
    if isinstance(context, Mapping) and isinstance(context.get("fraction"), int | float):
        window = context.get("window")
        of = short_count(window) if isinstance(window, int | float) else "?"
        parts.append(f"context {context['fraction']:.0%} of {of}")
    latency = metering.get("latency")
    if isinstance(latency, Mapping):
        if isinstance(latency.get("first_text_s"), int | float):
            parts.append(f"first text {latency['first_text_s']:.1f}s")
        if isinstance(latency.get("tokens_per_s"), int | float):
            parts.append(f"{latency['tokens_per_s']:.0f} tokens/s")
    return "usage: " + " - ".join(parts)


def budget_line(result: Mapping[str, Any]) -> str | None:
    """What a budget did to this run (coding_genesis.budget); None without one."""
    budget = result.get("budget")
    if not isinstance(budget, Mapping):
        return None
    limits = budget.get("limits") or {}
    line = f"budget: {budget.get('outcome')} - " + ", ".join(
        f"{k}={_limit(k, v)}" for k, v in limits.items()
    )
    if budget.get("shared"):
        spent = budget.get("spent") or {}
        tokens = int(spent.get("tokens", 0) or 0)
        line += (
            f" (shared: {money(spent.get('cost_usd', 0) or 0.0)}, "
            f"{counted(tokens, 'token', short=True)} spent)"
        )
    if budget.get("reason"):
        line += f" - {budget['reason']}"
    return cli_words(line)


def _limit(name: str, value: object) -> str:
    if name == "max_cost_usd" and isinstance(value, int | float):
        return money(value)
    return f"{value:g}" if isinstance(value, int | float) else str(value)


#: The failure line's color on a terminal: red, as ``genesis runs`` shows failures.
_RED, _RESET = "\x1b[31m", "\x1b[0m"


def warning_lines(result: Mapping[str, Any]) -> list[str]:
    """The result's warnings, one line each, in the command line's words."""
    return [f"warning: {cli_words(str(w))}" for w in result.get("warnings") or ()]


def terminal_line(line: str) -> str:
    """A summary line as a terminal shows it: made printable, the failure line
    in red, as ``genesis runs`` colors failures."""
    text = printable(line)
    return f"{_RED}{text}{_RESET}" if line.startswith("failure: ") else text


def summary_lines(result: Mapping[str, Any]) -> list[str]:
    """One line of what happened, one of why it failed (if it did), warnings,
    and where the transcript is."""
    # A failure's status is on the "[status N: error]" line printed just before.
    parts = ["ok"] if result.get("status") == 0 else []
    parts.append(_seconds(result.get("duration_s")))
    calls = result.get("tool_calls") or 0
    tools = counted(calls, "tool call")
    if calls and result.get("tool_usage"):
        tools += f" ({tools_text(result['tool_usage'])})"
    parts.append(tools)
    if (result.get("attempts") or 1) > 1:
        parts.append(f"{result['attempts']} attempts")
    if result.get("cli_retries"):
        parts.append(counted(result["cli_retries"], "CLI API retry", "CLI API retries"))
    if result.get("session_id"):
        parts.append(f"session {result['session_id']}")
    lines = ["genesis: " + " - ".join(parts)]
    for extra in (usage_line(result), budget_line(result)):
        if extra:
            lines.append(extra)
    failure = result.get("failure")
    if isinstance(failure, Mapping):
        # The failure value's one answer, rendered as the report's "Retryable:" line is.
        retryable = "yes" if failure.get("retryable") is True else "no"
        line = f"failure: {failure.get('category')} (retryable: {retryable})"
        if failure.get("reason"):
            line += f" - {failure['reason']}"
        if failure.get("retry_at"):
            line += f" - retry at {failure['retry_at']}"
        elif failure.get("retry_after_s") is not None:
            line += f" - retry after {failure['retry_after_s']:g}s"
        lines.append(line)
    lines.extend(isolation_lines(result))
    lines.extend(warning_lines(result))
    lines.extend(transcript_lines(result))
    return lines


def transcript_lines(result: Mapping[str, Any]) -> list[str]:
    """Where the run was recorded (none when it was not)."""
    if not result.get("transcript"):
        return []
    return [f"transcript: genesis show {short_id(result.get('run_id'))}"]


def stopped_lines(outcome: Any, result: Mapping[str, Any]) -> list[str]:
    """What a person sees after Ctrl-C: that it stopped, and what it did so far."""
    lines = [f"genesis run: {cli_words(str(result['message']))}."]
    for i, line in enumerate(outcome.tracker.summary_lines()):
        lines.append(("  so far: " if i == 0 else "          ") + line)
    lines.extend(f"  {line}" for line in transcript_lines(result))
    return lines


def failure_report(result: Mapping[str, Any], *, readable: bool = False) -> str | None:
    """The failure report of a response: the one it carries, else one
    formatted from its failure record; None when it has neither.  ``readable``:
    formatted from the record for a person (its metadata as lines, not XML)."""
    text = result.get("failure_report")
    failure = result.get("failure")
    if isinstance(text, str) and text.strip() and not (readable and isinstance(failure, Mapping)):
        return text
    if not isinstance(failure, Mapping):
        return None
    from pydantic import ValidationError

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._failures.report import format_failure_report
    from coding_genesis.result import ChildFailure

    try:
        return format_failure_report(ChildFailure.model_validate(dict(failure)), readable=readable)
    except (ValidationError, ValueError, TypeError):
        return None


def isolation_lines(result: Mapping[str, Any]) -> list[str]:
    """The run's worktree and verify, one line each (isolated or verified runs only)."""
    lines = []
    tree = result.get("worktree")
    if isinstance(tree, Mapping):
        changes = result.get("changes")
        files = changes.get("files_total", 0) if isinstance(changes, Mapping) else "?"
        where = f"kept at {tree.get('path')}" if tree.get("kept") else "worktree removed"
        changed = counted(files, "file") if isinstance(files, int) else f"{files} files"
        lines.append(f"branch: {tree.get('branch')} - {changed} changed - {where}")
    verify = result.get("verify")
    if isinstance(verify, Mapping):
        lines.append(
            f"verify: {verify.get('status')} (exit {verify.get('exit_code')}, "
            f"{len(verify.get('history') or [verify])} run(s))"
        )
    return lines
