"""``genesis show RUN``: one recorded run: summary, tools, failure report."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from coding_genesis._cli.common import add_transcript_dir, for_stdout, print_json, transcript_base
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.render import budget_line, failure_report, tools_text, usage_line
from coding_genesis._util.display import printable

if TYPE_CHECKING:
    from coding_genesis._observers.records import RunRecord
    from coding_genesis.events import Event

__all__ = ["register", "tool_lines"]

EXAMPLES = """\
examples:
  genesis show last                 the newest run
  genesis show 4de2c9cc             by a unique prefix of its id (see `genesis runs`)
  genesis show -2 --json            the run before the newest, as its response dict
  genesis show last --events | jq -c 'select(.type=="tool_call") | .name'
  genesis show last --raw > stream.jsonl && genesis replay stream.jsonl
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "show",
        help=COMMAND_HELP["show"],
        description="Show one recorded run: what was asked, what happened, which tools ran, "
        "and the failure report when it failed.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run", metavar="RUN", help="a run id or unique prefix, 'last', or -N for the N-th newest"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--json", action="store_true", help="print the response dict (result.json)")
    what.add_argument("--events", action="store_true", help="print the events as JSON lines")
    what.add_argument("--raw", action="store_true", help="print the CLI's raw stdout")
    add_transcript_dir(parser)
    parser.set_defaults(handler=handle)


def tool_lines(events: Iterable[Event]) -> list[str]:
    """One line per tool call, with how it ended."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.progress import tool_summary
    from coding_genesis.events import ToolCallEvent, ToolResultEvent
    from coding_genesis.run_events import AttemptEvent

    calls: dict[str, int] = {}
    lines: list[str] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            calls[event.id or str(len(lines))] = len(lines)
            lines.append(tool_summary(event.name or "unknown", event.input, 100))
        elif isinstance(event, ToolResultEvent):
            index = calls.pop(event.id, None)
            if index is not None:
                lines[index] += " -> error" if event.is_error else " -> ok"
        elif isinstance(event, AttemptEvent) and event.phase == "started" and event.attempt != 1:
            lines.append(f"--- attempt {event.attempt} ---")
    for index in calls.values():
        lines[index] += " -> (no result)"
    return lines


def _local(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.records import RunLookupError, find_run

    base = transcript_base(args, "show")
    if base is None:
        return 2
    try:
        record = find_run(base, args.run)
    except RunLookupError as exc:
        print(printable(f"genesis show: error: {exc}"), file=sys.stderr)
        return 2
    if record.damaged:
        print(
            printable(
                f"genesis show: run directory {record.path} is damaged: "
                + "; ".join(record.damaged)
            ),
            file=sys.stderr,
        )
    if args.json:
        if record.result is None:
            print(
                f"genesis show: run {record.run_id} has no result (never finished)", file=sys.stderr
            )
            return 1
        print_json(record.result)
        return 0
    failed = 1 if record.damaged else 0
    if args.events:
        _print_events(record)
        return failed
    if args.raw:
        for path in record.stdout_files():
            _copy(record, path)
        return failed
    try:
        text = render_session(base, record) if record.is_session else render(record)
    except Exception as exc:  # noqa: BLE001 (a damaged or planted run directory: say so, never a traceback)
        print(
            printable(
                f"genesis show: run directory {record.path} is damaged and cannot be shown "
                f"({type(exc).__name__}: {exc}); its files can still be read with --json, "
                "--events, --raw"
            ),
            file=sys.stderr,
        )
        return 1
    print(printable(text))
    return failed


def _print_events(record: RunRecord) -> None:
    """Every event of the run as JSON lines: the runner's own, recorded, and
    those decoded from the recorded stdout (see coding_genesis._observers.transcript)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.transcript import safe_dumps
    from coding_genesis.backends import translator_for

    out = sys.stdout.buffer
    tty = sys.stdout.isatty()
    for event, estimated in record.timed_events(translator_for):
        line = event.to_dict()
        if estimated:  # decoded from the raw stdout, which holds no times
            line["ts_estimated"] = True
        out.write(for_stdout(safe_dumps(line) + b"\n", tty))
    out.flush()


def _copy(record: RunRecord, path: Any) -> None:
    """The raw bytes, exact into a pipe or a file; on a terminal, as text
    without the controls that would drive it (``printable``)."""
    import codecs

    out = sys.stdout.buffer
    text = codecs.getincrementaldecoder("utf-8")("replace") if sys.stdout.isatty() else None
    fh = record.open_file(path)  # a regular file only: a FIFO never hangs us
    if fh is None:
        return
    try:
        with fh:
            while chunk := fh.read(1 << 20):
                out.write(chunk if text is None else printable(text.decode(chunk)).encode())
        out.flush()
    except FileNotFoundError:
        pass


def render_session(base: Any, record: RunRecord) -> str:
    """A live session: its own record, then its turns in order, one line each
    (``genesis show RUN`` shows a turn whole)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.records import session_turns

    meta = record.meta
    summary = record.session_summary() or {}
    lines = [f"session {record.run_id}"]
    lines.append(
        f"  started   {_local(record.started)}   backend {meta.get('backend')}   "
        f"agent {meta.get('agent')}"
    )
    lines.append(f"  cwd       {meta.get('cwd')}")
    if summary:
        cost = summary.get("cost_usd")
        spent = f" - {cost:.6f} USD" if isinstance(cost, int | float) else ""
        lines.append(
            f"  closed    {summary.get('turns', 0)} turn(s){spent} - "
            f"CLI session {summary.get('session_id')}"
        )
    else:
        lines.append("  closed    - not yet (open, or its runner stopped)")
    turns = session_turns(base, record.run_id)
    lines.append(f"turns ({len(turns)}):")
    for turn in turns:
        result = turn.result or {}
        said = str(result.get("message") or "").strip().splitlines()
        status = result.get("status", "-")
        error = f" {result.get('error')}" if result.get("error") else ""
        by = " (started by the CLI)" if turn.meta.get("trigger") == "cli" else ""
        lines.append(
            f"  {turn.meta.get('turn') or '?':>3}  {turn.run_id[:12]}  status {status}{error}{by}"
            f"  {said[0][:100] if said else ''}"
        )
    return "\n".join(lines)


def render(record: RunRecord) -> str:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends import translator_for

    result = record.result
    events = list(record.events(translator_for))
    lines = _header(record)
    lines += _status(record, result, len(events))
    lines += _tools(events, result)
    lines += _failure_and_stderr(record, result)
    lines.append("")
    lines.append(f"files: {record.path}/")
    for path in [*record.stdout_files(), record.path / "events.jsonl"]:
        if path.exists():
            lines.append(f"  {path.name}  {path.stat().st_size} bytes")
    return "\n".join(lines)


def _header(record: RunRecord) -> list[str]:
    """The run, when and where it started, and its prompt's first line."""
    meta = record.meta
    lines = [f"run {record.run_id}"]
    lines.append(
        f"  started   {_local(record.started)}   backend {meta.get('backend')}   "
        f"agent {meta.get('agent')}"
    )
    lines.append(f"  cwd       {meta.get('cwd')}")
    prompt = str(meta.get("prompt") or "")
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    more = " ..." if len(prompt.strip().splitlines()) > 1 or len(first) > 200 else ""
    lines.append(f"  prompt    {first[:200]}{more}")
    return lines


def _status(record: RunRecord, result: Mapping[str, Any] | None, events: int) -> list[str]:
    """How the run ended: by its runner's death, unfinished, or its result."""
    ended = record.ended if result is None else None
    if ended is not None and ended.get("ended_by") == "runner_death":
        found = ended.get("found_ts")
        when = _local(float(found)) if isinstance(found, int | float) else "?"
        return [
            f"  status    - ended by the runner's death (runner pid {ended.get('runner_pid')}): "
            f"found by the sweep at {when}, which stopped {ended.get('stopped', 0)} "
            f"process(es); {events} event(s) were recorded"
        ]
    if result is None:
        return [
            f"  status    - unfinished: the runner stopped before writing a result "
            f"(killed or crashed); {events} event(s) were recorded"
        ]
    lines = [f"  status    {result.get('status')} {result.get('error') or 'ok'}"]
    if result.get("error") == "stalled":
        lines.append("  stalled   the whole process tree was silent and idle; see the message")
    lines.append("  " + "   ".join(_facts(result)))
    for extra in (usage_line(result), budget_line(result)):
        if extra:
            lines.append("  " + extra)
    message = str(result.get("message") or "")
    if message:
        lines.append("  message   " + message.strip().replace("\n", "\n            ")[:4000])
    for warning in result.get("warnings") or ():
        lines.append(f"  warning   {warning}")
    history = result.get("retry_history") or []
    if history:
        lines.append(f"  attempts  {result.get('attempts', len(history) + 1)}")
        for entry in history:
            if isinstance(entry, Mapping):
                lines.append(
                    f"    {entry.get('attempt')}. {entry.get('category')}: "
                    f"{entry.get('message')} -> {entry.get('action')}"
                )
    return lines


def _facts(result: Mapping[str, Any]) -> list[str]:
    """The result's one line of facts: duration, ids, exit, cost, the CLI's retries."""
    facts = [f"duration {result.get('duration_s', 0):.2f}s"]
    for key in ("session_id", "model", "num_turns", "exit_code", "signal", "stop_reason"):
        if result.get(key) is not None:
            facts.append(f"{key} {result[key]}")
    if result.get("cost_usd") is not None:
        facts.append(f"cost ${result['cost_usd']:.4f}")
    if result.get("cli_retries"):
        facts.append(f"CLI API retries {result['cli_retries']}")
    return facts


def _tools(events: list[Event], result: Mapping[str, Any] | None) -> list[str]:
    """The tool calls, numbered, and the files the run modified."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.events import ToolCallEvent

    tools = tool_lines(events)
    calls = sum(1 for e in events if isinstance(e, ToolCallEvent))
    usage: dict[str, int] = {}
    for event in events:
        if isinstance(event, ToolCallEvent):
            name = event.name or "unknown"
            usage[name] = usage.get(name, 0) + 1
    lines = [""]
    lines.append(f"tools: {calls} call(s)" + (f" ({tools_text(usage)})" if usage else ""))
    number = 0
    for line in tools:
        if line.startswith("---"):
            lines.append(f"  {line}")
        else:
            number += 1
            lines.append(f"  {number}. {line}")
    files = (result or {}).get("files_modified") or []
    if files:
        lines.append(f"files modified: {', '.join(files)}")
    return lines


def _failure_and_stderr(record: RunRecord, result: Mapping[str, Any] | None) -> list[str]:
    """The failure report of a failed run and the last lines of its stderr."""
    lines: list[str] = []
    report = failure_report(result, readable=True) if result is not None else None
    if report:
        lines.append("")
        lines.append("failure report:")
        lines += [f"  {line}".rstrip() for line in report.strip().splitlines()]
    stderr = record.stderr().strip()
    if stderr:
        tail = stderr.splitlines()[-10:]
        lines.append("")
        lines.append(f"stderr (last {len(tail)} lines):")
        lines += [f"  {line}" for line in tail]
    return lines
