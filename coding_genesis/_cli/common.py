"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import math
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coding_genesis._util.display import json_for_terminal, printable, signal_name

__all__ = [
    "add_line_defaults",
    "add_transcript_dir",
    "for_stdout",
    "positive_seconds",
    "print_json",
    "status_exit_code",
    "stop_signal_name",
    "transcript_base",
    "usage_error",
    "whole_number",
]

#: argparse's convention for a command-line usage error, used by every command.
USAGE_ERROR = 2


def usage_error(command: str, message: str) -> int:
    """Print a usage error the way argparse does and return its exit code (2)."""
    print(printable(f"genesis {command}: error: {message}"), file=sys.stderr)
    return USAGE_ERROR


def stop_signal_name(signum: int | None) -> str:
    """A stop signal as a person knows it: "Ctrl-C" for SIGINT, else its name."""
    if signum is None:
        return "a signal"
    return "Ctrl-C" if signum == signal.SIGINT else signal_name(signum)


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """argparse type: a whole number >= ``minimum`` (and <= ``maximum``, if given)."""
    bounds = f">= {minimum}" if maximum is None else f"{minimum}..{maximum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number {bounds}, got {text!r}"
            ) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected a whole number {bounds}, got {text!r}")
        return value

    return parse


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def print_json(obj: object) -> None:
    """``obj`` as indented JSON that never fails (see ``safe_dumps``)."""
    import orjson

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._observers.transcript import safe_dumps

    data = safe_dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"
    sys.stdout.buffer.write(for_stdout(data))
    sys.stdout.flush()


def for_stdout(data: bytes, tty: bool | None = None) -> bytes:
    """JSON text for stdout: on a terminal its C1 and bidi controls escaped
    (``json_for_terminal``: the same JSON), exact into a pipe or a file.
    ``tty``: whether stdout is a terminal, when the caller asked once."""
    if tty is None:
        tty = sys.stdout.isatty()
    return json_for_terminal(data) if tty else data


def status_exit_code(status: int) -> int:
    """Exit codes are 0..255; anything else becomes 1."""
    return status if 0 <= status <= 255 else 1


def add_line_defaults(parser: Any, description: str) -> Any:
    """The "defaults" group: the settings of the requests that do not set them
    (``run-many``'s lines, ``serve``'s bodies), read by ``run_many.batch_defaults``."""
    defaults = parser.add_argument_group("defaults", description)
    defaults.add_argument(
        "--backend", "-b", default=None, help="backend (default: $GENESIS_BACKEND, else claude)"
    )
    defaults.add_argument("--model", "-m", default=None, help="model name passed to the CLI")
    for flag, short, help_text in (
        ("--timeout", "-t", "wall-clock limit (300)"),
        ("--idle-timeout", None, "stop after this silence"),
        ("--grace", None, "seconds from SIGTERM to SIGKILL"),
    ):
        names = (flag, short) if short else (flag,)
        defaults.add_argument(*names, type=positive_seconds, default=None, help=help_text)
    defaults.add_argument(
        "--permissions",
        choices=("read-only", "edit", "full"),
        default=None,
        help="what the agent may do, enforced by the CLI",
    )
    return defaults


def add_transcript_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transcript-dir",
        metavar="DIR",
        default=None,
        help="where run directories are (default: $GENESIS_TRANSCRIPTS, "
        "else $XDG_STATE_HOME/coding-genesis/runs)",
    )


def transcript_base(args: argparse.Namespace, command: str) -> Path | None:
    """The transcript directory the user means, or None after printing why not."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import TRANSCRIPTS, transcript_dir

    base = transcript_dir(args.transcript_dir)
    if base is None:
        print(
            f"genesis {command}: error: transcripts are turned off "
            f"(--transcript-dir or ${TRANSCRIPTS} is 'off'); "
            "give the directory with --transcript-dir DIR",
            file=sys.stderr,
        )
    return base


#: The signals that stop a run (and a batch): every tree stopped, results so far printed.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def watch_stop_signals(
    stop: list[int],
    first: Callable[[int], object],
    again: Callable[[int], object] | None = None,
    *,
    task_status: Any,
) -> None:
    """Until cancelled (start it with ``task_group.start``): the first stop
    signal is recorded in ``stop`` and handed to ``first``; a later one to
    ``again``.  Our own handlers, so a process started with SIGINT ignored
    still stops."""
    # lazy: `genesis --help` imports only the parsers
    import anyio

    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            if not stop:
                stop.append(signum)
                first(signum)
            elif again is not None:
                again(signum)
