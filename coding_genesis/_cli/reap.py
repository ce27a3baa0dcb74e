"""``genesis reap``: stop what runs of runners that died left running."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._util.display import printable

EXAMPLES = """\
examples:
  genesis reap --dry-run        list the dead runners' runs and their processes
  genesis reap                  stop them, mark their transcripts, drop their records

A run whose runner died (kill -9, OOM, a cancelled CI job) leaves a record in
the run ledger; its CLI got a parent-death signal, but what the CLI started may
still run.  Every agent sweeps the ledger at its first run; this does it now.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reap",
        help=COMMAND_HELP["reap"],
        description="Sweep the run ledger: stop every process of runs whose runner is gone.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dry-run", action="store_true", help="only say what would be stopped")
    parser.add_argument(
        "--ledger", help="the ledger directory (else $GENESIS_LEDGER, else default)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import ledger_setting
    from coding_genesis._supervision.ledger import Ledger, LedgerError
    from coding_genesis._workspace.sweep import sweep_sync

    setting = args.ledger if args.ledger else ledger_setting()
    if setting is False:
        print("genesis reap: the run ledger is off (GENESIS_LEDGER=off)", file=sys.stderr)
        return 0
    ledger = Ledger(setting if isinstance(setting, str) else None)
    try:
        swept = sweep_sync(ledger, dry_run=args.dry_run)
    except LedgerError as exc:
        print(f"genesis reap: {exc}", file=sys.stderr)
        return 1
    verb = "would stop" if args.dry_run else "stopped"
    for run in swept:
        if run.refused:
            print(
                printable(
                    f"record of run {run.run_id}: left alone (nothing stopped, deleted or "
                    f"committed): {run.refused}"
                )
            )
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.found_ts))
        pids = " ".join(map(str, run.stopped)) or "-"
        print(
            f"run {run.run_id}: runner pid {run.runner_pid} is gone (found {when}); "
            f"{verb} {len(run.stopped)} process(es): {pids}"
        )
        if run.worktree and run.worktree_refused:
            print(
                printable(
                    f"run {run.run_id}: left its worktree {run.worktree} alone (nothing deleted "
                    f"or committed): {run.worktree_refused}"
                )
            )
        elif run.worktree:
            done = "would remove" if args.dry_run else "removed"
            print(
                printable(
                    f"run {run.run_id}: {done} its worktree {run.worktree} (its branch stays)"
                )
            )
        if run.overlay:
            done = "would remove" if args.dry_run else "removed"
            print(printable(f"run {run.run_id}: {done} its settings overlay {run.overlay}"))
        elif run.overlay_refused:
            print(
                printable(
                    f"run {run.run_id}: left its settings overlay alone: {run.overlay_refused}"
                )
            )
    if ledger.ignored:
        print(
            f"ignored {ledger.ignored} entr{'y' if ledger.ignored == 1 else 'ies'} of "
            f"{ledger.path} not written by us (a link, not a regular file, not ours, "
            "open to others, too big or not a record)"
        )
    if not swept:
        print(f"nothing to reap in {ledger.path}")
    return 0
