"""``genesis worktrees``: the worktrees of isolated runs in this repository;
``genesis worktrees prune``: remove those no live run uses (branches stay)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from coding_genesis._cli.common import for_stdout, usage_error
from coding_genesis._util.display import printable

EXAMPLES = """\
examples:
  genesis worktrees                  list this repository's worktrees of isolated runs
  genesis worktrees prune --dry-run  say which would be removed
  genesis worktrees prune            remove them (uncommitted work is committed to
                                     each run's branch first; branches stay)

A run with --isolate (isolation="worktree") removes its worktree when it ends
unless told to keep it (--keep); a runner that died leaves one, which the next
sweep of the run ledger (`genesis reap`, or any agent's first run) removes.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worktrees",
        help="list (or prune) the git worktrees of isolated runs",
        description="List the git worktrees coding-genesis made for isolated runs in a "
        "repository, or prune those no live run uses.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", nargs="?", choices=("list", "prune"), default="list")
    parser.add_argument("--cwd", "-C", default=".", help="a directory of the repository")
    parser.add_argument(
        "--worktrees-dir", default=None, help="where the worktrees are (default: ours)"
    )
    parser.add_argument("--dry-run", action="store_true", help="prune: only say what it would do")
    parser.add_argument("--json", action="store_true", help="one JSON object per worktree")
    parser.set_defaults(handler=handle)


def _live_worktrees() -> frozenset[str]:
    """Worktree paths of runs whose runner is alive (from the run ledger)."""
    import os

    from coding_genesis._cli.env import ledger_setting
    from coding_genesis._supervision.ledger import Ledger

    setting = ledger_setting()
    if setting is False:
        return frozenset()
    ledger = Ledger(setting if isinstance(setting, str) else None)
    dead = {str(path) for path, _ in ledger.dead()}
    live = set()
    for path, entry in ledger.entries():
        worktree = entry.get("worktree")
        if str(path) not in dead and isinstance(worktree, dict) and worktree.get("path"):
            live.add(os.path.realpath(str(worktree["path"])))
    return frozenset(live)


def handle(args: argparse.Namespace) -> int:
    import anyio
    import orjson

    from coding_genesis._workspace.isolation import WorktreeRefused
    from coding_genesis._workspace.reclaim import list_ours, prune

    try:
        if args.action == "list":
            found = anyio.run(lambda: list_ours(args.cwd, worktrees_dir=args.worktrees_dir))
        else:
            live = _live_worktrees()
            found = anyio.run(
                lambda: prune(
                    args.cwd, worktrees_dir=args.worktrees_dir, live=live, dry_run=args.dry_run
                )
            )
    except WorktreeRefused as exc:
        return usage_error("worktrees", str(exc))
    except OSError as exc:
        print(printable(f"genesis worktrees: {exc}"), file=sys.stderr)
        return 1
    for entry in found:
        if args.json:
            sys.stdout.buffer.write(for_stdout(orjson.dumps(entry) + b"\n"))
            continue
        state = "" if entry.get("exists", True) else " (missing)"
        print(printable(f"{entry['path']}  {entry.get('branch', '(detached)')}{state}"))
    if not args.json:
        verb = {"list": "worktree(s)", "prune": "removed" if not args.dry_run else "would remove"}
        print(f"{len(found)} {verb[args.action]}", file=sys.stderr)
    return 0
