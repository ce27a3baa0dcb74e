"""Injectable time for the retry loop and the circuit breaker.

The testing switch is in code, not in the environment (as stamina's
``set_testing``): :func:`testing` or :func:`set_testing` turn the process's
backoff sleeps into instant, recorded ones.  Nothing here reads an environment
variable, so a production process can never be switched by accident; the
``genesis`` CLI exposes the switch as a documented option.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Iterator
from typing import Literal, Protocol, overload

import anyio
import anyio.lowlevel

from coding_genesis._util.homes import public
from coding_genesis.errors import ConfigError

__all__ = [
    "Clock",
    "SystemClock",
    "VirtualClock",
    "current_clock",
    "is_testing",
    "iso_utc",
    "set_testing",
    "testing",
]


def iso_utc(ts: float, timespec: str = "milliseconds", *, zulu: bool = False) -> str:
    """``ts`` (seconds since the epoch) as ISO 8601 in UTC, to ``timespec``;
    ``zulu``: ``Z`` rather than ``+00:00`` (what the failer and the retry
    records write)."""
    text = _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat(timespec=timespec)
    return text.replace("+00:00", "Z") if zulu else text


class Clock(Protocol):
    """Where the retry loop and the circuit breaker get their time from."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class VirtualClock:
    """Time that the test controls: ``sleep`` returns at once (after a
    checkpoint, so cancellation still works), records how long it was asked to
    wait and moves the clock on by that much; ``advance`` moves it by hand.

    Real time still passes underneath unless ``frozen`` is set.
    """

    def __init__(self, *, frozen: bool = False) -> None:
        self.frozen = frozen
        self._mono0 = time.monotonic()
        self._wall0 = time.time()
        self.offset = 0.0
        #: Every backoff asked for, in order, in seconds.
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return (self._mono0 if self.frozen else time.monotonic()) + self.offset

    def time(self) -> float:
        if self.frozen:
            return self._wall0 + self.offset
        return self._wall0 + (time.monotonic() - self._mono0) + self.offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ConfigError("a clock cannot go back")
        self.offset += seconds

    async def sleep(self, seconds: float) -> None:
        seconds = max(0.0, float(seconds))
        self.sleeps.append(seconds)
        self.offset += seconds
        await anyio.lowlevel.checkpoint()

    @property
    def slept(self) -> float:
        """Total virtual time spent sleeping."""
        return sum(self.sleeps)


SYSTEM_CLOCK = SystemClock()
_testing_clock: VirtualClock | None = None


def current_clock() -> Clock:
    """The virtual clock while testing is on, else real time."""
    return _testing_clock if _testing_clock is not None else SYSTEM_CLOCK


def is_testing() -> bool:
    return not isinstance(current_clock(), SystemClock)


def set_testing(enabled: bool) -> VirtualClock | None:
    """Switch the whole process to virtual time (backoff sleeps are instant and
    recorded) or back.  Returns the clock now in use when enabled."""
    global _testing_clock
    _testing_clock = VirtualClock() if enabled else None
    return _testing_clock


@overload
def testing(enabled: Literal[True] = ...) -> contextlib.AbstractContextManager[VirtualClock]: ...  # noqa: PT028  (not a test: the virtual-clock context)


@overload
def testing(enabled: bool) -> contextlib.AbstractContextManager[VirtualClock | None]: ...


def testing(enabled: bool = True) -> contextlib.AbstractContextManager[VirtualClock | None]:  # noqa: PT028  (not a test: the virtual-clock context)
    """``with testing() as clock:`` — virtual time inside the block.

    Process-wide (agents in other threads see it too); the previous setting
    comes back on exit.  ``clock.sleeps`` lists the backoffs the code asked for.
    """
    return _testing(enabled)


@contextlib.contextmanager
def _testing(enabled: bool) -> Iterator[VirtualClock | None]:
    global _testing_clock
    previous = _testing_clock
    _testing_clock = VirtualClock() if enabled else None
    try:
        yield _testing_clock
    finally:
        _testing_clock = previous


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(VirtualClock)
