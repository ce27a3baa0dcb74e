"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import math
import sys

import orjson

__all__ = ["positive_seconds", "print_json", "status_exit_code"]


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
    sys.stdout.buffer.write(
        orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"
    )
    sys.stdout.flush()


def status_exit_code(status: int) -> int:
    """Exit codes are 0..255; anything else becomes 1."""
    return status if 0 <= status <= 255 else 1
