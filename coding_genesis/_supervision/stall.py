"""The stall watch: a tree silent on stdout and stderr *and* nearly idle
(under a share of one core) for a whole window is stalled.

A CLI waiting forever on a dead connection is silent and idle; one that
thinks hard or runs a long build is silent but busy, and is left to its wall
clock.  The watch samples the tree's CPU a tenth of the window apart (50 ms
to 5 s), so its cost stays bounded however long the run.  A live session's
turn takes its first sample as the window's base (one sampling interval
into the turn) rather than at the turn's start: sampling means scanning the
process table, which would sit on every turn's path, however short; a stall
is then seen at most one interval later.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coding_genesis._supervision.tree import Tree

__all__ = ["StallWatch"]


class StallWatch:
    """One stall window over a run's tree, from ``start`` (when the tree had
    used ``cpu`` CPU seconds: 0 for a CLI just started; None: unknown, the
    first sample is the base)."""

    __slots__ = ("cpu_share", "every", "limit", "next_sample", "samples", "tree")

    def __init__(
        self, tree: Tree, limit: float, cpu_share: float, start: float, cpu: float | None = 0.0
    ) -> None:
        self.tree = tree
        self.limit = limit
        self.cpu_share = cpu_share
        self.every = min(max(limit / 10, 0.05), 5.0)
        self.next_sample = start + self.every
        #: (time, tree CPU seconds) samples covering the last window.
        self.samples: deque[tuple[float, float]] = deque(() if cpu is None else [(start, cpu)])

    def sample(self, now: float, silent_since: float) -> tuple[float, float] | None:
        """Sample the tree's CPU now; the evidence (seconds silent, CPU
        seconds in the window) once silent and idle for the whole window."""
        limit, samples = self.limit, self.samples
        cpu = self.tree.cpu_seconds()
        samples.append((now, cpu))
        self.next_sample = now + self.every
        if len(samples) == 1:  # the base
            return None
        while len(samples) > 1 and samples[1][0] <= now - limit:
            samples.popleft()
        if now - silent_since < limit:
            return None
        base_t, base_cpu = samples[0]
        window = now - base_t
        used = cpu - base_cpu
        if window < limit or used >= self.cpu_share * window:
            return None
        return round(now - silent_since, 3), round(used, 3)
