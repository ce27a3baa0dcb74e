"""``genesis worktrees``: the worktrees of isolated runs in this repository;
``genesis worktrees prune``: remove those no live run uses (branches stay);
``--branches``: also the branches of finished runs whose commits another
branch reaches (the rest with ``--force``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from coding_genesis._cli.common import for_stdout, usage_error
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._util.display import printable

EXAMPLES = """\
examples:
  genesis worktrees                  list this repository's worktrees of isolated runs
  genesis worktrees prune --dry-run  say which would be removed
  genesis worktrees prune            remove them (uncommitted work is committed to
                                     each run's branch first; branches stay)
  genesis worktrees prune --branches --dry-run
                                     also list the branches of finished runs
  genesis worktrees prune --branches remove those whose commits another branch
                                     reaches (nothing is lost); --force: all

A run with --isolate (isolation="worktree") removes its worktree when it ends
unless told to keep it (--keep); a runner that died leaves one, which the next
sweep of the run ledger (`genesis reap`, or any agent's first run) removes.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worktrees",
        help=COMMAND_HELP["worktrees"],
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
    parser.add_argument(
        "--branches",
        action="store_true",
        help="prune: also the coding-genesis/<run> branches of finished runs whose commits "
        "another branch reaches",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="prune --branches: also the branches with commits no other branch has (lost)",
    )
    parser.set_defaults(handler=handle)


def _live_worktrees() -> tuple[frozenset[str], frozenset[str]]:
    """Worktree paths and branches of runs whose runner is alive (from the run ledger)."""
    import os

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import ledger_setting
    from coding_genesis._supervision.ledger import Ledger

    setting = ledger_setting()
    if setting is False:
        return frozenset(), frozenset()
    ledger = Ledger(setting if isinstance(setting, str) else None)
    dead = {str(path) for path, _ in ledger.dead()}
    live, branches = set(), set()
    for path, entry in ledger.entries():
        worktree = entry.get("worktree")
        if str(path) not in dead and isinstance(worktree, dict) and worktree.get("path"):
            live.add(os.path.realpath(str(worktree["path"])))
            if isinstance(worktree.get("branch"), str):
                branches.add(worktree["branch"])
    return frozenset(live), frozenset(branches)


def handle(args: argparse.Namespace) -> int:
    import anyio
    import orjson

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._workspace.isolation import WorktreeRefused
    from coding_genesis._workspace.reclaim import list_ours, prune, prune_branches

    if (args.branches or args.force) and args.action != "prune":
        return usage_error("worktrees", "--branches and --force go with prune")
    if args.force and not args.branches:
        return usage_error("worktrees", "--force goes with --branches")
    branches: list[dict[str, Any]] = []
    try:
        if args.action == "list":
            found = anyio.run(lambda: list_ours(args.cwd, worktrees_dir=args.worktrees_dir))
        else:
            live, live_branches = _live_worktrees()
            found = anyio.run(
                lambda: prune(
                    args.cwd, worktrees_dir=args.worktrees_dir, live=live, dry_run=args.dry_run
                )
            )
            if args.branches:
                # A dry run leaves the worktrees: their branches count as freed.
                freed = frozenset(str(e.get("branch")) for e in found) if args.dry_run else None
                branches = anyio.run(
                    lambda: prune_branches(
                        args.cwd,
                        live=live_branches,
                        force=args.force,
                        dry_run=args.dry_run,
                        free=freed,
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
    for entry in branches:
        if args.json:
            sys.stdout.buffer.write(orjson.dumps({"type": "branch", **entry}) + b"\n")
            continue
        print(printable(f"branch {entry['branch']}  {_branch_state(entry, args)}"))
    if args.branches and not args.json:
        gone = sum(e["removed"] for e in branches)
        would = sum(e["unique"] == 0 or args.force for e in branches)
        said = f"{would} would be removed" if args.dry_run else f"{gone} removed"
        print(f"{len(branches)} branch(es) of finished runs: {said}", file=sys.stderr)
    return 0


def _branch_state(entry: dict[str, Any], args: argparse.Namespace) -> str:
    unique = int(entry["unique"])
    if entry["removed"]:
        return "removed" + (f" ({unique} commit(s) no other branch has)" if unique else "")
    if unique == 0:
        return "would be removed (another branch has its commits)"
    if args.force:
        return f"would be removed with {unique} commit(s) no other branch has"
    return f"kept: {unique} commit(s) no other branch has (--force removes it)"
