"""The approval inbox: every tool call a run or session of the server asks
about, waiting for an answer from whichever client gives it first.

A request whose calls wait here (``"approvals": "inbox"``, a session's
default) is given :meth:`Inbox.approver`: an ordinary async approver
(:mod:`coding_genesis.approval`), so nothing of the library changes.  Each
question becomes an :class:`Item`: listed, streamed (the ``approvals`` topic
of the hub, and the topics of the run or session that asks), and answered by
:meth:`Inbox.answer` from the API, ``genesis approvals``, later the dashboard
and the MCP tools alike; each answer is recorded with its channel and the
caller's name when given.  The first answer wins; a second, or one after the
deadline, is refused with what happened instead.

The deadline is the request's ``approval_timeout``: the library's
:func:`~coding_genesis.approval.decide` stops the wait there and denies (the
default); the item is then ``expired``.  A wait the turn's end cut short (an
interrupt, a cancel, the session closed) is ``withdrawn``.  Every change is
written to the server's journal before it is streamed, so a server killed
while an approval waits lists it ``expired`` at its next start, with the tool
call it was about (:func:`recover`).
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from coding_genesis._serve.hub import Hub
from coding_genesis._serve.journal import Journal
from coding_genesis._util.parser import bound_depth
from coding_genesis._util.redact import Redactor
from coding_genesis.approval import AlwaysScope, ApprovalRequest, Approver, Decision

__all__ = ["TOPIC", "Inbox", "Item", "Refusal", "Where", "recover"]

#: The hub's topic of the inbox.
TOPIC = "approvals"
#: Settled approvals kept in memory (older ones are read from the journal).
KEEP_SETTLED = 1_000
#: What a deadline decides: the library's default.
DEFAULT = "deny"
#: How close to its deadline an answer is too late (the wait is being stopped).
_MARGIN = 0.05
#: The shortest prefix of an id that names an approval.
MIN_PREFIX = 4
#: A text of a tool call shown longer than this is cut (a Write of a large
#: file): the inbox, its journal and its events stay small.
MAX_TEXT = 8_000
#: ... and a list or object longer than this.
MAX_ITEMS = 200

EXPIRED = (
    "nobody answered within {timeout:g} s: its default (deny) was applied and the tool "
    "call did not run"
)
WITHDRAWN = (
    "the turn that asked ended before an answer (interrupted, cancelled, or its session "
    "closed): the tool call did not run"
)
LOST = (
    "the server stopped (killed or crashed) while this approval was pending: the tool call "
    "never ran, and its CLI's process tree was stopped at the server's next start"
)

#: Where a question comes from: the owner's fields (``run``, or ``session`` and
#: ``turn``), the hub topics it is streamed on besides the inbox's, and the
#: owner's redactor (its transcripts': it knows the secrets of its ``env``).
Where = Callable[[ApprovalRequest], tuple[Mapping[str, Any], tuple[str, ...], Redactor | None]]


class Refusal(Exception):
    """An answer the inbox cannot take: ``error`` (a short code), the words of why."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(eq=False, slots=True)
class Item:
    """One tool call waiting (or once waiting) for an answer."""

    id: str
    #: ``run`` (a request id) or ``session`` and ``turn``.
    owner: dict[str, Any]
    #: The tool call, as the approver is shown it (its input redacted).
    call: dict[str, Any]
    asked: float
    deadline: float
    timeout: float
    topics: tuple[str, ...] = ()
    state: str = "pending"
    answer: dict[str, Any] | None = None
    ended: float | None = None
    why: str | None = None
    #: The answer given, handed to the waiting approver.
    decision: Decision | None = field(default=None, repr=False)
    settled: anyio.Event | None = field(default=None, repr=False)
    #: The deadline on the event loop's clock.
    limit: float = 0.0
    #: Its owner's redactor (what the journal masks of it besides the server's).
    redactor: Redactor | None = field(default=None, repr=False)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "run": self.owner.get("run"),
            "session": self.owner.get("session"),
            "turn": self.owner.get("turn"),
            "call": self.call,
            "asked": self.asked,
            "deadline": self.deadline,
            "timeout_s": self.timeout,
            "default": DEFAULT,
            "answer": self.answer,
            "ended": self.ended,
            "why": self.why,
        }


def _clipped(value: Any) -> Any:
    """``value`` with each long text, list and object cut, saying by how much."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return f"{value[:MAX_TEXT]}... ({len(value) - MAX_TEXT} more characters)"
    if isinstance(value, dict):
        items = list(value.items())
        kept = {str(k): _clipped(v) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            kept["..."] = f"{len(items) - MAX_ITEMS} more keys"
        return kept
    if isinstance(value, list | tuple):
        kept_items = [_clipped(v) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept_items.append(f"... {len(value) - MAX_ITEMS} more items")
        return kept_items
    return value


def _call(request: ApprovalRequest, *redactors: Redactor | None) -> dict[str, Any]:
    """What the tool call is about, redacted (by its owner's redactor and the
    server's) and cut to size (the approver alone sees the raw input)."""
    call: dict[str, Any] = {
        "tool": request.tool,
        "kind": request.kind,
        "command": request.command,
        "paths": list(request.paths),
        "moves": [list(move) for move in request.moves],
        "reason": request.reason,
        "input": dict(request.input),
        "cwd": request.cwd,
        "backend": request.backend,
        "run_id": request.run_id or None,
        "session_id": request.session_id,
        "tool_call_id": request.tool_call_id,
        "unreadable": request.unreadable,
    }
    for redactor in redactors:
        if redactor is not None:
            call = redactor.deep(call)
    clipped: dict[str, Any] = _clipped(bound_depth(call))
    return clipped


def _past_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """An approval of the journal (an earlier start of the server, or one
    evicted from memory)."""
    found = record.get("owner")
    owner: dict[str, Any] = found if isinstance(found, dict) else {}
    return {
        "id": record["id"],
        "state": record.get("state")
        if record.get("state") in ("answered", "expired", "withdrawn")
        else "expired",
        "run": owner.get("run"),
        "session": owner.get("session"),
        "turn": owner.get("turn"),
        "call": record.get("call") if isinstance(record.get("call"), dict) else {},
        "asked": record.get("asked"),
        "deadline": record.get("deadline"),
        "timeout_s": record.get("timeout"),
        "default": DEFAULT,
        "answer": record.get("answer") if isinstance(record.get("answer"), dict) else None,
        "ended": record.get("ended"),
        "why": record.get("why"),
    }


def recover(journal: Journal) -> tuple[dict[str, dict[str, Any]], int]:
    """What an earlier start of the server left: every approval it showed
    pending marked ``expired`` (the tool call never ran); the journal
    compacted.  Returns the approvals, oldest first, and how many expired now."""
    past = journal.load()
    now = time.time()
    found = 0
    for key, record in past.items():
        if record.get("state") != "pending":
            continue
        change = {"id": key, "state": "expired", "ended": now, "why": LOST, "found": now}
        journal.write(change)
        record.update(change)
        found += 1
    journal.rewrite(past)
    return past, found


class Inbox:
    """The pending approvals of the server, and the recent settled ones."""

    def __init__(
        self,
        hub: Hub,
        journal: Journal,
        redactor: Redactor,
        past: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.hub = hub
        self.journal = journal
        self.redactor = redactor
        self.pending: dict[str, Item] = {}
        self._settled: collections.OrderedDict[str, Item] = collections.OrderedDict()
        #: The journal's approvals of earlier starts (by id).
        self.past = past or {}
        hub.open_topic(TOPIC)

    # -- asking -----------------------------------------------------------------------

    def approver(self, timeout: float, where: Where) -> Approver:
        """The approver of one request: each question waits here for an answer
        (``timeout``: the request's ``approval_timeout``, after which the
        library denies it)."""

        async def ask(request: ApprovalRequest) -> Decision:
            owner, topics, redactor = where(request)
            item = self._ask(request, dict(owner), topics, timeout, redactor)
            assert item.settled is not None
            try:
                await item.settled.wait()
            except BaseException:
                if item.state == "pending":  # no await here: it is recorded as it goes
                    late = anyio.current_time() >= item.limit - _MARGIN
                    self._end(
                        item,
                        "expired" if late else "withdrawn",
                        EXPIRED.format(timeout=timeout) if late else WITHDRAWN,
                    )
                raise
            assert item.decision is not None
            return item.decision

        return ask

    def _ask(
        self,
        request: ApprovalRequest,
        owner: dict[str, Any],
        topics: tuple[str, ...],
        timeout: float,
        redactor: Redactor | None,
    ) -> Item:
        now = time.time()
        item = Item(
            id=uuid.uuid4().hex,
            owner=owner,
            call=_call(request, redactor, self.redactor),
            asked=now,
            deadline=now + timeout,
            timeout=timeout,
            topics=topics,
            settled=anyio.Event(),
            limit=anyio.current_time() + timeout,
            redactor=redactor,
        )
        self.pending[item.id] = item
        self.journal.write(
            {
                "id": item.id,
                "state": "pending",
                "owner": owner,
                "call": item.call,
                "asked": item.asked,
                "deadline": item.deadline,
                "timeout": timeout,
            },
            redactor,
        )
        self._publish(item)
        return item

    def _end(self, item: Item, state: str, why: str | None) -> None:
        """An item settled: answered, expired or withdrawn."""
        item.state = state
        item.ended = time.time()
        item.why = why
        self.pending.pop(item.id, None)
        self._settled[item.id] = item
        while len(self._settled) > KEEP_SETTLED:
            self._settled.popitem(last=False)
        self.journal.write(
            {
                "id": item.id,
                "state": state,
                "answer": item.answer,
                "ended": item.ended,
                "why": why,
            },
            item.redactor,
        )
        self._publish(item)

    def _publish(self, item: Item) -> None:
        self.hub.publish(
            (TOPIC, *item.topics), "approval_request", {"type": "approval_request", **item.view()}
        )

    # -- answering --------------------------------------------------------------------

    def answer(
        self,
        ref: str,
        *,
        allow: bool,
        always: bool | AlwaysScope = False,
        message: str | None = None,
        end_turn: bool = False,
        by: str | None = None,
        channel: str = "api",
        via: str = "bearer",
    ) -> dict[str, Any]:
        """Answer a pending approval named by its full id (the first answer
        wins; a prefix never answers: an answer acts on the one approval its
        caller named): its view, now answered.  :class:`Refusal` when it is
        unknown (an id of no start of this server, or forged), settled already
        (answered, expired, withdrawn: an earlier start's pending ones are
        expired), or past its deadline."""
        item = self.pending.get(ref)
        if item is None:
            held = self._settled.get(ref)
            known = held.view() if held is not None else None
            if known is None and ref in self.past:
                known = _past_view(self.past[ref])
            if known is None:
                raise Refusal(
                    "not_found",
                    f"no approval {ref[:100]!r} (an answer names an approval by its full id)",
                )
            raise Refusal(str(known["state"]), _settled_words(known))
        if anyio.current_time() >= item.limit - _MARGIN:
            raise Refusal(
                "expired",
                f"approval {item.id} reached its deadline ({item.timeout:g} s after it was "
                "asked): its default (deny) applies and this answer cannot change it",
            )
        who = f"{channel}, by {by}" if by else channel
        reason = f"answered in the approval inbox ({who})"
        if allow:
            decision = Decision.allow(always=always, reason=reason)
        else:
            words = message or "denied in the approval inbox"
            decision = Decision.deny(words, end_turn=end_turn, always=always, reason=reason)
        item.decision = decision

        def masked(text: str | None) -> str | None:
            """As the owner's transcripts show it (the agent is told it as given)."""
            return text if text is None or item.redactor is None else item.redactor.text(text)

        item.answer = {
            "decision": decision.option.value,
            "allowed": decision.allowed,
            "always": decision.scope if decision.always else None,
            "message": None if allow else masked(decision.message),
            "end_turn": decision.end_turn,
            "channel": channel,
            "by": masked(by),
            "via": via,
            "at": time.time(),
        }
        self._end(item, "answered", None)
        assert item.settled is not None
        item.settled.set()
        return item.view()

    # -- reading ----------------------------------------------------------------------

    def find(self, ref: str) -> dict[str, Any] | None:
        """One approval by its id, or a unique prefix of it (at least
        :data:`MIN_PREFIX` characters); :class:`Refusal` when a prefix names
        several."""
        item = self.pending.get(ref) or self._settled.get(ref)
        if item is not None:
            return item.view()
        if ref in self.past:
            return _past_view(self.past[ref])
        if len(ref) < MIN_PREFIX:
            return None
        held = [i for i in (*self.pending, *self._settled) if i.startswith(ref)]
        known = set(held) | {i for i in self.past if i.startswith(ref)}
        if len(known) > 1:
            raise Refusal(
                "ambiguous", f"{ref!r} begins {len(known)} approvals' ids: give more of one"
            )
        if not known:
            return None
        return self.find(known.pop())

    def listing(
        self,
        *,
        state: str | None = "pending",
        session: str | None = None,
        run: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Approvals, newest first (``state`` None: all)."""
        views = [i.view() for i in (*self.pending.values(), *self._settled.values())]
        held = {v["id"] for v in views}
        views += [_past_view(r) for k, r in self.past.items() if k not in held]
        wanted = [
            v
            for v in views
            if (state is None or v["state"] == state)
            and (session is None or v["session"] == session)
            and (run is None or v["run"] == run)
        ]
        wanted.sort(key=lambda v: float(v.get("asked") or 0.0), reverse=True)
        return wanted[:limit]

    def snapshot(self) -> tuple[str, dict[str, Any]]:
        """The first event of an inbox stream: what is pending now."""
        pending = sorted((i.view() for i in self.pending.values()), key=lambda v: v["asked"])
        return "inbox", {"type": "inbox", "pending": pending}


def _settled_words(view: Mapping[str, Any]) -> str:
    """Why an approval no longer takes an answer, in words."""
    state = view.get("state")
    answer = view.get("answer") or {}
    if state == "answered":
        who = answer.get("channel") or "?"
        if answer.get("by"):
            who += f", by {answer['by']}"
        return (
            f"approval {view['id']} was already answered: {answer.get('decision')} ({who}); "
            "the first answer wins"
        )
    return f"approval {view['id']} is {state}: {view.get('why') or 'it takes no answer'}"
