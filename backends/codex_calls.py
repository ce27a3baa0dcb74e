"""The calls with an answer a live codex session makes
(:meth:`~coding_genesis.control.ControlProtocol.call`), and the context's use
as codex reports it.

* ``compact``: ``thread/compact/start {threadId}`` (0.169's
  ``ThreadCompactStartParams``), answered ``{}`` at once; the compaction
  itself is a turn codex then begins by itself (``turn/started``, a
  ``contextCompaction`` item, ``turn/completed``), which the session takes as
  the CLI's turn (:class:`~coding_genesis.control.TurnBegan`).
* The context's use is not asked: codex tells it after each model request
  (``thread/tokenUsage/updated``): the last request's ``totalTokens`` (its
  input and output: what the next request carries; codex's own "context
  left" reads the same) of ``modelContextWindow``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.control import ControlIntent
from coding_genesis.result import ContextUsage

from ._common import as_int

__all__ = ["CALLS", "call_request", "context_of"]

#: The calls codex answers: intent name -> its method.
CALLS: Mapping[str, str] = {"compact": "thread/compact/start"}


def call_request(intent: ControlIntent, thread_id: str | None) -> tuple[str, dict[str, Any]]:
    """The method and params of ``intent`` on the thread ``thread_id``
    (NotImplementedError: codex has no such call; ValueError: no thread yet)."""
    method = CALLS.get(intent.name)
    if method is None:
        raise NotImplementedError(f"codex app-server cannot {intent.name}")
    if thread_id is None:
        raise ValueError(f"{intent.name}: the thread is not open yet")
    return method, {"threadId": thread_id}


def context_of(usage: Mapping[str, Any]) -> ContextUsage | None:
    """The context's use a ``thread/tokenUsage/updated``'s ``tokenUsage`` says
    (None: it says none we can read)."""
    last = usage.get("last")
    used = as_int(last.get("totalTokens")) if isinstance(last, Mapping) else None
    if used is None or used < 0:
        return None
    window = as_int(usage.get("modelContextWindow"))
    return ContextUsage(
        used, window if window and window > 0 else None, "codex thread/tokenUsage/updated"
    )
