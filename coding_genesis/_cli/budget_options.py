"""Budget and price options shared by ``genesis run`` and ``genesis run-many``.

``--max-cost``, ``--max-tokens``, ``--budget-turns``, ``--budget-tool-calls``
(ours, enforced mid-run; not the CLI's own ``--max-turns``),
``--budget-include-cache``, ``--budget-warn-at`` and ``--prices FILE``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coding_genesis._observers.prices import ModelPrice
    from coding_genesis.budget import Budget

__all__ = ["add_budget_arguments", "budget_from", "prices_from"]


def _non_negative(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
        if value < 0 or value != value or value in (float("inf"),):
            raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
        return value

    return parse


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of fractions: {text!r}") from None
    if any(not 0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be between 0 and 1: {text!r}")
    return values


def add_budget_arguments(parser: argparse.ArgumentParser, *, batch: bool = False) -> None:
    scope = "the whole batch (one shared pot)" if batch else "the run"
    group = parser.add_argument_group(
        "budget",
        f"limits on {scope}, enforced by coding-genesis as usage streams in; crossing one "
        "stops the process tree and answers error budget_exceeded",
    )
    group.add_argument(
        "--max-cost", type=_non_negative(float), metavar="USD", help="stop past this cost"
    )
    group.add_argument(
        "--max-tokens",
        type=_non_negative(int),
        metavar="N",
        help="stop past this many input + output tokens",
    )
    group.add_argument(
        "--budget-turns",
        type=_non_negative(int),
        metavar="N",
        help="stop past this many model responses (ours; not the CLI's own --max-turns)",
    )
    group.add_argument(
        "--budget-tool-calls",
        type=_non_negative(int),
        metavar="N",
        help="stop past this many tool calls",
    )
    group.add_argument(
        "--budget-include-cache",
        action="store_true",
        help="count cache reads and writes in --max-tokens",
    )
    group.add_argument(
        "--budget-warn-at",
        type=_fractions,
        default=(0.5, 0.8),
        metavar="F,F",
        help="fractions of a limit at which a budget warning event is sent (default 0.5,0.8)",
    )
    if batch:
        group.add_argument(
            "--budget-per-run",
            action="store_true",
            help="apply the limits to each run separately instead of to the whole batch",
        )
    group.add_argument(
        "--prices",
        metavar="FILE",
        help='JSON price-table overrides: {"model-prefix": {"input": USD, "output": USD, '
        '"cache_read": USD, "cache_write": USD}} per million tokens',
    )


def budget_from(args: argparse.Namespace) -> Budget | None:
    """The Budget the options ask for, or None (a ConfigError when bad)."""
    limits = {
        "max_cost_usd": args.max_cost,
        "max_tokens": args.max_tokens,
        "max_turns": args.budget_turns,
        "max_tool_calls": args.budget_tool_calls,
    }
    if all(v is None for v in limits.values()):
        return None
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.budget import Budget

    return Budget(
        **{k: v for k, v in limits.items() if v is not None},
        include_cache=args.budget_include_cache,
        warn_at=args.budget_warn_at,
        per_run=bool(getattr(args, "budget_per_run", False)),
    )


def prices_from(args: argparse.Namespace) -> dict[str, ModelPrice] | None:
    if not args.prices:
        return None
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.prices import load_prices

    return load_prices(args.prices)
