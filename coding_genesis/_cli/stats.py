"""``genesis stats``: failure counts and rates (failure monitoring), and runs,
failures, tokens and cost by backend, model or day, from the run log."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from coding_genesis._cli.common import print_json, whole_number
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._util.display import printable

__all__ = ["format_stats", "format_usage", "register"]

EXAMPLES = """\
examples:
  genesis stats                          the last 24 hours, all backends
  genesis stats --since 7d --backend claude
  genesis stats --since all --json
  genesis stats --since 7d --by day      runs, failures, tokens and cost per day (UTC)
  genesis stats --by model
  genesis stats --max-rate 0.2           exit 1 when more than 20% of runs failed (alerting)

The run log is $GENESIS_RUN_LOG, else $XDG_STATE_HOME/coding-genesis/runs.jsonl
(~/.local/state/coding-genesis/runs.jsonl); GENESIS_RUN_LOG=off switches it off.
"""


def _window(text: str) -> float | None:
    from coding_genesis._observers.runlog import parse_window  # lazy: --help loads no orjson

    try:
        return parse_window(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a rate between 0 and 1, got {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stats",
        help=COMMAND_HELP["stats"],
        description="Count runs and failures by category and backend, and tokens and cost "
        "by backend, model or day, over a time window, from the run log every run appends to.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--since",
        type=_window,
        default=86400.0,
        metavar="WINDOW",
        help="time window: 30m, 24h, 7d, 1w or all (default 24h)",
    )
    parser.add_argument("--backend", "-b", default=None, help="only runs of this backend")
    parser.add_argument("--log", default=None, help="run log to read (default: see below)")
    parser.add_argument(
        "--by",
        choices=("backend", "model", "day"),
        default="backend",
        help="group runs, tokens and cost by backend (default), model or day (UTC)",
    )
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument(
        "--max-rate",
        type=_rate,
        default=None,
        help="exit 1 with an alert on stderr when the failure rate is above this (0..1)",
    )
    parser.add_argument(
        "--max-failures",
        type=whole_number(0),
        default=None,
        help="exit 1 with an alert on stderr when there are more failures than this",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import run_log_path
    from coding_genesis._observers.runlog import failure_stats, usage_stats

    path = args.log if args.log is not None else run_log_path()
    if path is None:
        print("genesis stats: the run log is switched off (GENESIS_RUN_LOG=off)", file=sys.stderr)
        return 2
    stats = failure_stats(path, since_s=args.since, backend=args.backend)
    usage = usage_stats(path, since_s=args.since, backend=args.backend, by=args.by)
    if args.json:
        print_json({**stats, "usage": {"by": usage["by"], **_groups(usage)}})
    elif not stats["runs"]:
        print(printable(format_usage(usage)))
        print(
            "Runs are recorded by `genesis run` and `genesis run-many`, and by agents "
            "given run_log=PATH; try a longer window with --since 7d or --since all.",
        )
    else:
        print(printable(format_stats(stats)))
        print()
        print(printable(format_usage(usage)))
    alerts = []
    if args.max_rate is not None and stats["failure_rate"] > args.max_rate:
        alerts.append(
            f"failure rate {stats['failure_rate'] * 100:.1f}% is above {args.max_rate * 100:g}%"
        )
    if args.max_failures is not None and stats["failures"] > args.max_failures:
        alerts.append(f"{stats['failures']} failures is more than {args.max_failures}")
    for alert in alerts:
        print(f"genesis stats: ALERT: {alert}", file=sys.stderr)
    return 1 if alerts else 0


def _groups(usage: dict[str, Any]) -> dict[str, Any]:
    return {"total": usage["total"], "groups": usage["groups"]}


# -- the text of the statistics ---------------------------------------------------


def _window_text(since_s: float | None) -> str:
    if since_s is None:
        return "all time"
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if since_s >= size and since_s % size == 0:
            return f"the last {since_s / size:g}{unit}"
    return f"the last {since_s:g}s"


def format_stats(stats: Mapping[str, Any]) -> str:
    """A short text summary of :func:`failure_stats`."""
    scope = f" for backend {stats['backend']}" if stats.get("backend") else ""
    apart = "".join(
        f", {label}: {stats[key]}"
        for key, label in (("cancelled", "cancelled"), ("not_started", "not started"))
        if stats.get(key)
    )
    lines = [
        f"Runs in {_window_text(stats.get('since_s'))}{scope}: {stats['runs']}, "
        f"failed: {stats['failures']} ({stats['failure_rate'] * 100:.1f}%){apart}",
        f"Run log: {stats.get('log') or 'off'}",
    ]
    if stats["by_category"]:
        lines += ["", "By category:"]
        width = max(len(c) for c in stats["by_category"])
        for category, entry in stats["by_category"].items():
            lines.append(
                f"  {category:<{width}}  {entry['count']:>5}  "
                f"{entry['share'] * 100:5.1f}% of failures  {entry['rate'] * 100:5.1f}% of runs"
            )
    if stats["by_backend"]:
        lines += ["", "By backend:"]
        width = max(len(b) for b in stats["by_backend"])
        for name, entry in stats["by_backend"].items():
            cats = ", ".join(f"{c} {n}" for c, n in entry["by_category"].items())
            lines.append(
                f"  {name:<{width}}  {entry['runs']:>5} runs, {entry['failures']} failed "
                f"({entry['failure_rate'] * 100:.1f}%)" + (f": {cats}" if cats else "")
            )
    if stats["top_blockers"]:
        lines += ["", "Top blockers:"]
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._failures.analysis import error_words

        # A run logged before its blocker was put in words may hold an error body's
        # JSON: counted with the same blocker in words.
        counts: dict[str, int] = {}
        for b in stats["top_blockers"]:
            words = error_words(str(b["blocked_on"]))
            counts[words] = counts.get(words, 0) + int(b["count"])
        ranked = sorted(counts.items(), key=lambda item: -item[1])
        lines += [f"  {count:>5}x {words}" for words, count in ranked]
    if stats.get("malformed_lines"):
        lines += ["", f"({stats['malformed_lines']} unreadable line(s) skipped)"]
    return "\n".join(lines)


def _tokens_text(n: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _cost_text(entry: Mapping[str, Any]) -> str:
    if not entry["runs_with_cost"]:
        return "-"
    text = f"${entry['cost_usd']:.4f}"
    if entry["runs_with_cost"] < entry["runs"]:
        text += f" ({entry['runs_with_cost']}/{entry['runs']} runs)"
    return text


def format_usage(stats: Mapping[str, Any]) -> str:
    """A table of :func:`usage_stats`: one row per group, then the total."""
    total = stats["total"]
    if not total["runs"]:
        return (
            f"No runs recorded in {_window_text(stats.get('since_s'))}"
            + (f" for backend {stats['backend']}" if stats.get("backend") else "")
            + f" (run log: {stats.get('log')})."
        )
    header = (stats["by"], "runs", "failed", "input tok", "output tok", "cache read", "cost")
    rows = [
        (
            key,
            str(entry["runs"]),
            f"{entry['failures']} ({entry['failure_rate'] * 100:.0f}%)",
            _tokens_text(entry["input_tokens"]),
            _tokens_text(entry["output_tokens"]),
            _tokens_text(entry["cache_read_tokens"]),
            _cost_text(entry),
        )
        for key, entry in [*stats["groups"].items(), ("total", total)]
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        first = row[0].ljust(widths[0])
        rest = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        return f"  {first}  {rest}"

    lines = [f"Usage by {stats['by']}:", line(header), *map(line, rows)]
    if total["runs_with_usage"] < total["runs"]:
        lines.append(
            f"  ({total['runs'] - total['runs_with_usage']} run(s) reported no token usage)"
        )
    return "\n".join(lines)
