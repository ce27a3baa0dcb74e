"""``genesis runs``: the recent recorded runs, newest first."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from typing import TYPE_CHECKING, Any

from coding_genesis._cli.common import add_transcript_dir, for_stdout, transcript_base, whole_number
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._util.display import printable

if TYPE_CHECKING:
    from coding_genesis._observers.records import RunRecord

__all__ = ["register", "row"]

EXAMPLES = """\
examples:
  genesis runs                      the 20 newest runs
  genesis runs -n 100 --failed      the failed ones among the 100 newest
  genesis runs --json | jq -r 'select(.status != 0) | .run_id'
  genesis show last                 the newest run in detail

STATUS is the response status (0 ok; see `genesis --help`), "-" for a run whose
runner never finished (killed or crashed): its stdout and events are still there.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "runs",
        help=COMMAND_HELP["runs"],
        description="List the runs recorded in the transcript directory, newest first.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--limit", "-n", type=whole_number(1), default=20, help="how many runs (default 20)"
    )
    parser.add_argument("--failed", action="store_true", help="only runs with a non-zero status")
    parser.add_argument("--json", action="store_true", help="one JSON object per run, one per line")
    add_transcript_dir(parser)
    parser.set_defaults(handler=handle)


def row(record: RunRecord) -> dict[str, Any]:
    """What the listing shows of one run (a damaged one says so)."""
    try:
        return _row(record)
    except Exception as exc:  # noqa: BLE001 (fields of the wrong type: shown, never a traceback)
        return {
            "run_id": record.path.name,
            "started": None,
            "backend": None,
            "status": None,
            "error": f"damaged run directory ({type(exc).__name__})",
            "duration_s": None,
            "tool_calls": None,
            "finished": False,
            "prompt": "",
            "path": str(record.path),
        }


def _row(record: RunRecord) -> dict[str, Any]:
    result = record.result if isinstance(record.result, dict) else {}
    prompt = str(record.meta.get("prompt") or "")
    first = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    return {
        "run_id": record.run_id,
        "started": record.meta.get("started"),
        "backend": record.meta.get("backend"),
        "status": result.get("status") if record.result is not None else None,
        "error": f"damaged run directory ({'; '.join(record.damaged)})"
        if record.damaged
        else result.get("error"),
        "duration_s": result.get("duration_s"),
        "tool_calls": result.get("tool_calls"),
        "finished": record.result is not None,
        #: "runner_death" when the sweep found the runner dead, with when it did.
        "ended_by": (record.ended or {}).get("ended_by") if record.result is None else None,
        "swept_at": (record.ended or {}).get("found_ts") if record.result is None else None,
        "stalled": result.get("error") == "stalled",
        "prompt": first[:200],
        "path": str(record.path),
    }


def _local(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.records import list_runs
    from coding_genesis._observers.transcript import safe_dumps

    base = transcript_base(args, "runs")
    if base is None:
        return 2
    records = list_runs(base)
    if args.failed:
        records = [r for r in records if (r.result or {}).get("status", 1) != 0]
    records = records[: args.limit]
    for record in records:
        if record.damaged:  # said on stderr too, whatever the format
            note = f"genesis runs: run directory {record.path} is damaged: "
            print(printable(note + "; ".join(record.damaged)), file=sys.stderr)
    if args.json:
        out = sys.stdout.buffer
        tty = sys.stdout.isatty()
        for record in records:
            out.write(for_stdout(safe_dumps(row(record)) + b"\n", tty))
        out.flush()
        return 0
    if not records:
        print(f"no recorded runs in {base}", file=sys.stderr)
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    right = {"STATUS", "TIME", "TOOLS"}
    for name in ("RUN", "STARTED", "BACKEND", "STATUS", "TIME", "TOOLS", "PROMPT"):
        table.add_column(
            name,
            justify="right" if name in right else "left",
            no_wrap=name != "PROMPT",
            overflow="ellipsis",
        )
    for record in records:
        r = row(record)
        status = "-" if r["status"] is None else str(r["status"])
        if r["ended_by"] == "runner_death":
            status = f"- runner died (swept {_local(float(r['swept_at'] or 0))})"
        style = "" if r["status"] == 0 else "red"
        duration = r["duration_s"]
        cells = (
            r["run_id"][:12],
            _local(record.started),
            str(r["backend"] or "?"),
            status + (f" {r['error']}" if r["error"] else ""),
            f"{duration:.1f}s" if isinstance(duration, int | float) else "-",
            str(r["tool_calls"] if r["tool_calls"] is not None else "-"),
            r["prompt"],
        )
        table.add_row(*(Text(printable(cell)) for cell in cells), style=style)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(table)
    print(f"\n{len(records)} run(s) in {base}; details: genesis show RUN", file=sys.stderr)
    return 0
