"""The observers of one run behind one object: each guarded so that none can
break the run, each read once, when the run starts.

Reading once: which optional methods of :class:`~coding_genesis.observer.RunObserver`
a run observer's class overrides (``type(obs).decoded is not
RunObserver.decoded``), its ``event_kinds``, ``decoded_handlers`` and
``message_usage``.  The decoder's routes then bind the handlers found here once
per event type (``coding_genesis._pipeline.routes``): no question is asked
per event.

Adapters: an observer that does not subclass the base classes but has their
members (the protocol of 0.1.0) is wrapped here, once: :func:`adapt_observer`
when it is registered with an agent, :func:`adapt_run_observer` when its run
starts.  They are the only place that looks an observer's members up by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, cast

from coding_genesis.backend import MessageUsage
from coding_genesis.events import Event, EventKind
from coding_genesis.observer import AttemptTally, Observer, RunInfo, RunObserver

__all__ = ["RunObservers", "adapt_observer", "adapt_run_observer"]

log = logging.getLogger("coding_genesis._pipeline.fanout")

Handler = Callable[[Event], object]


# -- adapters: observers that do not subclass the base classes ------------------------


class _AdaptedObserver(Observer):
    """An observer with ``start`` (and maybe ``replays``) that is no :class:`Observer`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._start: Callable[[RunInfo], Any] = inner.start
        self.replays = bool(getattr(inner, "replays", False))

    def __repr__(self) -> str:
        return repr(self.inner)

    def start(self, run: RunInfo) -> RunObserver | None:
        return cast("RunObserver | None", self._start(run))  # adapted by the fan-out


def adapt_observer(observer: Any) -> Observer:
    """``observer`` itself if it is an :class:`Observer`, else the adapter
    that makes one of it (called once per observer an agent is given)."""
    return observer if isinstance(observer, Observer) else _AdaptedObserver(observer)


class _AdaptedRun(RunObserver):
    """A run observer that is no :class:`RunObserver`: its members, read once.

    The optional methods it has are forwarded by a subclass made per set of
    them (:func:`_adapter_class`), so that the fan-out's look at which methods
    a class overrides also holds for the adapter.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._event: Callable[[Event], object] = inner.event
        self._stdout: Callable[[bytes], object] = inner.stdout
        self._flush: Callable[[], object] = inner.flush
        self._response_fields: Callable[[], Mapping[str, Any]] = inner.response_fields
        self._finish: Callable[[Mapping[str, Any]], object] = inner.finish
        self._decoded: Callable[[Event], object] | None = getattr(inner, "decoded", None)
        self._attempt_decoded: Callable[[AttemptTally], object] | None = getattr(
            inner, "attempt_decoded", None
        )
        self._attempt_env: Callable[[], Mapping[str, str]] | None = getattr(
            inner, "attempt_env", None
        )
        kinds = getattr(inner, "event_kinds", None)
        self.event_kinds = None if kinds is None else frozenset(kinds)
        handlers = getattr(inner, "decoded_handlers", None)
        self.decoded_handlers = handlers if type(handlers) is dict else None
        self.message_usage = str(getattr(inner, "message_usage", "live"))

    def __repr__(self) -> str:
        return repr(self.inner)

    def event(self, event: Event) -> None:
        self._event(event)

    def stdout(self, chunk: bytes) -> None:
        self._stdout(chunk)

    def flush(self) -> None:
        self._flush()

    def response_fields(self) -> Mapping[str, Any]:
        return self._response_fields()

    def finish(self, response: Mapping[str, Any]) -> None:
        self._finish(response)


def _forward_decoded(self: _AdaptedRun, event: Event) -> None:
    cast(Handler, self._decoded)(event)


def _forward_attempt_decoded(self: _AdaptedRun, tally: AttemptTally) -> None:
    cast(Callable[[AttemptTally], object], self._attempt_decoded)(tally)


def _forward_attempt_env(self: _AdaptedRun) -> Mapping[str, str]:
    return cast(Callable[[], Mapping[str, str]], self._attempt_env)()


_FORWARDERS: dict[str, Callable[..., Any]] = {
    "decoded": _forward_decoded,
    "attempt_decoded": _forward_attempt_decoded,
    "attempt_env": _forward_attempt_env,
}
_ADAPTERS: dict[frozenset[str], type[_AdaptedRun]] = {}


def _adapter_class(overrides: frozenset[str]) -> type[_AdaptedRun]:
    """The adapter class that overrides exactly ``overrides`` (made once per set)."""
    cls = _ADAPTERS.get(overrides)
    if cls is None:
        name = "_AdaptedRun_" + "_".join(sorted(overrides)) if overrides else "_AdaptedRunBare"
        cls = cast(
            type[_AdaptedRun],
            type(name, (_AdaptedRun,), {method: _FORWARDERS[method] for method in overrides}),
        )
        _ADAPTERS[overrides] = cls
    return cls


def adapt_run_observer(handle: Any) -> RunObserver:
    """``handle`` itself if it is a :class:`RunObserver`, else the adapter
    that makes one of it (called once per run observer, when its run starts)."""
    if isinstance(handle, RunObserver):
        return handle
    overrides = frozenset(name for name in _FORWARDERS if callable(getattr(handle, name, None)))
    return _adapter_class(overrides)(handle)


# -- the fan-out ------------------------------------------------------------------------


class _Overrides(NamedTuple):
    """What a run observer takes part in, read once when its run starts."""

    kinds: frozenset[EventKind] | None
    #: Its decoded-events handlers by event type name, or None.
    handlers: Mapping[str, Handler] | None
    #: Its ``decoded`` method if it overrides it (and has no handlers), else None.
    decoded: Handler | None
    attempt_decoded: Callable[[AttemptTally], object] | None
    attempt_env: Callable[[], Mapping[str, str]] | None


def _overrides_of(handle: RunObserver) -> _Overrides:
    cls = type(handle)
    kinds = handle.event_kinds
    handlers = handle.decoded_handlers
    return _Overrides(
        kinds=None if kinds is None else frozenset(kinds),
        handlers=handlers,
        decoded=(
            handle.decoded if handlers is None and cls.decoded is not RunObserver.decoded else None
        ),
        attempt_decoded=(
            handle.attempt_decoded
            if cls.attempt_decoded is not RunObserver.attempt_decoded
            else None
        ),
        attempt_env=(
            handle.attempt_env if cls.attempt_env is not RunObserver.attempt_env else None
        ),
    )


def _dispatch(handlers: Mapping[str, Handler]) -> Callable[[Event], None]:
    """A ``decoded`` callable over an observer's ``decoded_handlers``."""
    handler_of = handlers.get

    def decoded(event: Event) -> None:
        handler = handler_of(event._type)
        if handler is not None:
            handler(event)

    return decoded


class RunObservers:
    """The observers of one run, each guarded so that none can break it."""

    __slots__ = ("_kinds", "_live", "_overrides", "_owners", "decoded", "version")

    def __init__(self, observers: Sequence[Observer], run: RunInfo) -> None:
        self._live: list[RunObserver] = []
        #: Bumped when an observer is dropped (the decoder's routes change).
        self.version = 0
        #: id(handler) -> (handler, its observer), for the handlers handed to a decoder.
        self._owners: dict[int, tuple[Handler, RunObserver]] = {}
        self._overrides: dict[int, _Overrides] = {}
        #: id(handle) -> the kinds it hears (None: all), read per published event.
        self._kinds: dict[int, frozenset[EventKind] | None] = {}
        for observer in observers:
            try:
                handle = observer.start(run)
                if handle is None:
                    continue
                handle = adapt_run_observer(handle)
                overrides = _overrides_of(handle)
            except Exception:
                log.exception(
                    "observer %r failed to start; skipped for run %s", observer, run.run_id
                )
                continue
            self._live.append(handle)
            self._overrides[id(handle)] = overrides
            self._kinds[id(handle)] = overrides.kinds
        #: Every decoded event to the observers that hear them (see RunObserver), or None.
        self.decoded: Callable[[Event], None] | None = self._decoded_fanout()

    def _decoded_fanout(self) -> Callable[[Event], None] | None:  # noqa: C901
        hearing: list[tuple[RunObserver, Handler]] = []
        for handle in self._live:
            overrides = self._overrides[id(handle)]
            if overrides.handlers is not None:
                hearing.append((handle, _dispatch(overrides.handlers)))
            elif overrides.decoded is not None:
                hearing.append((handle, overrides.decoded))
        if not hearing:
            return None
        live = self._live
        if len(hearing) == 1:
            ((only, decoded),) = hearing
            handlers = self._overrides[id(only)].handlers
            if handlers is not None:
                handler_of = handlers.get

                def decoded_by_handlers(event: Event) -> None:
                    handler = handler_of(event._type)
                    if handler is not None and only in live:  # wanted, not dropped
                        try:
                            handler(event)
                        except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                            self._drop(only, "decoded")

                return decoded_by_handlers

            def decoded_one(event: Event) -> None:
                if only in live:  # not dropped
                    try:
                        decoded(event)
                    except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                        self._drop(only, "decoded")

            return decoded_one

        def decoded_all(event: Event) -> None:
            for handle, decoded in hearing:
                if handle in live:
                    try:
                        decoded(event)
                    except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                        self._drop(handle, "decoded")

        return decoded_all

    def route_handlers(self, event_type: type[Event]) -> list[Handler]:
        """The observers' ``decoded`` handlers for events of ``event_type`` (the
        decoder's route; a ``decoded_handlers`` dict is read now)."""
        handlers: list[Handler] = []
        for handle in self._live:
            overrides = self._overrides[id(handle)]
            if overrides.handlers is not None:
                handler = overrides.handlers.get(event_type._type)
            else:
                handler = overrides.decoded
            if handler is not None:
                self._owners[id(handler)] = (handler, handle)
                handlers.append(handler)
        return handlers

    @property
    def message_usage(self) -> MessageUsage:
        """What the run's observers need of a CLI's per-message usage (see
        :class:`~coding_genesis.events.Translator`): ``live`` if one that hears
        usage wants it live (the default), ``folded`` if they all take it
        folded, ``off`` if none hears usage."""
        modes: set[str] = set()
        for handle in self._live:
            overrides = self._overrides[id(handle)]
            if overrides.handlers is not None:
                if "usage" not in overrides.handlers:
                    continue
            elif overrides.decoded is None:
                continue
            modes.add(str(handle.message_usage))
        if "live" in modes:
            return "live"
        return "folded" if modes else "off"

    def attempt_decoded(self, tally: AttemptTally) -> None:
        """An attempt's stream is decoded: observers with an
        ``attempt_decoded`` method read its tally (what was folded anyway)."""
        for handle in tuple(self._live):
            method = self._overrides[id(handle)].attempt_decoded
            if method is None:
                continue
            try:
                method(tally)
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "attempt_decoded")

    def owns(self, handler: Handler) -> bool:
        return id(handler) in self._owners

    def handler_failed(self, handler: Handler) -> None:
        """A decoded handler raised: its observer is dropped for the run."""
        owner = self._owners.get(id(handler))
        if owner is not None:
            self._drop(owner[1], "decoded")

    def replayed(self, event: Event) -> None:
        """An event of a replay (no bus): the decoded_all, then :meth:`event`."""
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
            kinds = self._overrides[id(handle)].kinds
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
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "event")

    def stdout(self, chunk: bytes) -> None:
        for handle in tuple(self._live):
            try:
                handle.stdout(chunk)
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "stdout")

    def flush(self) -> None:
        for handle in tuple(self._live):
            try:
                handle.flush()
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "flush")

    def stdin(self, data: bytes) -> None:
        self._each("stdin", data)

    def stderr(self, chunk: bytes) -> None:
        self._each("stderr", chunk)

    def _each(self, name: str, data: bytes) -> None:
        """Bytes to every live observer's method ``name`` (off the stdout hot path)."""
        for handle in tuple(self._live):
            try:
                getattr(handle, name)(data)
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, name)

    def attempt_env(self) -> dict[str, str]:
        """An attempt is about to start: the variables observers add to its
        CLI's environment (from those that define ``attempt_env``)."""
        env: dict[str, str] = {}
        for handle in tuple(self._live):
            method = self._overrides[id(handle)].attempt_env
            if method is None:
                continue
            try:
                env.update(method())
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "attempt_env")
        return env

    def response_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for handle in tuple(self._live):
            try:
                extra = dict(handle.response_fields())
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
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
            except Exception:  # noqa: BLE001  (a failing observer is dropped, the run goes on)
                self._drop(handle, "finish")
        self._live.clear()
