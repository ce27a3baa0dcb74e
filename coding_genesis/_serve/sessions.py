"""The live sessions a server holds: open, turns, interrupt, steer, close,
resume; recorded as they change, so a restart lists the open ones ``lost``.

A session accepted (:func:`~coding_genesis._serve.requests.read_session_request`)
becomes a :class:`Live`: the library's own :class:`~coding_genesis.session.Session`
held open by a task of the server (a session is entered and left in one
task), its turns sent from other tasks (one at a time, as the library wants).
Its agent's events and its changes (``session`` and ``turn`` events) are
published on the hub under the session's topic; its tool calls wait in the
approval inbox unless it said ``"approvals": "none"``.  It keeps a bounded
history: its last ``keep`` turns (the library's ``keep_results``).

Every change is written to ``sessions.jsonl`` before it is streamed (a
session's record, and one record per turn: a change costs one short line
whatever the history): after a SIGKILL the next start lists each session
that was open ``lost`` with its turns so far (the turn under way ``lost``
too); the CLI's process tree is
stopped by the sweep of the runs' recovery (the run ledger).  A lost or
closed session whose CLI can resume (its session id known) is resumed under
the same id: a new CLI process continues the conversation, its turns listed
on.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from coding_genesis._pipeline.run import run_redactor
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.journal import Journal
from coding_genesis._serve.requests import AcceptedSession
from coding_genesis._serve.runs import prompt_head
from coding_genesis._util.redact import Redactor
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.batch import failure_result
from coding_genesis.errors import AgentUsageError
from coding_genesis.events import Event
from coding_genesis.session import Session
from coding_genesis.status import ErrorCode, Status

__all__ = ["Busy", "Live", "NoRoom", "Sessions", "recover"]

log = logging.getLogger("coding_genesis._serve.sessions")

#: Sessions that ended kept in memory (older ones: the journal's).
KEEP_ENDED = 500
#: What a turn's answer is cut to in the turn list (the whole result: GET .../turns/N).
MESSAGE_HEAD = 1000

LOST = (
    "the server stopped (killed or crashed) while this session was open: its CLI's "
    "process tree was stopped at the server's next start; resume it (POST "
    "/sessions/{id}/resume) where its CLI resumes"
)
#: The states a session is held in (the others are ended).
HELD = frozenset({"opening", "open", "closing"})


class Busy(Exception):
    """The session cannot take that now (the words say why)."""


class NoRoom(Busy):
    """The server holds as many sessions as it may, or is shutting down."""


@dataclass(eq=False, slots=True)
class Live:
    """One session of the server (held, or ended and remembered)."""

    id: str
    backend: str
    model: str | None
    cwd: str
    name: str | None
    approvals: str
    approval_timeout: float
    keep: int
    #: The body's data fields: what a resume reads again.
    data: dict[str, Any]
    created: float
    state: str = "opening"
    session_id: str | None = None
    #: Its last ``keep`` turns, oldest first (summaries; ``result`` in memory only).
    turns: collections.deque[dict[str, Any]] = field(default_factory=collections.deque)
    #: Turns so far (the number of the next is one more).
    count: int = 0
    #: The number of the turn under way.
    running: int | None = None
    ended: float | None = None
    why: str | None = None
    lost: dict[str, Any] | None = None
    #: Times it was resumed; the hub's topic is ``session-<id>-<epoch>``.
    epoch: int = 0
    agent: CodingGenesisAgent | None = field(default=None, repr=False)
    session: Session | None = field(default=None, repr=False)
    closing: anyio.Event | None = field(default=None, repr=False)
    opened: anyio.Event | None = field(default=None, repr=False)
    done: anyio.Event | None = field(default=None, repr=False)
    turn_done: anyio.Event | None = field(default=None, repr=False)
    #: Its agent's redactor (its transcripts'): what the journal masks of it
    #: too (None: a session of an earlier start, whose records were masked).
    redactor: Redactor | None = field(default=None, repr=False)

    @property
    def topic(self) -> str:
        return f"session-{self.id}-{self.epoch}"

    def view(self, *, turns: bool = True) -> dict[str, Any]:
        session = self.session
        return {
            "id": self.id,
            "state": self.state,
            "backend": self.backend,
            "model": self.model,
            "cwd": self.cwd,
            "name": self.name,
            "approvals": self.approvals,
            "approval_timeout_s": self.approval_timeout,
            "keep_turns": self.keep,
            "session_id": self.session_id,
            "created": self.created,
            "ended": self.ended,
            "turn_count": self.count,
            "turn_running": self.running,
            "can_steer": session.can_steer if session is not None else None,
            "alive": session.alive if session is not None else False,
            "resumed": self.epoch,
            "why": self.why,
            "lost": self.lost,
            "turns": [{k: v for k, v in t.items() if k != "result"} for t in self.turns]
            if turns
            else None,
        }

    def record(self) -> dict[str, Any]:
        """What the journal keeps of it (its turns are records of their own)."""
        view = self.view(turns=False)
        left_out = ("can_steer", "alive", "turn_running", "turns")
        return {
            **{k: v for k, v in view.items() if k not in left_out},
            "data": self.data,
            "count": self.count,
            "epoch": self.epoch,
        }


def _turn_record(key: str, turn: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's record in the journal (no result: that is the transcript's)."""
    return {
        "id": f"{key}/{turn['turn']}",
        "session": key,
        **{k: v for k, v in turn.items() if k != "result"},
    }


def _past(record: Mapping[str, Any], turns: list[dict[str, Any]]) -> Live:
    """A session of the journal, with its turns' records, as an ended :class:`Live`."""
    keep = int(record.get("keep_turns") or 0)
    turns.sort(key=lambda t: int(t.get("turn") or 0))
    return Live(
        id=str(record["id"]),
        backend=str(record.get("backend") or ""),
        model=record.get("model"),
        cwd=str(record.get("cwd") or ""),
        name=record.get("name"),
        approvals=str(record.get("approvals") or "inbox"),
        approval_timeout=float(record.get("approval_timeout_s") or 0.0),
        keep=keep,
        data=dict(record.get("data") or {}),
        created=float(record.get("created") or 0.0),
        state=str(record.get("state") or "lost"),
        session_id=record.get("session_id"),
        count=int(record.get("count") or 0),
        ended=record.get("ended"),
        why=record.get("why"),
        lost=record.get("lost"),
        epoch=int(record.get("epoch") or 0),
        turns=collections.deque(turns[-keep:] if keep else (), maxlen=keep),
    )


def recover(journal: Journal) -> tuple[dict[str, Live], int]:
    """The sessions an earlier start recorded: each one held then is ``lost``
    (its turn under way too); the journal compacted (the turns a session no
    longer keeps left out).  Returns them, and how many were found lost now."""
    found = 0
    now = time.time()
    records = journal.load()
    turns: dict[str, list[dict[str, Any]]] = {}
    for record in records.values():
        if isinstance(record.get("session"), str):
            turns.setdefault(record["session"], []).append(
                {k: v for k, v in record.items() if k not in ("id", "session", "at")}
            )
    past: dict[str, Live] = {}
    kept: dict[str, dict[str, Any]] = {}
    for key, record in records.items():
        if isinstance(record.get("session"), str):
            continue
        with contextlib.suppress(TypeError, ValueError):
            live = _past(record, turns.get(key, []))
            if live.state in HELD:
                found += 1
                live.lost = {"found": now, "was": live.state, "reason": LOST}
                live.state, live.ended, live.why = "lost", now, LOST
                journal.write(live.record())
                for turn in live.turns:
                    if turn.get("state") == "running":
                        turn.update(state="lost", finished=now)
                        journal.write(_turn_record(key, turn))
            past[key] = live
            kept[key] = live.record()
            kept.update({f"{key}/{t['turn']}": _turn_record(key, t) for t in live.turns})
    journal.rewrite(kept)
    return past, found


class Sessions:
    """The sessions of one server."""

    def __init__(
        self,
        hub: Hub,
        journal: Journal,
        redactor: Redactor,
        *,
        limit: int,
        past: dict[str, Live] | None = None,
    ) -> None:
        self.hub = hub
        self.journal = journal
        self.redactor = redactor
        self.limit = limit
        self.entries: collections.OrderedDict[str, Live] = collections.OrderedDict(past or {})
        self._tg: anyio.abc.TaskGroup | None = None
        self.accepting = True

    @property
    def held(self) -> list[Live]:
        return [live for live in self.entries.values() if live.state in HELD]

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def check_room(self) -> None:
        if not self.accepting:
            raise NoRoom("the server is shutting down")
        if len(self.held) >= self.limit:
            raise NoRoom(f"this server holds {self.limit} sessions at most: close one first")

    def where(
        self, key: str
    ) -> Callable[[Any], tuple[dict[str, Any], tuple[str, ...], Redactor | None]]:
        """Where a question of session ``key`` is from (for the approval inbox)."""

        def where(_request: Any) -> tuple[dict[str, Any], tuple[str, ...], Redactor | None]:
            live = self.entries[key]
            return {"session": key, "turn": live.running}, (live.topic,), live.redactor

        return where

    # -- the task group ----------------------------------------------------------------

    async def work(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hosts the sessions' tasks until the server stops."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep(math.inf)

    # -- opening and closing -----------------------------------------------------------

    async def open(self, key: str, accepted: AcceptedSession, live: Live | None = None) -> Live:
        """Open a session (a new one, or ``live`` resumed) and return once it is
        open or has failed to open.  :class:`NoRoom` when the server holds as
        many as it may, :class:`Busy` when ``live`` is held again already
        (both checked here, with no wait before it is held: two requests at
        once cannot both take the last place, or resume one session twice)."""
        assert self._tg is not None
        if live is not None and live.state in HELD:  # another request resumed it first
            raise Busy(f"session {live.id} is {live.state}")
        self.check_room()
        # What the server shows and records of it, masked as its transcripts are.
        redactor = run_redactor(accepted.agent.config)
        if live is None:
            live = Live(
                id=key,
                backend=accepted.backend,
                model=redactor.text(accepted.model) if accepted.model is not None else None,
                cwd=accepted.cwd,
                name=redactor.text(accepted.name) if accepted.name is not None else None,
                approvals=accepted.approvals,
                approval_timeout=accepted.approval_timeout,
                keep=accepted.keep,
                data=accepted.data,
                created=time.time(),
                turns=collections.deque(maxlen=accepted.keep),
            )
            self.entries[key] = live
        else:
            live.epoch += 1
            live.state, live.ended, live.why, live.lost = "opening", None, None, None
        live.agent, live.session, live.redactor = accepted.agent, accepted.session, redactor
        live.closing, live.opened, live.done = anyio.Event(), anyio.Event(), anyio.Event()
        self._changed(live)
        self._tg.start_soon(self._host, live)
        await live.opened.wait()
        return live

    async def _host(self, live: Live) -> None:
        """Holds ``live``'s session open until it is closed (or fails)."""
        session, agent = live.session, live.agent
        assert session is not None and agent is not None
        assert live.closing is not None and live.opened is not None and live.done is not None
        unsubscribe = agent.subscribe(lambda event: self._event(live, event))
        failed: str | None = None
        try:
            async with session:
                live.session_id = session.session_id
                live.state = "open"
                self._changed(live)
                live.opened.set()
                await self._until_closing(live, session)
                live.state = "closing"
                self._changed(live)
        except Exception as exc:  # noqa: BLE001  (a CLI that cannot start: the session did not open)
            failed = f"{type(exc).__name__}: {exc}"
        finally:  # no await: done even when the server itself is cancelled
            unsubscribe()
            live.session_id = session.session_id or live.session_id
            live.state = "failed" if failed else "closed"
            live.why = failed or live.why
            live.ended = time.time()
            live.agent = live.session = None
            self._changed(live)
            self.hub.end(live.topic)
            live.opened.set()
            live.done.set()
            self._forget()

    async def _until_closing(self, live: Live, session: Session) -> None:
        """Until ``live`` is to close: asked to, or its CLI ended on its own (one
        that died while idle is closed at once, not at the next request; one
        that died in a turn once that turn has its answer)."""
        closing = live.closing
        assert closing is not None

        async def ended() -> None:
            await session.wait_ended()
            if live.turn_done is not None:
                await live.turn_done.wait()
            live.why = live.why or "its CLI ended the session"
            closing.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(ended)
            await closing.wait()
            tg.cancel_scope.cancel()

    async def close(self, live: Live, why: str) -> None:
        """Close a held session: its turn (if any) ends, the CLI is told goodbye
        and its tree stopped; returns once it is closed."""
        if live.state not in HELD or live.closing is None or live.done is None:
            return
        live.why = why
        live.closing.set()
        await live.done.wait()

    def close_all(self, why: str) -> None:
        self.accepting = False
        for live in self.held:
            live.why = why
            if live.closing is not None:
                live.closing.set()

    async def idle(self) -> None:
        for live in self.held:
            if live.done is not None:
                await live.done.wait()

    # -- turns -----------------------------------------------------------------------

    def send(
        self,
        live: Live,
        prompt: str | list[Any],
        timeout: float | None,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Start a turn (``options``: the turn's own of ``send()``, read by
        the caller); its summary (``running``).  :class:`Busy` when the
        session is not open or a turn is under way."""
        if live.state != "open" or live.session is None:
            raise Busy(f"session {live.id} is {live.state}: it takes no turn")
        if live.running is not None:
            raise Busy(
                f"turn {live.running} of session {live.id} is under way: wait for its end, "
                "steer it, or interrupt it"
            )
        assert self._tg is not None
        live.count += 1
        number = live.count
        turn: dict[str, Any] = {
            "turn": number,
            "state": "running",
            "prompt": (live.redactor or self.redactor).text(prompt_head(prompt)),
            "started": time.time(),
            "finished": None,
            "status": None,
            "error": None,
            "message": None,
            "run_id": None,
        }
        live.turns.append(turn)
        live.running = number
        live.turn_done = anyio.Event()
        self.journal.write(_turn_record(live.id, turn), live.redactor)
        self._changed(live)
        self._tg.start_soon(
            self._turn, live, live.session, turn, prompt, timeout, dict(options or {})
        )
        return turn

    async def _turn(
        self,
        live: Live,
        session: Session,
        turn: dict[str, Any],
        prompt: str | list[Any],
        timeout: float | None,
        options: dict[str, Any],
    ) -> None:
        response: dict[str, Any] | None = None
        try:
            response = dict(await session.send(prompt, timeout=timeout, **options))
        except AgentUsageError as exc:  # closed under it
            response = failure_result(
                0,
                str(exc),
                status=Status.CANCELLED,
                error=ErrorCode.CANCELLED,
                backend=live.backend,
            )
        except Exception as exc:  # send() answers every failure: a bug of ours
            log.exception("turn %s of session %s raised", turn["turn"], live.id)
            response = failure_result(
                0,
                f"internal error in coding-genesis: {exc!r}",
                status=Status.INTERNAL,
                error=ErrorCode.INTERNAL,
                backend=live.backend,
            )
        finally:  # no await
            if response is None:
                response = failure_result(
                    0,
                    "the server stopped during this turn",
                    status=Status.CANCELLED,
                    error=ErrorCode.CANCELLED,
                    backend=live.backend,
                )
            response.pop("index", None)
            result = self.redactor.deep(response)
            message = result.get("message")
            turn.update(
                state="finished",
                finished=time.time(),
                status=result.get("status"),
                error=result.get("error"),
                message=str(message)[:MESSAGE_HEAD] if message is not None else None,
                run_id=result.get("run_id"),
                result=result,
            )
            live.session_id = session.session_id or live.session_id
            live.running = None
            self.journal.write(_turn_record(live.id, turn), live.redactor)
            self._changed(live)
            self.hub.publish(
                live.topic,
                "turn",
                {"type": "turn", "session": live.id, **turn},
            )
            if live.turn_done is not None:
                live.turn_done.set()
            if session.closed and live.closing is not None and not live.closing.is_set():
                # Its CLI ended (or was stopped): the session is closed, not left open.
                live.why = live.why or "its CLI ended the session (see the last turn's answer)"
                live.closing.set()

    async def interrupt(self, live: Live) -> bool:
        """End the turn under way (False: none was)."""
        if live.session is None or live.running is None:
            return False
        return await live.session.interrupt()

    async def steer(self, live: Live, text: str) -> None:
        """Add input to the turn under way (:class:`Busy`: no turn, or a backend
        that cannot steer: the library's words)."""
        if live.session is None or live.running is None:
            raise Busy(f"session {live.id} has no turn under way to steer")
        try:
            await live.session.steer(text)
        except AgentUsageError as exc:
            raise Busy(str(exc)) from None

    # -- reading ---------------------------------------------------------------------

    def find(self, ref: str) -> Live | None:
        return self.entries.get(ref)

    def listing(self, *, state: str | None, limit: int) -> list[dict[str, Any]]:
        views = [
            live.view(turns=False)
            for live in self.entries.values()
            if state is None or live.state == state
        ]
        views.sort(key=lambda v: float(v["created"] or 0.0), reverse=True)
        return views[:limit]

    # -- recording -------------------------------------------------------------------

    def _changed(self, live: Live) -> None:
        self.journal.write(live.record(), live.redactor)
        self.hub.publish(live.topic, "session", {"type": "session", **live.view()})

    def _event(self, live: Live, event: Event) -> None:
        payload = event.to_dict()
        self.hub.publish(
            live.topic,
            str(payload.get("type") or "event"),
            {"session": live.id, "turn": live.running, **payload},
        )

    def _forget(self) -> None:
        ended = [k for k, live in self.entries.items() if live.state not in HELD]
        for key in ended[: max(0, len(ended) - KEEP_ENDED)]:
            self.entries.pop(key, None)
