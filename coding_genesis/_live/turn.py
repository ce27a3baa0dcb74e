"""One turn of a live session (``link.py``): what the link keeps of it while
it runs (its tally, its ending, the approvals and hooks under way), its
account of the process, and what the CLI's exit says of a turn it did not end;
and what the CLI says between turns (:class:`Unattended`), held for the turn
it starts by itself."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import anyio

from coding_genesis._live.approvals import withdrawn_record
from coding_genesis._live.hooks import Running
from coding_genesis._pipeline.attempt import AttemptContext, TurnEnd
from coding_genesis._pipeline.decode import Router
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._supervision.values import ProcessOutcome
from coding_genesis.approval import ApprovalRecord, ApprovalRequest
from coding_genesis.control import HookCall, PermissionAsk, QuestionAsked, ToolCall, TurnEnded
from coding_genesis.events import (
    Event,
    ResultEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    Translator,
)
from coding_genesis.hooks import HookRecord
from coding_genesis.options import TurnHow
from coding_genesis.request import Request

__all__ = ["STDERR_TAIL", "Turn", "TurnMarks", "Unattended", "death", "with_exit"]

#: The stderr a turn keeps (its failure analysis reads the tail).
STDERR_TAIL = 64 * 1024


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TurnMarks:
    """Where the session's counts stood when a turn began: the turn's share
    of each is what it grew by."""

    #: ``time.monotonic()``.
    started: float
    #: Bytes of the CLI's stdout.
    stdout: int
    #: Lines parsed, and skipped among them.
    lines: int
    skipped: int
    #: Messages of a type the protocol did not know.
    unknown: int


@dataclasses.dataclass(slots=True, kw_only=True)
class Turn:
    """The state of one running turn (``number``: 1 for the session's first)."""

    number: int
    request: Request
    context: AttemptContext
    tally: RunTally
    translator: Translator
    #: Where the turn's events go (its tally, its routes, its watch).
    router: Router
    run_id: str
    marks: TurnMarks
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    ended: TurnEnd | None = None
    interrupt_asked: bool = False
    denied: str | None = None
    approvals: list[ApprovalRecord] = dataclasses.field(default_factory=list)
    #: The hooks called, and the hook calls still running.
    hooks: list[HookRecord] = dataclasses.field(default_factory=list)
    #: The questions the CLI put to the user, as recorded (``RunResult.questions``).
    questions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    running: Running = dataclasses.field(default_factory=Running)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    stderr_bytes: int = 0
    #: Processes the turn left running that were stopped after it (interrupted).
    strays: int = 0
    #: The approvals under way, and what each asks (withdrawn when the turn ends).
    asking: dict[anyio.CancelScope, ApprovalRequest] = dataclasses.field(default_factory=dict)
    #: The questions the turn's end withdrew, with their records (to publish).
    withdrawn: list[tuple[ApprovalRecord, ApprovalRequest]] = dataclasses.field(
        default_factory=list
    )

    def end(self, how: TurnHow, message: str = "") -> None:
        if not self.done.is_set():
            self.ended = TurnEnd(how, message)
            self.done.set()
            for scope, request in self.asking.items():
                # questions of an ended turn: nobody waits for them; recorded
                # as withdrawn (an interrupt while the approver pondered)
                scope.cancel()
                record = withdrawn_record(request, how)
                self.approvals.append(record)
                self.withdrawn.append((record, request))
            self.asking.clear()

    def process(
        self, pid: int | None, stdout_bytes: int, exit: ProcessOutcome | None
    ) -> ProcessOutcome:
        """The turn's account of the process (``stdout_bytes``: the session's
        so far; ``exit``: the supervisor's outcome once the process is gone)."""
        out = ProcessOutcome(
            pid=pid,
            stdout_bytes=stdout_bytes - self.marks.stdout,
            stderr_tail=bytes(self.stderr[-STDERR_TAIL:]).decode("utf-8", "replace"),
            stderr_bytes=self.stderr_bytes,
            duration_s=time.monotonic() - self.marks.started,
            leftovers_stopped=self.strays,
        )
        return with_exit(out, exit, self.strays)


#: What the CLI says between turns that makes a turn of its own (the model at
#: work); anything else (usage, status notes) only waits for the next turn.
_WORK = (TextEvent, ToolCallEvent, ToolResultEvent, ResultEvent)
#: The most held between turns: a CLI that talks on and on without a turn
#: starting keeps only this much (the rest is counted).
_HELD_BYTES = 8 * 1024 * 1024
_HELD_ITEMS = 10_000

#: What the CLI asks between turns that waits for an answer.
Waiting = PermissionAsk | ToolCall | HookCall | QuestionAsked


class Unattended:
    """What the CLI said since the last turn ended: its bytes (for the
    transcript), its events, its questions and calls (unanswered until a turn
    takes them) and its end of a turn.  Work (:data:`_WORK` events, a
    question, a call, a hook point, a turn the CLI began) sets :attr:`wanted`:
    the session then starts a turn of the CLI's own (``trigger: "cli"``) that
    takes it all, so nothing the CLI does between turns goes unrecorded."""

    __slots__ = ("dropped", "ended", "events", "raw", "waiting", "wanted")

    def __init__(self) -> None:
        self.raw = bytearray()
        self.events: list[Event] = []
        self.waiting: list[Waiting] = []
        self.ended: TurnEnded | None = None
        #: Bytes or events not held (over the bounds).
        self.dropped = 0
        self.wanted = anyio.Event()

    def bytes(self, chunk: bytes) -> None:
        if len(self.raw) + len(chunk) <= _HELD_BYTES:
            self.raw += chunk
        else:
            self.dropped += len(chunk)

    def said(self, events: Sequence[Event]) -> None:
        for event in events:
            if len(self.events) >= _HELD_ITEMS:
                self.dropped += 1
                continue
            self.events.append(event)
            if isinstance(event, _WORK):
                self.wanted.set()

    def began(self) -> None:
        """The CLI began a turn of its own (:class:`~coding_genesis.control.TurnBegan`):
        its end of a turn held before is an older one's, and a turn is wanted now."""
        self.ended = None
        self.wanted.set()

    def wait(self, item: Waiting) -> None:
        self.waiting.append(item)
        # A question after the CLI's end of a turn is new work: the turn that
        # takes it ends at the CLI's next end, not at that one (which would
        # withdraw the question unanswered, and the CLI would wait on).
        self.ended = None
        self.wanted.set()

    def take(self) -> Unattended:
        """All of it, handed over (this one starts afresh)."""
        held = Unattended()
        held.raw, self.raw = self.raw, bytearray()
        held.events, self.events = self.events, []
        held.waiting, self.waiting = self.waiting, []
        held.ended, self.ended = self.ended, None
        held.dropped, self.dropped = self.dropped, 0
        if self.wanted.is_set():  # an unset one stays: a waiter still waits on it
            held.wanted, self.wanted = self.wanted, anyio.Event()
        return held


def death(name: str, exit: ProcessOutcome | None) -> str:
    """Why the session is closed, in words, for a turn the CLI did not end."""
    if exit is None:
        return f"{name} ended mid-turn; the session is closed"
    if exit.stop_reason is not None:
        return f"{name} was stopped ({exit.stop_reason.value}); the session is closed"
    rc = exit.returncode
    how = f"was killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with code {rc}"
    return f"{name} {how} mid-turn; the session is closed"


def with_exit(out: ProcessOutcome, exit: ProcessOutcome | None, strays: int) -> ProcessOutcome:
    """``out`` (the turn's own account) with what the supervisor saw of the
    process's end, once it is gone (``exit``; None: alive)."""
    if exit is None:
        return out
    out.returncode = exit.returncode
    out.stop_reason = exit.stop_reason
    out.spawn_error = exit.spawn_error
    out.signals_sent = list(exit.signals_sent)
    out.leftovers_stopped = exit.leftovers_stopped + strays
    out.stdout_eof = exit.stdout_eof
    out.stall_silent_s = exit.stall_silent_s
    out.stall_cpu_s = exit.stall_cpu_s
    if not out.stderr_tail and exit.stderr_tail:
        out.stderr_tail = exit.stderr_tail
    return out
