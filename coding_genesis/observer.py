"""Observers: what watches a run without the agent calling it by hand.

An :class:`Observer` is told when a run starts and gets a
:class:`RunObserver` for it (or None: not interested), which then hears every
event of the run, every raw stdout chunk before it is decoded, and the final
response.  Transcripts and the run log are observers; so are later
capabilities (telemetry, budgets): a new one plugs in with
``CodingGenesisAgent(observers=[...])``, without a branch in the agent.

Observers never break a run: an exception is logged once per observer and
that observer is dropped for the rest of the run.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from coding_genesis._supervision.stop import StopHandle
from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event, EventKind

if TYPE_CHECKING:
    from coding_genesis.result import RunTally

__all__ = [
    "LIFECYCLE_KINDS",
    "Observer",
    "RunInfo",
    "RunLogObserver",
    "RunObserver",
    "RunObservers",
    "TranscriptObserver",
]

log = logging.getLogger("coding_genesis.observer")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is known when a run starts."""

    run_id: str
    agent: str
    backend: str
    prompt: str
    cwd: str
    timeout: float
    model: str | None
    resume: str | None
    #: Wall-clock start (``time.time()``).
    started: float
    redactor: Redactor
    #: The run's stop handle: an observer that must end the run (a budget
    #: spent) asks for the stop here; the supervisor stops the tree like a
    #: timeout (see coding_genesis._supervision.stop).
    stop: StopHandle | None = None
    #: Publishes an event of the run on the agent's bus (stamped with the run id).
    publish: Callable[[Event], object] | None = None


@runtime_checkable
class RunObserver(Protocol):
    """Watches one run."""

    def event(self, event: Event) -> None:
        """Every event of the run, in order (already redacted)."""

    def stdout(self, chunk: bytes) -> None:
        """Every raw stdout chunk as read, before its events."""

    def flush(self) -> None:
        """The events of the last stdout chunk have all been delivered: write
        out what was buffered (called once per chunk)."""

    def response_fields(self) -> Mapping[str, Any]:
        """Fields this observer adds to the response (e.g. ``transcript``;
        ``warnings`` are appended); called once, before :meth:`finish`."""

    def finish(self, response: Mapping[str, Any]) -> None:
        """The final response (also for a cancelled run, status 130)."""

    # Optional (not part of the protocol check):
    # ``attempt_env() -> Mapping[str, str]`` is called just before each attempt
    # spawns the CLI; the variables returned are added to the CLI's environment
    # (telemetry gives ``TRACEPARENT`` this way).

    # Optional: ``attempt_decoded(tally)``, called once an attempt's stdout is
    # all decoded, with the attempt's RunTally (read it, do not change it):
    # what the decoder folds anyway (tool calls paired with their durations,
    # when each event type was first seen) costs an observer nothing per event.

    # Optional: ``message_usage`` ("live", the default, or "folded"): how an
    # observer that hears usage events wants a CLI's per-message usage (see
    # coding_genesis.backend.Translator).

    # Optional: ``decoded(event)``, every event of the run's attempts as the
    # decoder makes it: unstamped, NOT redacted, before it is published (and
    # whether or not anyone wants it published).  For observers that only count
    # and time (metering): nothing they keep or emit may carry event text; the
    # response they add to is redacted as a whole.  An observer with a
    # ``decoded_handlers`` dict (event type name -> callable) is called through
    # it instead, and only for the types it holds: the hot path's dispatch in
    # one lookup.  The decoder reads that dict once per event type and
    # attempt: a handler that must run only once checks for itself.


#: The events the runner itself produces (not decoded from the CLI's stdout).
LIFECYCLE_KINDS: frozenset[EventKind] = frozenset(
    {EventKind.STATE, EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.ATTEMPT}
)


def _kinds_of(handle: RunObserver) -> frozenset[EventKind] | None:
    """The kinds a run observer hears: its ``event_kinds`` attribute if it
    has one (an observer that keeps the raw stdout needs no decoded events,
    and the hot path then builds none for it), else every kind (None)."""
    kinds = getattr(handle, "event_kinds", None)
    return None if kinds is None else frozenset(kinds)


@runtime_checkable
class Observer(Protocol):
    """Plugs into every run of an agent."""

    def start(self, run: RunInfo) -> RunObserver | None: ...


def _dispatch(handlers: dict[str, Callable[[Event], object]]) -> Callable[[Event], None]:
    """A ``decoded`` callable over an observer's ``decoded_handlers``."""
    handler_of = handlers.get

    def decoded(event: Event) -> None:
        handler = handler_of(event._type)
        if handler is not None:
            handler(event)

    return decoded


class RunObservers:
    """The observers of one run, each guarded so that none can break it."""

    __slots__ = ("_kinds", "_live", "_owners", "decoded", "version")

    def __init__(self, observers: Sequence[Observer], run: RunInfo) -> None:
        self._live: list[RunObserver] = []
        #: Bumped when an observer is dropped (the decoder's routes change).
        self.version = 0
        #: id(step) -> (step, its observer), for the steps handed to a decoder.
        self._owners: dict[int, tuple[Callable[[Event], object], RunObserver]] = {}
        self._kinds: dict[int, frozenset[EventKind] | None] = {}
        for observer in observers:
            try:
                handle = observer.start(run)
            except Exception:
                log.exception(
                    "observer %r failed to start; skipped for run %s", observer, run.run_id
                )
                continue
            if handle is not None:
                self._live.append(handle)
                self._kinds[id(handle)] = _kinds_of(handle)
        #: The decoded-events tap (see RunObserver), or None when no observer has one.
        self.decoded: Callable[[Event], None] | None = self._tap()

    def _tap(self) -> Callable[[Event], None] | None:
        taps: list[tuple[RunObserver, Callable[[Event], object]]] = []
        for handle in self._live:
            handlers = getattr(handle, "decoded_handlers", None)
            if type(handlers) is dict:
                taps.append((handle, _dispatch(handlers)))
            elif callable(getattr(handle, "decoded", None)):
                taps.append((handle, handle.decoded))  # type: ignore[attr-defined]
        if not taps:
            return None
        live = self._live
        if len(taps) == 1:
            ((only, decoded),) = taps
            handlers = getattr(only, "decoded_handlers", None)
            if type(handlers) is dict:
                handler_of = handlers.get

                def tap_handlers(event: Event) -> None:
                    handler = handler_of(event._type)
                    if handler is not None and only in live:  # wanted, not dropped
                        try:
                            handler(event)
                        except Exception:
                            self._drop(only, "decoded")

                return tap_handlers

            def tap_one(event: Event) -> None:
                if only in live:  # not dropped
                    try:
                        decoded(event)
                    except Exception:
                        self._drop(only, "decoded")

            return tap_one

        def tap(event: Event) -> None:
            for handle, decoded in taps:
                if handle in live:
                    try:
                        decoded(event)
                    except Exception:
                        self._drop(handle, "decoded")

        return tap

    def decoded_steps(self, event_type: type[Event]) -> list[Callable[[Event], object]]:
        """The observers' ``decoded`` steps for events of ``event_type`` (the
        decoder's route; a ``decoded_handlers`` dict is read now)."""
        steps: list[Callable[[Event], object]] = []
        for handle in self._live:
            handlers = getattr(handle, "decoded_handlers", None)
            if type(handlers) is dict:
                step = handlers.get(event_type._type)
            else:
                step = getattr(handle, "decoded", None)
            if callable(step):
                self._owners[id(step)] = (step, handle)
                steps.append(step)
        return steps

    @property
    def message_usage(self) -> str:
        """What the run's observers need of a CLI's per-message usage (see
        :class:`~coding_genesis.backend.Translator`): ``live`` if one that hears
        usage wants it live (the default), ``folded`` if they all take it
        folded, ``off`` if none hears usage."""
        modes: set[str] = set()
        for handle in self._live:
            handlers = getattr(handle, "decoded_handlers", None)
            if type(handlers) is dict:
                if "usage" not in handlers:
                    continue
            elif not callable(getattr(handle, "decoded", None)):
                continue
            modes.add(str(getattr(handle, "message_usage", "live")))
        if "live" in modes:
            return "live"
        return "folded" if modes else "off"

    def attempt_decoded(self, tally: RunTally) -> None:
        """An attempt's stream is decoded: observers with an
        ``attempt_decoded`` hook read its tally (what was folded anyway)."""
        for handle in tuple(self._live):
            hook = getattr(handle, "attempt_decoded", None)
            if hook is None:
                continue
            try:
                hook(tally)
            except Exception:
                self._drop(handle, "attempt_decoded")

    def owns(self, step: Callable[[Event], object]) -> bool:
        return id(step) in self._owners

    def step_failed(self, step: Callable[[Event], object]) -> None:
        """A decoded step raised: its observer is dropped for the run."""
        owner = self._owners.get(id(step))
        if owner is not None:
            self._drop(owner[1], "decoded")

    def replayed(self, event: Event) -> None:
        """An event of a replay (no bus): the tap, then :meth:`event`."""
        if self.decoded is not None:
            self.decoded(event)
        self.event(event)

    def __bool__(self) -> bool:
        return bool(self._live)

    @property
    def kinds(self) -> frozenset[EventKind] | None:
        """The event kinds some observer of this run hears (None: all)."""
        heard: set[EventKind] = set()
        for handle in self._live:
            kinds = self._kinds.get(id(handle))
            if kinds is None:
                return None
            heard |= kinds
        return frozenset(heard)

    def _drop(self, handle: RunObserver, what: str) -> None:
        log.exception("observer %r failed in %s; dropped for this run", handle, what)
        if handle in self._live:
            self._live.remove(handle)
            self.version += 1

    def event(self, event: Event) -> None:
        for handle in tuple(self._live):
            kinds = self._kinds.get(id(handle))
            if kinds is not None and event.kind not in kinds:
                continue
            try:
                handle.event(event)
            except Exception:
                self._drop(handle, "event")

    def stdout(self, chunk: bytes) -> None:
        for handle in tuple(self._live):
            try:
                handle.stdout(chunk)
            except Exception:
                self._drop(handle, "stdout")

    def flush(self) -> None:
        for handle in tuple(self._live):
            try:
                handle.flush()
            except Exception:
                self._drop(handle, "flush")

    def attempt_env(self) -> dict[str, str]:
        """An attempt is about to start: the variables observers add to its
        CLI's environment (from those that define ``attempt_env``)."""
        env: dict[str, str] = {}
        for handle in tuple(self._live):
            hook = getattr(handle, "attempt_env", None)
            if hook is None:
                continue
            try:
                env.update(hook())
            except Exception:
                self._drop(handle, "attempt_env")
        return env

    def response_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for handle in tuple(self._live):
            try:
                extra = dict(handle.response_fields())
            except Exception:
                self._drop(handle, "response_fields")
                continue
            warnings = extra.pop("warnings", None)
            if warnings:
                fields.setdefault("warnings", []).extend(warnings)
            fields.update(extra)
        return fields

    def finish(self, response: Mapping[str, Any]) -> None:
        for handle in tuple(self._live):
            try:
                handle.finish(response)
            except Exception:
                self._drop(handle, "finish")
        self._live.clear()


# -- transcripts ------------------------------------------------------------------


class TranscriptObserver:
    """Writes one directory per run under ``base`` (see coding_genesis._observers.transcript)."""

    def __init__(self, base: str | os.PathLike[str], max_raw_bytes: int | None = None) -> None:
        self.base = Path(base)
        self.max_raw_bytes = max_raw_bytes

    def __repr__(self) -> str:
        return f"TranscriptObserver({str(self.base)!r})"

    def start(self, run: RunInfo) -> RunObserver:
        return _TranscriptRun(self.base, run, self.max_raw_bytes)


class _TranscriptRun:
    __slots__ = ("_transcript",)

    #: The raw stdout is the transcript of what the CLI said; events decoded
    #: from it are derived on reading (:meth:`RunRecord.events`), not written.
    event_kinds = LIFECYCLE_KINDS

    def __init__(self, base: Path, run: RunInfo, max_raw_bytes: int | None = None) -> None:
        from coding_genesis import __version__
        from coding_genesis._observers.transcript import (
            DEFAULT_MAX_RAW_BYTES,
            LAYOUT,
            Transcript,
            now_meta,
        )

        transcript = Transcript(
            base,
            run.run_id,
            run.redactor,
            max_raw_bytes=max_raw_bytes or DEFAULT_MAX_RAW_BYTES,
            backend=run.backend,
        )
        self._transcript = transcript
        transcript.write_meta(
            {
                **now_meta(run.started),
                "agent": run.agent,
                "backend": run.backend,
                "cwd": run.cwd,
                "timeout": run.timeout,
                "model": run.model,
                "resume": run.resume,
                "prompt": run.prompt[:100_000],
                "runner_pid": os.getpid(),
                "version": __version__,
                "layout": LAYOUT,
            }
        )

    def event(self, event: Event) -> None:
        transcript = self._transcript
        if event.kind == EventKind.RUN_STARTED:
            transcript.new_attempt()
        transcript.event(event)

    def stdout(self, chunk: bytes) -> None:
        self._transcript.raw(chunk)

    def flush(self) -> None:
        self._transcript.flush()

    def response_fields(self) -> Mapping[str, Any]:
        transcript = self._transcript
        if transcript.ok:
            warning = transcript.warning
            fields: dict[str, Any] = {"transcript": str(transcript.path)}
            if warning:
                fields["warnings"] = [warning]
            return fields
        return {"warnings": [f"transcript not written: {transcript.error}"]}

    def finish(self, response: Mapping[str, Any]) -> None:
        self._transcript.finish(response)


# -- the run log ------------------------------------------------------------------


class RunLogObserver:
    """Appends one line per run to a run log (spec 004 monitoring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunLogObserver({str(self.path)!r})"

    def start(self, run: RunInfo) -> RunObserver:
        return _RunLogRun(self.path, run.redactor)


class _RunLogRun:
    __slots__ = ("_path", "_redactor")

    #: One line per run, from the response: no events needed.
    event_kinds: frozenset[EventKind] = frozenset()

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._path = path
        self._redactor = redactor

    def event(self, event: Event) -> None:
        pass

    def stdout(self, chunk: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def response_fields(self) -> Mapping[str, Any]:
        return {}

    def finish(self, response: Mapping[str, Any]) -> None:
        from coding_genesis._observers.runlog import append_run, run_record

        append_run(self._path, run_record(response, now=time.time(), redactor=self._redactor))
