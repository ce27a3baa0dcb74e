"""The calls with an answer a live claude session makes
(:meth:`~coding_genesis.control.ControlProtocol.call`): each intent's control
request (its ``subtype`` and fields) and how claude's answer reads.

* ``context_usage``: ``get_context_usage {detail: "summary"}`` (claude 2.1.330;
  ``summary`` answers from the last response's usage and local estimates,
  without the per-category token-count calls ``full`` makes).  The answer's
  ``totalTokens`` of ``maxTokens``: claude's estimate of the whole context, its
  system prompt and tools included (measured against the fake model server after
  one turn: 14185 of 1000000, where the model reported 12 input tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from coding_genesis.control import ControlIntent
from coding_genesis.result import ContextUsage

__all__ = ["CALLS", "ClaudeCall", "call_request"]


@dataclass(frozen=True, slots=True)
class ClaudeCall:
    """One intent as claude's control request: its ``subtype``, its fields and
    how its answer (the ``response`` object of a success) reads."""

    subtype: str
    fields: Mapping[str, Any]
    read: Callable[[Mapping[str, Any]], Any]


def _context_usage(answer: Mapping[str, Any]) -> ContextUsage:
    used, size = answer.get("totalTokens"), answer.get("maxTokens")
    if not isinstance(used, int) or isinstance(used, bool):
        raise ValueError(f"get_context_usage answered no totalTokens: {str(answer)[:200]}")
    ok = isinstance(size, int) and not isinstance(size, bool) and size > 0
    return ContextUsage(used, size if ok else None, "claude get_context_usage")


#: The calls claude answers, by intent name.
CALLS: Mapping[str, ClaudeCall] = {
    "context_usage": ClaudeCall("get_context_usage", {"detail": "summary"}, _context_usage),
}


def call_request(intent: ControlIntent) -> ClaudeCall:
    """The control request of ``intent`` (NotImplementedError: claude has none)."""
    call = CALLS.get(intent.name)
    if call is None:
        raise NotImplementedError(f"claude stream-json control cannot {intent.name}")
    return call
