"""Which event loop, if any, runs in this thread (a blocking call must not be
made from one)."""

from __future__ import annotations

import asyncio
import sys

__all__ = ["running_event_loop"]


def running_event_loop() -> str | None:
    """Name of the event loop running in this thread ("asyncio", "trio"), if any."""
    try:
        asyncio.get_running_loop()
        return "asyncio"
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
            return "trio"
        except RuntimeError:
            pass
    return None
