"""Retry options shared by commands that run requests (``genesis run``)."""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any

from coding_genesis._cli.common import positive_seconds, whole_number
from coding_genesis._util.display import printable

if TYPE_CHECKING:
    from coding_genesis.events import Event
    from coding_genesis.retry import RetryPolicy

__all__ = ["add_retry_arguments", "attempt_printer", "retry_policy"]


def add_retry_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "retries",
        "By default a request is one attempt. --retries or --retry-policy turn on the "
        "retry policy (the default strategies per failure category); each attempt is "
        "printed to stderr.",
    )
    group.add_argument(
        "--retries",
        type=whole_number(0, 1000),
        default=None,
        metavar="N",
        help="retry each retryable failure (timeout, network, rate limit, internal, "
        "partial) up to N times, with the default backoffs",
    )
    group.add_argument(
        "--retry-policy",
        choices=("default", "none"),
        default=None,
        help="default: the default retry counts and backoffs; none: one attempt (the default "
        "without --retries)",
    )
    group.add_argument(
        "--retry-deadline",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="give up once attempts and waits would take longer than this in total",
    )
    group.add_argument(
        "--retry-fresh",
        action="store_true",
        help="start each retry in a fresh CLI session instead of resuming the failed one",
    )


def retry_policy(args: argparse.Namespace) -> RetryPolicy | None:
    """The policy the retry options ask for (None: one attempt)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.errors import ConfigError
    from coding_genesis.retry import RetryPolicy

    wanted = (
        args.retries is not None
        or args.retry_policy == "default"
        or args.retry_deadline is not None
        or args.retry_fresh
    )
    if args.retry_policy == "none":
        if args.retries:
            raise ConfigError("--retry-policy none contradicts --retries")
        return None
    if not wanted:
        return None
    policy = RetryPolicy.default()
    if args.retries is not None:
        policy = policy.with_retries(args.retries)
    changes: dict[str, Any] = {}
    if args.retry_deadline is not None:
        changes["deadline"] = args.retry_deadline
    if args.retry_fresh:
        changes["resume"] = False
    return policy.model_copy(update=changes) if changes else policy


def attempt_printer(prog: str, stream: IO[str] | None = None) -> Any:
    """An event callback printing one line per attempt outcome to stderr."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.run_events import AttemptEvent

    def show(event: Event) -> None:
        if not isinstance(event, AttemptEvent):
            return
        out = stream or sys.stderr
        data = event.extra
        attempt = event.attempt
        if event.phase == "started":
            if attempt == 1:
                return
            how = (
                f"resuming session {data['resume_session']}"
                if data.get("resume_session")
                else "fresh session"
            )
            timeout = data.get("timeout")
            limit = f", timeout {timeout:g}s" if isinstance(timeout, int | float) else ""
            print(printable(f"{prog}: attempt {attempt} ({how}{limit})"), file=out)
        elif data.get("action") == "succeed":
            if attempt != 1:
                print(f"{prog}: attempt {attempt} succeeded", file=out)
        else:
            line = (
                f"{prog}: attempt {attempt} failed: {data.get('category')}: "
                f"{data.get('message')} -> {data.get('action')}"
            )
            if data.get("action") == "retry":
                line += f" in {data.get('delay_s')}s (at {data.get('scheduled_at')})"
            else:
                line += f" ({data.get('reason')})"
                actions = data.get("suggested_actions")
                if actions:
                    line += "\n  suggested: " + "; ".join(map(str, actions))
            print(printable(line), file=out, flush=True)

    return show
