"""Token usage: the four counts we keep (input, output, cache reads, cache
writes) and how each CLI's usage dict maps onto them.

A data type below the backends: a backend's translator folds usage with it,
metering sums it, progress shows it; each reads the same counts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coding_genesis._util.numbers import MAX_SAFE_INT

__all__ = ["RunningTotals", "Tokens", "normalize_usage"]


@dataclass(slots=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def add(self, other: Tokens, sign: int = 1) -> None:
        self.input += sign * other.input
        self.output += sign * other.output
        self.cache_read += sign * other.cache_read
        self.cache_write += sign * other.cache_write

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "total": self.input + self.output,
        }


def _int(value: object) -> int:
    """A count, or 0 for anything else: a negative number, NaN, and a number
    beyond ``MAX_SAFE_INT`` (an over-64-bit int breaks every JSON writer)."""
    if type(value) is int:
        return value if 0 < value <= MAX_SAFE_INT else 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if 0 < value <= MAX_SAFE_INT else 0  # NaN fails the test


def normalize_usage(usage: Mapping[str, Any]) -> Tokens:
    """Our four counts from a CLI's usage dict.  claude: ``input_tokens``
    excludes the cache (``cache_read_input_tokens``,
    ``cache_creation_input_tokens``); codex/OpenAI: ``input_tokens`` includes
    ``cached_input_tokens``; claude's ``modelUsage`` uses camelCase."""
    if "cached_input_tokens" in usage:
        cached = _int(usage.get("cached_input_tokens"))
        return Tokens(
            max(0, _int(usage.get("input_tokens")) - cached),
            _int(usage.get("output_tokens")),
            cached,
            _int(usage.get("cache_write_input_tokens")),
        )
    if "inputTokens" in usage:
        return Tokens(
            _int(usage.get("inputTokens")),
            _int(usage.get("outputTokens")),
            _int(usage.get("cacheReadInputTokens")),
            _int(usage.get("cacheCreationInputTokens")),
        )
    get = usage.get
    i, o = get("input_tokens"), get("output_tokens")
    r, w = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    if (  # the usual case, checked inline (a budget normalizes every message)
        type(i) is int
        and type(o) is int
        and type(r) is int
        and type(w) is int
        and 0 <= i <= MAX_SAFE_INT
        and 0 <= o <= MAX_SAFE_INT
        and 0 <= r <= MAX_SAFE_INT
        and 0 <= w <= MAX_SAFE_INT
    ):
        return Tokens(i, o, r, w)
    return Tokens(_int(i), _int(o), _int(r), _int(w))


class RunningTotals:
    """The last running totals each CLI session reported: what makes a run's
    share of a total the CLI counts across its whole session.

    Some CLIs report the *session's* running total rather than the run's:
    claude's ``total_cost_usd`` and ``modelUsage`` (across turns and across
    ``--resume``, even in a new process), codex's thread usage (``codex exec
    resume``, the app-server's ``thread/tokenUsage``).  One rule for all: a
    translator hands each such total to :meth:`share`, which answers the total
    less the last one seen for that session (all of it for a session not seen
    before, or one whose count went down: a new count), and remembers it.
    So each run and turn carries its own share, and a session's shares add up
    to the CLI's own total.

    The core hands one instance, shared by the whole process, to every
    translator (``Translator.totals``); it is bounded (the least recently
    reported sessions are forgotten) and thread-safe.
    """

    __slots__ = ("_lock", "_seen", "size")

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._seen: OrderedDict[tuple[str, str], dict[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def share(self, cli: str, session: str | None, total: Mapping[str, float]) -> dict[str, float]:
        """``total`` (counters by name) less the last total ``cli`` reported
        for ``session``; ``total`` is remembered as the new last one."""
        now = {k: v for k, v in total.items() if isinstance(v, int | float)}
        if not session:
            return now
        key = (cli, session)
        with self._lock:
            before = self._seen.pop(key, None)
            self._seen[key] = now
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        if before is None or any(now.get(k, 0) < v for k, v in before.items()):
            return now
        return {k: v - before.get(k, 0) for k, v in now.items()}

    def seed(self, cli: str, session: str, total: Mapping[str, float]) -> None:
        """What ``session`` had reported before this process saw it (the
        command line reads it from the run log before a ``--resume``)."""
        with self._lock:
            self._seen[(cli, session)] = dict(total)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def last(self, cli: str, session: str) -> dict[str, float] | None:
        """The last total ``session`` reported (None: not seen)."""
        with self._lock:
            found = self._seen.get((cli, session))
            return dict(found) if found is not None else None
