"""Live sessions: a conversation with one CLI process kept running across turns.

``agent.session(**options)`` opens one (``async with``; ``agent.session_sync()``
for scripts).  Each :meth:`Session.send` is one turn through the same
pipeline as ``run()`` (its states, checks, observers, failure analysis and
answer): it returns the same dict, never raises for a runtime failure, and
is never retried.  :meth:`Session.interrupt` ends the running turn and the
session lives on; :meth:`Session.steer` adds input to it where the CLI can
(codex); :meth:`Session.close` (or leaving the ``with``) ends the session and
stops the CLI's whole process tree.

A session keeps its last results in ``results`` (100 by default, so a long
session's memory stays bounded; ``keep_results=N``, or ``"all"`` for every
one); its ``usage`` and ``cost_usd`` sum every turn.

An agent has at most one open session.  During a turn the agent is BUSY (a
``run()`` or a second ``send()`` is answered 75 at once); between turns it is
READY.  A CLI that dies mid-turn ends that turn (status 1, ``incomplete``) and
closes the session; ``send()`` on a closed session raises
:class:`~coding_genesis.errors.AgentUsageError`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import anyio
import anyio.abc
import anyio.from_thread

from coding_genesis._live.link import LiveLink
from coding_genesis._live.opening import open_link
from coding_genesis._pipeline.attempt import AttemptContext
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._util.renamed import old_names
from coding_genesis.capabilities import session_refusal, steer_refusal
from coding_genesis.control import ControlIntent
from coding_genesis.errors import AgentUsageError
from coding_genesis.events import EventKind
from coding_genesis.options import KEEP_RESULTS
from coding_genesis.request import SEND_OPTION_NAMES, Request, SendOptions
from coding_genesis.result import ContextUsage, RunResponse, RunResult
from coding_genesis.status import NOT_RUN, ErrorCode

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis._pipeline.runner import Runner
    from coding_genesis.events import Event
    from coding_genesis.observer import RunObserver
    from coding_genesis.prompts import Prompt

__all__ = ["Session", "SyncSession", "TurnStream"]

log = logging.getLogger("coding_genesis.session")

#: What a turn the CLI started by itself is asked for (it is never sent: the
#: CLI's own work is the turn; the run log and the transcript show this).
_CLI_PROMPT = "(a turn the CLI started by itself, between the caller's turns)"
#: The options a turn sets that hold for the later turns too, as the CLIs keep
#: them (``output_schema=`` is that turn's alone).
_STICKY = ("model", "permissions")


def _fan_out(calls: list[Callable[[bytes], None]]) -> Callable[[bytes], None] | None:
    """One callable calling each of ``calls`` (None when there are none)."""
    if not calls:
        return None
    if len(calls) == 1:
        return calls[0]

    def each(data: bytes) -> None:
        for call in calls:
            call(data)

    return each


class TurnStream:
    """The events of one streamed turn (``async for``), then its ``result``."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[Any](max_buffer_size=100_000)
        #: The turn's result, once it ended.
        self.result: RunResult | None = None

    def _put(self, event: Any) -> None:
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(event)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        async for event in self._receive:
            yield event


def _whole_only(put: Callable[[Any], None], event: Event) -> None:
    """``stream(partial=False)`` on a session with deltas: the whole messages alone."""
    if event.kind not in (EventKind.TEXT_DELTA, EventKind.THOUGHT_DELTA):
        put(event)


class Session:
    """A live conversation with one CLI process (see the module's docstring)."""

    def __init__(
        self, runner: Runner, request: Request, keep_results: int | Literal["all"] = KEEP_RESULTS
    ) -> None:
        """Made by ``agent.session()``: the agent's runner and the session's
        request, built and checked there."""
        protocol = runner.wiring.backend.control()
        assert protocol is not None  # the capability check asked for one
        keep = keep_results
        self._runner = runner
        self._wiring = runner.wiring
        self._request = request
        self._protocol = protocol
        #: Our key of the session: the marker of its processes, its ledger record.
        self.key = uuid.uuid4().hex
        self._link: LiveLink | None = None
        self._closed = False
        self._closing = anyio.Event()
        self._done = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        #: The sum of the turns' token usage and cost.
        self.usage: dict[str, int] = {}
        self.cost_usd: float | None = None
        #: The last ``keep_results`` results, oldest first (every one with "all").
        self.results: deque[RunResult] = deque(maxlen=keep if type(keep) is int else None)
        #: The observers of the session's own traffic (outside its turns).
        self._watching: list[RunObserver] = []
        #: Every turn's run id, in order (the session's own record lists them).
        self._run_ids: list[str] = []
        #: A turn the CLI started by itself is under way (or wanted).
        self._cli_busy = False
        #: Set when one ends (a fresh event each time); the CLI's turns so
        #: far, and the last one's result.
        self._cli_done = anyio.Event()
        self._cli_count = 0
        self._cli_last: RunResult | None = None
        #: The model and permission level a turn switched to: sticky (as the
        #: CLIs keep them), so each later turn asks them again unless it sets its own.
        self._switched: dict[str, Any] = {}

    # -- state --------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The CLI's session (thread) id, once known: ``resume=`` continues it."""
        return self._link.session_id if self._link is not None else self._request.resume

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def alive(self) -> bool:
        """Open, its CLI running and its protocol unbroken (a CLI that died
        between turns leaves the session open until the next ``send()``)."""
        link = self._link
        return link is not None and link.alive and not self._closed

    @property
    def turns(self) -> int:
        return self._link.turns if self._link is not None else 0

    @property
    def end_hooks(self) -> list[dict[str, Any]]:
        """The records of the ``session_end`` hooks once the session is closed
        (no turn's result carries them; ``RunResult.hooks``' shape)."""
        link = self._link
        ended = link.ended_hooks if link is not None else None
        return [record.to_dict() for record in ended or ()]

    @property
    def can_steer(self) -> bool:
        return self._protocol.can_steer

    @property
    def turn_running(self) -> bool:
        """A turn is under way (the caller's, or one the CLI started by itself)."""
        link = self._link
        return link is not None and link.running

    # -- opening and closing ------------------------------------------------------

    def _claim(self) -> None:
        if self._closed or self._link is not None or self._tg is not None:
            raise AgentUsageError("a session is opened once")
        self._runner.claim(self)

    async def __aenter__(self) -> Session:
        self._claim()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self._host)
        except BaseException as exc:
            self._tg = None
            self._runner.claim(None)
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        try:
            await self.close()
        finally:
            if tg is not None:
                await tg.__aexit__(None, None, None)

    async def _host(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Holds the live process for the session's life (its own task: the
        process's task group is entered and left here)."""
        wiring = self._wiring
        try:
            await wiring.sweep_once()
            ledger = wiring.ledger
            key = self.key

            def spawned(pid: int, argv: list[str]) -> None:
                if ledger is not None:
                    wiring.record(ledger, key, None, pid)

            request = self._request
            watching = self._watching = wiring.session_observers(key, request)
            context = AttemptContext(
                on_spawn=spawned,
                redactor=wiring.redactor,
                totals=wiring.totals,
                on_stdout=_fan_out([w.stdout for w in watching]),
                on_stdin=_fan_out([w.stdin for w in watching]),
                on_stderr=_fan_out([w.stderr for w in watching]),
            )
            async with open_link(
                wiring.backend,
                self._protocol,
                request,
                marker=key,
                stop=StopHandle(),
                context=context,
            ) as link:
                self._link = link
                link.takes_cli_turns = True
                async with anyio.create_task_group() as watch:
                    watch.start_soon(self._cli_turns, link)
                    task_status.started()
                    await self._closing.wait()
                    watch.cancel_scope.cancel()
        finally:
            self._closed = True
            if wiring.ledger is not None:
                wiring.ledger.remove(self.key)
            self._runner.claim(None)
            self._ended()
            self._done.set()

    def _ended(self) -> None:
        """Tell the agent's observers (a session span ends, say)."""
        summary = {
            "session_id": self.session_id,
            "turns": self.turns,
            "usage": dict(self.usage),
            "cost_usd": self.cost_usd,
        }
        for watcher in self._watching:
            try:
                watcher.flush()
                watcher.finish({"session": self.key, **summary, "runs": list(self._run_ids)})
            except Exception:
                log.exception("observer %r failed at the end of session %s", watcher, self.key)
        for observer in self._wiring.observers:
            try:
                observer.session_ended(self.key, summary)
            except Exception:
                log.exception("observer %r failed at the end of session %s", observer, self.key)

    async def wait_ended(self) -> None:
        """Until the session's CLI is gone or broken (the session then takes no
        more turns; at once if it never opened)."""
        link = self._link
        if link is not None:
            await link.ended.wait()

    async def close(self) -> None:
        """End the session: the CLI is told goodbye, given the grace period,
        then its whole process tree is stopped and reaped.  Idempotent."""
        self._closing.set()
        if self._link is not None or self._tg is not None:
            with anyio.CancelScope(shield=True):
                await self._done.wait()
        self._closed = True

    # -- turns --------------------------------------------------------------------

    def _live(self, what: str) -> LiveLink:
        link = self._link
        if link is None or self._closed:
            raise AgentUsageError(
                f"{what} on a closed session"
                if self._closed
                else f"{what} before the session is open (use `async with agent.session()`)"
            )
        return link

    async def send_result(self, prompt: Prompt, **options: Unpack[SendOptions]) -> RunResult:
        """One turn: the typed result (never raises for a runtime failure).
        A turn the CLI started by itself (:meth:`cli_turn`) ends first.
        ``options``: the turn's own (:class:`~coding_genesis.request.SendOptions`;
        one the backend cannot set for a turn answers 64, the session lives on).
        ``model=`` and ``permissions=`` hold for the later turns too, as the
        CLIs keep them; ``output_schema=`` is this turn's alone."""
        unknown = set(options) - SEND_OPTION_NAMES
        if unknown:
            raise TypeError(f"send() got unexpected keyword argument(s) {sorted(unknown)}")
        link = self._live("send()")
        while link.alive and (self._cli_busy or link.between.wanted.is_set()):
            await self._cli_done.wait()
        asked: dict[str, Any] = {**self._switched}
        asked.update((name, value) for name, value in options.items() if value is not None)
        result = await self._runner.run(prompt, asked, session=link)
        if result.error not in NOT_RUN:
            self._record(result)
        if result.error not in NOT_RUN and link.refused_switch is None:
            self._switched.update((name, asked[name]) for name in _STICKY if asked.get(name))
        if not link.alive:
            await self.close()
        return result

    async def cli_turn(self) -> RunResult:
        """Wait for the next turn the CLI starts by itself between turns (a
        background task of claude's that came back, say) and return its
        result.  Such a turn runs whether anyone waits for it or not: it goes
        through the same pipeline as :meth:`send` (its approvals asked, its
        usage metered and budgeted, its transcript and run log written, its
        events published) and is in :attr:`results` with ``trigger="cli"``."""
        self._live("cli_turn()")
        count = self._cli_count
        while self._cli_count == count:
            await self._cli_done.wait()
        assert self._cli_last is not None
        return self._cli_last

    async def _cli_turns(self, link: LiveLink) -> None:
        """Runs each turn the CLI starts by itself, as soon as it wants one
        (between the caller's turns: never two at once)."""
        while link.alive:
            await link.between.wanted.wait()
            self._cli_busy = True
            try:
                while link.alive and link.between.wanted.is_set():
                    result = await self._runner.run(_CLI_PROMPT, session=link, trigger="cli")
                    if result.error == ErrorCode.BUSY:  # the agent's own run (or a turn's tail)
                        await self._runner.wait_idle()
                        continue
                    self._record(result)
            finally:
                self._cli_busy = False
                self._cli_done.set()
                self._cli_done = anyio.Event()
            if not link.alive:
                self._closing.set()

    def _record(self, result: RunResult) -> None:
        self.results.append(result)
        self._run_ids.append(result.run_id)
        self._add_usage(result)
        if result.trigger == "cli":
            self._cli_count += 1
            self._cli_last = result

    async def send(self, prompt: Prompt, **options: Unpack[SendOptions]) -> RunResponse:
        """One turn: the same dict ``run()`` returns, for this turn."""
        return (await self.send_result(prompt, **options)).to_dict()

    @asynccontextmanager
    async def stream(
        self, prompt: Prompt, *, partial: bool | None = None, **options: Unpack[SendOptions]
    ) -> AsyncIterator[TurnStream]:
        """One turn, streamed: ``async with session.stream(p) as turn: async
        for event in turn: ...``; then ``turn.result``.  ``partial``: with
        the text and thinking deltas before each whole message (None: as the
        session was opened; the CLI is told when it starts, so only a session
        opened with ``partial=True`` has them)."""
        self._live("stream()")
        if partial and not self._request.partial:
            raise AgentUsageError(
                "stream(partial=True) needs a session opened with partial=True "
                "(agent.session(partial=True)): the CLI is told to write deltas when it starts"
            )
        turn = TurnStream()
        put = turn._put
        if partial is False and self._request.partial:
            put = functools.partial(_whole_only, put)
        subscription = self._wiring.bus.subscribe(put)
        try:
            async with anyio.create_task_group() as tg:

                async def go() -> None:
                    try:
                        turn.result = await self.send_result(prompt, **options)
                    finally:
                        turn._send.close()

                tg.start_soon(go)
                yield turn
        finally:
            subscription()
            turn._send.close()
            turn._receive.close()

    async def wait_for_turn(self) -> None:
        """Return once a turn is running (at once if one is): the way to
        :meth:`steer` or :meth:`interrupt` a turn another task sent, without
        polling.  Bound it with ``anyio.fail_after`` where the turn may never
        come."""
        link = self._live("wait_for_turn()")
        while not link.running:
            await link.began.wait()

    async def interrupt(self) -> bool:
        """End the running turn (it answers 130 ``interrupted``); the session
        lives on.  False when no turn was running."""
        return await self._live("interrupt()").interrupt()

    async def steer(self, text: str) -> None:
        """Add ``text`` to the running turn (codex)."""
        link = self._live("steer()")
        refused = steer_refusal(self._wiring.backend)
        if refused is not None:
            raise AgentUsageError(refused)
        if not link.running:
            raise AgentUsageError(
                "steer() needs a running turn (use send() to start one; wait_for_turn() "
                "waits for one another task sent)"
            )
        link.steer(text)

    def _add_usage(self, result: RunResult) -> None:
        usage = result.usage
        if isinstance(usage, Mapping):
            for name, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[name] = self.usage.get(name, 0) + value
        if result.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + result.cost_usd

    # -- the session's context: its use now, compaction (issue 41) ---------------

    def _can(self, what: str, method: str) -> LiveLink:
        """The live link, once the backend can do ``what`` (else the capability
        check's words, raised)."""
        link = self._live(method)
        refused = session_refusal(self._wiring.backend, what)
        if refused is not None:
            raise AgentUsageError(refused)
        return link

    async def context_usage(self, timeout: float = 30.0) -> ContextUsage:
        """The context window's use now: as the CLI last reported it (codex,
        ACP) or asked (claude's ``get_context_usage``, answered within
        ``timeout`` seconds).  Raises :class:`~coding_genesis.errors.AgentUsageError`
        where the backend cannot say it, or the CLI did not answer."""
        link = self._can("context_usage", "context_usage()")
        said = self._protocol.context_said()
        if said is not None:
            return said
        answer = await link.call(ControlIntent("context_usage"), timeout)
        if not isinstance(answer.result, ContextUsage):
            raise AgentUsageError(f"context_usage(): {answer.error or 'no answer'}")
        return answer.result

    async def compact(self, timeout: float | None = None) -> RunResult:
        """Compact the CLI's context now: the result of the turn that did it,
        with a ``CompactionEvent`` (claude: a ``/compact`` turn; codex: its
        compaction, a turn it begins by itself once asked, ``trigger="cli"``).
        ``timeout``: how long codex may take to begin it (the session's
        timeout by default).  Raises where the backend cannot compact, or the
        CLI refused."""
        link = self._can("compact", "compact()")
        prompt = self._protocol.compact_prompt
        if prompt is not None:
            return await self.send_result(prompt)
        while link.alive and (self._cli_busy or link.between.wanted.is_set()):
            await self._cli_done.wait()
        count = self._cli_count
        wait = self._request.timeout if timeout is None else timeout
        answer = await link.call(ControlIntent("compact"), wait or 60.0)
        if answer.error is not None:
            raise AgentUsageError(f"compact(): {answer.error}")
        with anyio.move_on_after(wait or 60.0):
            async with anyio.create_task_group() as race:

                async def gone() -> None:
                    await link.ended.wait()
                    race.cancel_scope.cancel()

                race.start_soon(gone)
                while self._cli_count == count:
                    await self._cli_done.wait()
                race.cancel_scope.cancel()
        if self._cli_count == count or self._cli_last is None:
            raise AgentUsageError("compact(): the CLI began no compaction turn")
        return self._cli_last

    # -- forks (issue 41) ---------------------------------------------------------

    def fork(self, at: str | None = None) -> Session:
        """A new session from this one's history, not yet entered (``async
        with session.fork() as other``): a new CLI process and session id, this
        session's options, on a runner of its own (both may run at once); this
        session goes on unchanged.  ``at``: a turn's ``RunResult.turn_id``: the
        fork's history ends at that turn.  Raises where the backend cannot fork
        (the capability check's words) or before the CLI named its session."""
        refused = session_refusal(self._wiring.backend, "fork")
        if refused is not None:
            raise AgentUsageError(refused)
        sid = self.session_id
        if sid is None:
            raise AgentUsageError("fork() needs the session's id: the CLI names it at its opening")
        runner = self._runner.sibling()
        options = {"resume": sid, "fork": True, "resume_at": at}
        checked = runner.build("", options, mode="session")
        request = dataclasses.replace(
            self._request, resume=sid, fork=True, resume_at=checked.resume_at
        )
        keep = self.results.maxlen
        return Session(runner, request, "all" if keep is None else keep)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._link else "new")
        return f"Session(backend={self._wiring.backend.name!r}, key={self.key!r}, {state})"


class SyncTurns:
    """The turns of a :class:`Session`, called from code without an event loop
    through a blocking portal: what :class:`SyncSession` and a pool's sync
    session share."""

    session: Session
    _portal: anyio.from_thread.BlockingPortal | None

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        portal = self._portal
        if portal is None:
            raise AgentUsageError("use the sync session inside `with agent.session_sync() as s`")
        return portal.call(functools.partial(fn, *args, **kwargs))

    def send(self, prompt: Prompt, **options: Unpack[SendOptions]) -> RunResponse:
        return cast("RunResponse", self._call(self.session.send, prompt, **options))

    def send_result(self, prompt: Prompt, **options: Unpack[SendOptions]) -> RunResult:
        return cast("RunResult", self._call(self.session.send_result, prompt, **options))

    def interrupt(self) -> bool:
        """From another thread while :meth:`send` blocks."""
        return bool(self._call(self.session.interrupt))

    def steer(self, text: str) -> None:
        self._call(self.session.steer, text)

    def context_usage(self, timeout: float = 30.0) -> ContextUsage:
        return cast("ContextUsage", self._call(self.session.context_usage, timeout))

    def compact(self, timeout: float | None = None) -> RunResult:
        return cast("RunResult", self._call(self.session.compact, timeout))

    @property
    def session_id(self) -> str | None:
        return self.session.session_id


class SyncSession(SyncTurns):
    """:class:`Session` for code without an event loop: ``with agent.session_sync() as s``."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None

    def __enter__(self) -> SyncSession:
        self.session._claim()
        cm = anyio.from_thread.start_blocking_portal()
        portal = cm.__enter__()
        self._portal_cm, self._portal = cm, portal
        try:
            portal.start_task(self.session._host)
        except BaseException:
            cm.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        cm, self._portal_cm = self._portal_cm, None
        if cm is None:
            return
        try:
            self._call(self.session.close)
        finally:
            self._portal = None
            cm.__exit__(None, None, None)

    @property
    def closed(self) -> bool:
        return self.session.closed


__getattr__ = old_names(
    __name__,
    {
        "SessionOwner": (
            "a session is given its agent's runner, never the agent",
            lambda: _SessionOwner,
        )
    },
)


class _SessionOwner(Protocol):
    """0.1's name of what a session needed of its agent (unused)."""

    @property
    def name(self) -> str: ...
