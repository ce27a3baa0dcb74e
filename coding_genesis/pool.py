"""Warm sessions: live sessions started before prompts arrive, so a prompt's
first event does not wait for the CLI's start-up.

``async with SessionPool("claude", size=2, max_idle=300) as pool:`` builds
``size`` agents from one configuration (an agent holds at most one open
session) and opens a session on each, in the background.  ``async with
pool.session() as s:`` hands out a warm one for one conversation (any number
of turns); leaving the ``with`` closes it, and the pool opens the next one in
the background.  A session is never handed to a second caller: nothing of one
conversation reaches another.

When no session is warm, a caller waits (at most ``wait`` seconds) for one
the pool is already opening, which is ready sooner than a fresh start; when
none is being opened (every session lent, or openings failing), or the wait
runs out, it gets a fresh session opened for it (counted in ``stats().fresh``).
A warm session idle past ``max_idle``, or whose CLI died, is closed and
replaced.  Closing the pool closes every session, lent ones included, and
stops each CLI's whole process tree.

:func:`~coding_genesis.batch.run_many` draws from a pool (``pool=``): each
request is one turn of a warm session.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import anyio.abc
import anyio.from_thread

from coding_genesis._util.renamed import renamed, warn_renamed
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.batch import (
    BatchItem,
    EventCallback,
    RunSpec,
    coerce_request,
    failure_result,
    run_many,
)
from coding_genesis.config import AgentConfig, required_seconds, seconds
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.result import RunResponse, RunResult
from coding_genesis.session import SyncTurns

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis.backend import Backend
    from coding_genesis.config import AgentSettings
    from coding_genesis.prompts import Prompt
    from coding_genesis.run_events import RunEvent
    from coding_genesis.session import Session

__all__ = ["PoolExecutor", "PoolStats", "SessionPool", "SyncPooledSession", "SyncSessionPool"]

log = logging.getLogger("coding_genesis.pool")

#: Pause after a failed opening, doubled per failure in a row, capped.
_BACKOFF_S = (0.5, 30.0)

_State = Literal["opening", "warm", "lent", "closing", "waiting", "closed"]


@dataclasses.dataclass(frozen=True, slots=True)
class PoolStats:
    """A pool's counts: now (``warm``, ``opening``, ``in_use``) and since it
    started (the rest)."""

    size: int
    #: Sessions ready to hand out.
    warm: int
    #: Refills under way (a session being opened, or the last one closed first).
    opening: int
    #: Sessions lent (fresh ones included).
    in_use: int
    #: Sessions opened, warm or fresh, failed openings included.
    opened: int
    #: Sessions handed out, warm or fresh.
    served: int
    #: ... of which were opened for their caller, none being warm.
    fresh: int
    #: Warm sessions closed unserved and replaced: idle past ``max_idle``
    #: (``expired``) or their CLI died (``died``).
    replaced: int
    expired: int
    died: int
    #: Openings whose CLI could not start or broke its opening handshake.
    failed: int

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(eq=False, slots=True)
class _Slot:
    """One agent and its current session."""

    agent: CodingGenesisAgent
    #: Opened for one caller (not warm): lent at once, never refilled.
    fresh: bool = False
    state: _State = "opening"
    session: Session | None = None
    #: When the session became warm (monotonic seconds).
    since: float = 0.0
    #: Set when the lent session is released (or the pool closes).
    released: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    #: Set to wake the slot's task (lent, released, the pool closing).
    wake: anyio.Event = dataclasses.field(default_factory=anyio.Event)


class SessionPool:
    """Warm live sessions of one backend (see the module's docstring).

    ``backend``, ``config`` and the keywords are those of
    :class:`~coding_genesis.agent.CodingGenesisAgent`: every session has its
    agent's settings (``timeout`` per turn, ``cwd``, ``model``,
    ``permissions``, ``approver``...).  ``size``: sessions kept warm;
    ``max_idle``: a warm session unused that long is replaced; ``wait``:
    how long a caller waits for a session being opened before it gets a fresh
    one.  Raises :class:`~coding_genesis.errors.ConfigError` for a bad
    setting, :class:`~coding_genesis.errors.AgentUsageError` for a backend
    without a two-way protocol or a setting a session refuses (isolation).
    """

    def __init__(
        self,
        backend: str | Backend | None = None,
        *,
        size: int,
        max_idle: float | None = None,
        wait: float = 10.0,
        config: AgentConfig | None = None,
        **settings: Unpack[AgentSettings],
    ) -> None:
        old = renamed(
            cast("dict[str, Any]", settings),
            {"max_idle_s": "max_idle", "wait_s": "wait"},
            "SessionPool",
        )
        max_idle = old.get("max_idle", max_idle)
        wait = old.get("wait", wait)
        if max_idle is None:
            raise TypeError("SessionPool() missing the keyword argument 'max_idle'")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"size must be a positive integer, got {size!r}")
        self.size = size
        self.max_idle = required_seconds("max_idle", max_idle)
        self.wait = float(seconds("wait", wait, allow_zero=True) or 0.0)
        first = CodingGenesisAgent(backend, config=config, **settings)
        first.session()  # refuses a backend or a setting a session cannot have; opens nothing
        #: The agents' configuration (each session's settings).
        self.config = first.config
        agents = [first, *(CodingGenesisAgent(config=self.config) for _ in range(size - 1))]
        self._slots = [_Slot(agent) for agent in agents]
        self._fresh: set[_Slot] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._closing = anyio.Event()
        self._change = anyio.Event()
        self._counts = dict.fromkeys(("opened", "served", "fresh", "expired", "died", "failed"), 0)

    @property
    def max_idle_s(self) -> float:
        """0.1's name of :attr:`max_idle` (deprecated)."""
        warn_renamed("SessionPool", "max_idle_s", "max_idle")
        return self.max_idle

    @property
    def wait_s(self) -> float:
        """0.1's name of :attr:`wait` (deprecated)."""
        warn_renamed("SessionPool", "wait_s", "wait")
        return self.wait

    @property
    def backend(self) -> Backend:
        return self._slots[0].agent.backend

    @property
    def serving(self) -> bool:
        """Entered and not closed: :meth:`session` hands out sessions."""
        return self._tg is not None and not self._closing.is_set()

    def stats(self) -> PoolStats:
        states = [slot.state for slot in self._slots]
        c = self._counts
        return PoolStats(
            size=self.size,
            warm=states.count("warm"),
            opening=states.count("opening") + states.count("closing"),
            in_use=states.count("lent") + len(self._fresh),
            opened=c["opened"],
            served=c["served"],
            fresh=c["fresh"],
            replaced=c["expired"] + c["died"],
            expired=c["expired"],
            died=c["died"],
            failed=c["failed"],
        )

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"SessionPool(backend={self.backend.name!r}, size={self.size}, warm={s.warm}, "
            f"in_use={s.in_use}, served={s.served})"
        )

    # -- opening and closing ------------------------------------------------------

    async def __aenter__(self) -> SessionPool:
        if self._entered:
            raise AgentUsageError("a session pool is entered once")
        self._entered = True
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        for slot in self._slots:
            tg.start_soon(self._keep, slot)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        try:
            await self.close()
        except BaseException as failed:
            if tg is not None:
                await tg.__aexit__(type(failed), failed, failed.__traceback__)
            raise
        if tg is None:
            return None
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            await tg.__aexit__(None, None, None)
            return None  # the body's error goes on as it is
        # A cancellation goes to the task group: one a failed slot caused is its to absorb.
        return await tg.__aexit__(exc_type, exc, tb)

    async def close(self) -> None:
        """Close every session (lent ones too), open no more, and return once
        each CLI's whole tree is stopped.  Idempotent."""
        self._closing.set()
        for slot in (*self._slots, *self._fresh):
            slot.released.set()
            slot.wake.set()
        self._changed()
        if self._tg is None:
            return
        with anyio.CancelScope(shield=True):
            while any(slot.state != "closed" for slot in (*self._slots, *self._fresh)):
                await self._change.wait()

    def _changed(self) -> None:
        self._change.set()
        self._change = anyio.Event()

    # -- handing out --------------------------------------------------------------

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        """A session for one conversation (``async with``): a warm one, or
        one opened for the caller (see the module's docstring); closed when
        the ``with`` is left (its CLI's tree stopped), then replaced in the
        background."""
        slot = await self._take()
        session = slot.session
        assert session is not None
        try:
            yield session
        finally:
            slot.released.set()
            slot.wake.set()
            await session.close()

    async def run_result(
        self,
        prompt: Prompt,
        *,
        timeout: float | None = None,
        on_event: Callable[[RunEvent], object] | None = None,
    ) -> RunResult:
        """One prompt as the one turn of a session (``on_event``: its events)."""
        async with self.session() as session:
            slot = next(s for s in (*self._slots, *self._fresh) if s.session is session)
            unsubscribe = slot.agent.subscribe(on_event) if on_event is not None else None
            try:
                return await session.send_result(prompt, timeout=timeout)
            finally:
                if unsubscribe is not None:
                    unsubscribe()

    async def run(self, prompt: Prompt, *, timeout: float | None = None) -> RunResponse:
        """:meth:`run_result` as the dict ``run()`` returns."""
        return (await self.run_result(prompt, timeout=timeout)).to_dict()

    async def wait_warm(self, count: int | None = None, *, timeout: float | None = None) -> bool:
        """Wait until ``count`` sessions (default: ``size``) are warm; False
        if ``timeout`` passed first or the pool closed."""
        want = self.size if count is None else count
        with anyio.move_on_after(timeout):
            while self.stats().warm < want:
                if self._closing.is_set():
                    return False
                await self._change.wait()
            return True
        return False

    def executor(self) -> PoolExecutor:
        """What ``run_many(pool=self)`` runs each request with: one turn of a
        warm session each."""
        return PoolExecutor(self)

    def _check_serving(self) -> None:
        if not self.serving:
            raise AgentUsageError(
                "the session pool is closed"
                if self._closing.is_set()
                else "use the pool inside `async with SessionPool(...) as pool`"
            )

    async def _take(self) -> _Slot:
        self._check_serving()
        deadline = time.monotonic() + self.wait
        while True:
            for slot in self._slots:
                if slot.state == "warm" and slot.session is not None and slot.session.alive:
                    slot.state = "lent"
                    slot.wake.set()
                    self._counts["served"] += 1
                    self._changed()
                    return slot
            left = deadline - time.monotonic()
            refilling = any(slot.state in ("opening", "closing") for slot in self._slots)
            if left <= 0 or not refilling:
                return await self._open_fresh()
            with anyio.move_on_after(left):
                await self._change.wait()
            self._check_serving()

    async def _open_fresh(self) -> _Slot:
        tg = self._tg
        assert tg is not None
        slot = _Slot(CodingGenesisAgent(config=self.config), fresh=True)
        self._fresh.add(slot)
        try:
            await tg.start(self._keep, slot)
        except BaseException:
            slot.released.set()
            raise
        self._counts["served"] += 1
        self._counts["fresh"] += 1
        return slot

    # -- each slot's life ---------------------------------------------------------

    async def _keep(
        self, slot: _Slot, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """One slot's sessions for the pool's life: open one, keep it warm
        until it is lent and released, idles out or dies, close it, open the
        next.  A fresh slot holds one session, lent as soon as it is open."""
        failures = 0
        try:
            # A fresh slot opens its one session even if the pool closes
            # meanwhile (its caller waits in start(); the close ends it at once).
            while slot.fresh or not self._closing.is_set():
                try:
                    failed = await self._one_session(slot, task_status)
                except Exception:
                    if slot.fresh and slot.state == "opening":
                        raise  # to its caller, waiting in start()
                    log.exception("%s: a pooled session failed", self.backend.name)
                    failed = True
                if slot.fresh:
                    return
                failures = failures + 1 if failed else 0
                if failed:
                    slot.state = "waiting"
                    self._changed()
                    pause = min(_BACKOFF_S[0] * 2 ** (failures - 1), _BACKOFF_S[1])
                    with anyio.move_on_after(pause):
                        await self._closing.wait()
        finally:
            slot.session = None
            slot.state = "closed"
            self._fresh.discard(slot)
            self._changed()

    async def _one_session(self, slot: _Slot, task_status: anyio.abc.TaskStatus[None]) -> bool:
        """Open, hold and close one session of ``slot``; True if it failed to open."""
        slot.state = "opening"
        self._changed()
        failed = False
        try:
            async with slot.agent.session() as session:
                self._counts["opened"] += 1
                slot.session = session
                if not session.alive:
                    failed = True
                    self._counts["failed"] += 1
                    log.warning("%s: a pooled session failed to open", self.backend.name)
                if slot.fresh:
                    slot.state = "lent"
                    task_status.started()
                    await slot.released.wait()
                elif not failed:
                    ending = await self._hold(slot)
                    if ending in ("expired", "died"):
                        self._counts[ending] += 1
                        log.debug("%s: a warm session %s; replaced", self.backend.name, ending)
                slot.state = "closing"
                self._changed()
        finally:
            slot.session = None
        return failed

    async def _hold(self, slot: _Slot) -> str:
        """Keep ``slot``'s session warm; what ended it: ``served``, ``expired``,
        ``died`` or ``closed``."""
        slot.released = anyio.Event()
        slot.since = time.monotonic()
        slot.state = "warm"
        self._changed()
        session = slot.session
        assert session is not None
        async with anyio.create_task_group() as watch:
            watch.start_soon(_wake_at_end, slot, session)
            ending = await self._warm_until_done(slot, session)
            watch.cancel_scope.cancel()
        return ending

    async def _warm_until_done(self, slot: _Slot, session: Session) -> str:
        while True:
            slot.wake = anyio.Event()
            if slot.state == "lent":
                await slot.released.wait()
                return "served"
            if self._closing.is_set():
                return "closed"
            if not session.alive:
                return "died"
            left = slot.since + self.max_idle - time.monotonic()
            if left <= 0:
                return "expired"
            with anyio.move_on_after(left):  # the only timer: max_idle
                await slot.wake.wait()


async def _wake_at_end(slot: _Slot, session: Session) -> None:
    """Wake ``slot``'s task when its session's CLI dies or breaks (no poll)."""
    await session.wait_ended()
    slot.wake.set()


class PoolExecutor:
    """Runs each request as the one turn of a warm session of ``pool``
    (``run_many(pool=...)``).  A request takes the pool's settings: one that
    names another backend, sets a setting otherwise (``timeout`` apart: it
    bounds the turn) or asks to ``resume`` is answered with a failure."""

    def __init__(self, pool: SessionPool) -> None:
        self.pool = pool

    async def run_one(
        self, index: int, request: BatchItem, emit: EventCallback | None
    ) -> dict[str, Any]:
        spec = coerce_request(index, request)
        if isinstance(spec, dict):
            return spec
        settings = spec.agent_kwargs()
        problem = self._mismatch(spec, settings)
        if problem is not None:
            return failure_result(index, problem, backend=spec.backend)

        def tagged(event: Any) -> None:
            if emit is not None:
                emit({**event.to_dict(), "index": index})

        result = await self.pool.run_result(
            spec.prompt, timeout=settings.get("timeout"), on_event=tagged if emit else None
        )
        answer: dict[str, Any] = dict(result.to_dict())
        answer["index"] = index
        return answer

    def _mismatch(self, spec: RunSpec, settings: Mapping[str, Any]) -> str | None:
        pool = self.pool.config
        name = self.pool.backend.name
        if spec.backend != name:
            return (
                f"this batch runs on a pool of {name!r} sessions: backend {spec.backend!r} cannot"
            )
        if spec.resume is not None:
            return "a pooled request starts a new conversation: resume cannot apply"
        given = {k: v for k, v in settings.items() if k != "timeout"}
        try:
            wanted = pool.replace(**given)
        except (ConfigError, TypeError) as exc:
            return f"invalid request: {exc}"
        differ = sorted(k for k in given if getattr(wanted, k) != getattr(pool, k))
        if differ:
            return (
                f"a pooled request takes the pool's settings; it sets {', '.join(differ)} otherwise"
            )
        return None


class SyncPooledSession(SyncTurns):
    """A pooled :class:`~coding_genesis.session.Session` for code without an
    event loop (from :meth:`SyncSessionPool.session`)."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, session: Session) -> None:
        self.session = session
        self._portal = portal

    @property
    def key(self) -> str:
        return self.session.key


class SyncSessionPool:
    """:class:`SessionPool` (the same parameters) for code without an event
    loop: ``with SyncSessionPool(...) as pool: with pool.session() as s:
    s.send(...)``.  The pool's sessions live on an event loop in a thread of
    their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.pool = SessionPool(*args, **kwargs)
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._pool_cm: AbstractContextManager[SessionPool] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None

    def __enter__(self) -> SyncSessionPool:
        cm = anyio.from_thread.start_blocking_portal()
        portal = cm.__enter__()
        try:
            pool_cm = portal.wrap_async_context_manager(self.pool)
            pool_cm.__enter__()
        except BaseException:
            cm.__exit__(None, None, None)
            raise
        self._portal_cm, self._pool_cm, self._portal = cm, pool_cm, portal
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every session and stop the pool's thread.  Idempotent."""
        cm, pool_cm = self._portal_cm, self._pool_cm
        self._portal_cm = self._pool_cm = self._portal = None
        if cm is None or pool_cm is None:
            return
        try:
            pool_cm.__exit__(None, None, None)
        finally:
            cm.__exit__(None, None, None)

    def _live_portal(self) -> anyio.from_thread.BlockingPortal:
        if self._portal is None:
            raise AgentUsageError("use the sync pool inside `with SyncSessionPool(...) as pool`")
        return self._portal

    @contextmanager
    def session(self) -> Iterator[SyncPooledSession]:
        """:meth:`SessionPool.session`, blocking."""
        portal = self._live_portal()
        with portal.wrap_async_context_manager(self.pool.session()) as session:
            yield SyncPooledSession(portal, session)

    def run(self, prompt: Prompt, *, timeout: float | None = None) -> RunResponse:
        """:meth:`SessionPool.run`, blocking."""
        portal = self._live_portal()
        return cast(
            "RunResponse", portal.call(functools.partial(self.pool.run, prompt, timeout=timeout))
        )

    def run_many(self, requests: Iterable[BatchItem], **options: Any) -> list[dict[str, Any]]:
        """:func:`~coding_genesis.batch.run_many` drawing from this pool, blocking
        (the same keywords but ``pool``)."""
        portal = self._live_portal()
        call = functools.partial(run_many, requests, pool=self.pool, **options)
        return cast("list[dict[str, Any]]", portal.call(call))

    def wait_warm(self, count: int | None = None, *, timeout: float | None = None) -> bool:
        portal = self._live_portal()
        return portal.call(functools.partial(self.pool.wait_warm, count, timeout=timeout))

    def stats(self) -> PoolStats:
        return self.pool.stats()
