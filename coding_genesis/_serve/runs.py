"""The runs a server holds: a bounded queue, a concurrency limit, cancel and drain.

A request accepted (:mod:`coding_genesis._serve.requests`) becomes an
:class:`Entry`: queued, then running on its own agent (the public
``CodingGenesisAgent``, so a served run is a library run: the same
supervision, transcript, run log and ledger), then finished with the run's
response.  The queue is bounded (:class:`Full`: the caller answers 429 with
``Retry-After``); at most ``concurrency`` runs go at once; a run goes on
whatever its clients do.  Every change is written to the journal before it
is streamed: a server killed at any point is found out at its next start
(:mod:`coding_genesis._serve.history`).

Each run's events (the agent's bus) and its changes of state (``run``
events) are published on the hub under the request's id.
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

from coding_genesis._serve.hub import Hub
from coding_genesis._serve.journal import Journal
from coding_genesis._util.redact import Redactor
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.batch import RunSpec, failure_result
from coding_genesis.events import Event
from coding_genesis.observer import Observer, RunInfo, RunObserver
from coding_genesis.prompts import text_of
from coding_genesis.status import ErrorCode, Status

__all__ = ["Draining", "Entry", "Full", "Runs"]

log = logging.getLogger("coding_genesis._serve.runs")

#: Finished runs kept in memory with their result (older ones are read back).
KEEP_FINISHED = 1_000
#: What a run's first line of prompt is cut to in listings.
PROMPT_HEAD = 200


class Full(Exception):
    """The queue is full: try again after ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


class Draining(Exception):
    """The server is shutting down and takes no new run."""


def prompt_head(prompt: object) -> str:
    """A prompt's first non-blank line, cut (what a listing shows): of its
    text parts alone, never an image's bytes."""
    text = text_of(prompt) if prompt else ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:PROMPT_HEAD]


@dataclass(slots=True, eq=False)
class Entry:
    """One request the server accepted."""

    id: str
    backend: str
    prompt: str
    cwd: str
    model: str | None
    accepted: float
    spec: RunSpec | None = None
    agent: CodingGenesisAgent | None = None
    state: str = "queued"
    run_id: str | None = None
    transcript: str | None = None
    started: float | None = None
    finished: float | None = None
    result: dict[str, Any] | None = None
    #: Why it was cancelled (None: nobody asked).
    cancel: str | None = None
    scope: anyio.CancelScope | None = None
    #: Set once it has finished (made when it is queued, on the event loop).
    done: anyio.Event | None = None
    #: The response its observers were given (a cancelled run's is only there).
    observed: dict[str, Any] | None = field(default=None, repr=False)
    #: Its run's redactor (its transcript's): what the journal masks of it too.
    redactor: Redactor | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        """The facts of its result a listing shows."""
        result = self.result or {}
        failure = result.get("failure") or {}
        return {
            "status": result.get("status"),
            "error": result.get("error"),
            "category": failure.get("category") if isinstance(failure, dict) else None,
            "duration_s": result.get("duration_s"),
            "tool_calls": result.get("tool_calls"),
        }


class _Watch(Observer):
    """The server's observer of one request's run: when it starts (its run id,
    recorded before the CLI is spawned) and the response it ends with."""

    __slots__ = ("_entry", "_runs")

    def __init__(self, runs: Runs, entry: Entry) -> None:
        self._runs = runs
        self._entry = entry

    def start(self, run: RunInfo) -> RunObserver:
        self._runs._started(self._entry, run.run_id)
        return _WatchRun(self._entry)


class _WatchRun(RunObserver):
    __slots__ = ("_entry",)

    event_kinds: frozenset[Any] = frozenset()

    def __init__(self, entry: Entry) -> None:
        self._entry = entry

    def finish(self, response: Mapping[str, Any]) -> None:
        self._entry.observed = dict(response)


class Runs:
    """The queue, the workers and the entries of one server."""

    def __init__(
        self,
        hub: Hub,
        journal: Journal,
        redactor: Redactor,
        *,
        concurrency: int,
        queue: int,
        transcripts: str | None,
        view: Callable[[Entry], dict[str, Any]],
    ) -> None:
        self.hub = hub
        self.journal = journal
        self.redactor = redactor
        self.concurrency = concurrency
        self.queue_size = queue
        self.transcripts = transcripts
        self._view = view
        self.entries: collections.OrderedDict[str, Entry] = collections.OrderedDict()
        self.by_run_id: dict[str, str] = {}
        self.pending: collections.deque[Entry] = collections.deque()
        self.running: dict[str, Entry] = {}
        self._finished: collections.deque[str] = collections.deque()
        self._wake = anyio.Event()
        self._finished_one = anyio.Event()
        self.accepting = True
        self._stopping = False
        #: Mean seconds a run took, for Retry-After (exponentially weighted).
        self._mean_duration = 10.0
        self.answered = 0

    # -- accepting --------------------------------------------------------------

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def observers(self, entry: Entry) -> list[Observer]:
        """The server's own observers of ``entry``'s run."""
        return [_Watch(self, entry)]

    def retry_after(self) -> int:
        """Seconds until a place in the queue is likely free."""
        waves = (len(self.pending) + len(self.running)) / max(1, self.concurrency)
        return max(1, min(3600, math.ceil(self._mean_duration * max(waves, 1.0) / 4)))

    def check_room(self) -> None:
        """Raises :class:`Draining` or :class:`Full` when a request cannot be taken."""
        if not self.accepting:
            raise Draining
        if len(self.pending) >= self.queue_size:
            raise Full(self.retry_after())

    def add(self, entry: Entry) -> None:
        """Queue an accepted request (call :meth:`check_room` first)."""
        self.check_room()
        entry.done = anyio.Event()
        self.entries[entry.id] = entry
        self.pending.append(entry)
        self.journal.write(
            {
                "id": entry.id,
                "state": "queued",
                "accepted": entry.accepted,
                "backend": entry.backend,
                "model": entry.model,
                "prompt": entry.prompt,
                "cwd": entry.cwd,
            },
            entry.redactor,
        )
        self._publish(entry)
        self._notify()

    def held(self, ref: str) -> Entry | None:
        """The entry this server holds named by its request id or its run id."""
        key = ref if ref in self.entries else self.by_run_id.get(ref)
        return self.entries.get(key) if key is not None else None

    def position(self, entry: Entry) -> int | None:
        """1 for the next to run (None: not queued)."""
        if entry.state != "queued":
            return None
        for index, queued in enumerate(self.pending, 1):
            if queued is entry:
                return index
        return None

    # -- cancelling ---------------------------------------------------------------

    def cancel(self, entry: Entry, reason: str) -> bool:
        """Cancel a queued or running request (False: it had finished)."""
        if entry.state == "queued":
            entry.cancel = reason
            with contextlib.suppress(ValueError):
                self.pending.remove(entry)
            result = failure_result(
                0,
                f"cancelled before it started ({reason}); nothing was run",
                status=Status.CANCELLED,
                error=ErrorCode.CANCELLED,
                backend=entry.backend,
            )
            result.pop("index", None)
            self._finish(entry, result)
            return True
        if entry.state == "running":
            if entry.cancel is None:
                entry.cancel = reason
                if entry.scope is not None:
                    entry.scope.cancel()
            return True
        return False

    # -- running ------------------------------------------------------------------

    async def work(self) -> None:
        """The workers: each takes the next queued request and runs it; they
        end once :meth:`stop` was called and the queue is empty."""
        async with anyio.create_task_group() as tg:
            for _ in range(self.concurrency):
                tg.start_soon(self._worker)

    async def _worker(self) -> None:
        while True:
            while not self.pending:
                if self._stopping:
                    return
                await self._wake.wait()
            entry = self.pending.popleft()
            await self._run(entry)

    def _notify(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    async def _run(self, entry: Entry) -> None:
        agent, spec = entry.agent, entry.spec
        assert agent is not None and spec is not None
        entry.state = "running"
        entry.started = time.time()
        self.running[entry.id] = entry
        self._publish(entry)
        unsubscribe = agent.subscribe(lambda event: self._event(entry, event))
        response: dict[str, Any] | None = None
        try:
            with anyio.CancelScope() as scope:
                entry.scope = scope
                if entry.cancel is not None:
                    scope.cancel()
                try:
                    response = dict(await agent.run(spec.prompt, **spec.run_kwargs()))
                except anyio.get_cancelled_exc_class():
                    raise
                except Exception as exc:  # run() answers every failure: a bug of ours
                    log.exception("run of request %s raised", entry.id)
                    response = failure_result(
                        0,
                        f"internal error in coding-genesis: {exc!r}",
                        status=Status.INTERNAL,
                        error=ErrorCode.INTERNAL,
                        backend=entry.backend,
                    )
        finally:  # no await: done even when the server itself is cancelled
            unsubscribe()
            entry.scope = None
            if response is None:  # cancelled: what its observers were told
                response = entry.observed or self._cancelled(entry)
            response.pop("index", None)
            self.running.pop(entry.id, None)
            self._finish(entry, response)

    def _cancelled(self, entry: Entry) -> dict[str, Any]:
        return failure_result(
            0,
            f"cancelled ({entry.cancel or 'the server stopped'}) before its run started; "
            "nothing was left running",
            status=Status.CANCELLED,
            error=ErrorCode.CANCELLED,
            backend=entry.backend,
        )

    def _started(self, entry: Entry, run_id: str) -> None:
        """The run's observers start: its id known, before the CLI is spawned."""
        entry.run_id = run_id
        entry.transcript = f"{self.transcripts}/{run_id}" if self.transcripts else None
        self.by_run_id[run_id] = entry.id
        self.journal.write(
            {
                "id": entry.id,
                "state": "running",
                "run_id": run_id,
                "transcript": entry.transcript,
                "started": entry.started,
            },
            entry.redactor,
        )
        self._publish(entry)

    def _event(self, entry: Entry, event: Event) -> None:
        payload = event.to_dict()
        self.hub.publish(
            entry.id, str(payload.get("type") or "event"), {"run": entry.id, **payload}
        )

    def _finish(self, entry: Entry, response: dict[str, Any]) -> None:
        entry.result = self.redactor.deep(response)
        entry.state = "finished"
        entry.finished = time.time()
        entry.agent = None
        entry.spec = None
        entry.observed = None
        duration = (entry.result or {}).get("duration_s")
        if isinstance(duration, int | float) and duration > 0:
            self._mean_duration = 0.8 * self._mean_duration + 0.2 * float(duration)
        self.journal.write(
            {
                "id": entry.id,
                "state": "finished",
                "finished": entry.finished,
                "run_id": entry.run_id,
                "summary": entry.summary(),
            },
            entry.redactor,
        )
        self.answered += 1
        self._publish(entry)
        self.hub.end(entry.id)
        self._finished.append(entry.id)
        while len(self._finished) > KEEP_FINISHED:
            old = self.entries.pop(self._finished.popleft(), None)
            if old is not None and old.run_id:
                self.by_run_id.pop(old.run_id, None)
        if entry.done is not None:
            entry.done.set()
        self._finished_one.set()
        self._finished_one = anyio.Event()

    def _publish(self, entry: Entry) -> None:
        view = self._view(entry)
        self.hub.publish(entry.id, "run", {"type": "run", **view})

    # -- stopping -------------------------------------------------------------------

    def stop_accepting(self) -> None:
        self.accepting = False

    async def drain(self, timeout: float | None, *, cancel: bool) -> None:
        """Take no new request; let the queued and running ones finish (at most
        ``timeout`` seconds), or (``cancel``) cancel them all at once; after
        the timeout, cancel the rest.  Returns with every run answered and
        every process tree gone."""
        self.accepting = False
        if not cancel:
            with anyio.move_on_after(timeout if timeout is not None else math.inf):
                await self.idle()
        self.cancel_all("the server was stopped")
        self._stopping = True
        self._notify()

    async def idle(self) -> None:
        """Until no run is queued or running."""
        while self.pending or self.running:
            await self._finished_one.wait()

    def cancel_all(self, reason: str) -> None:
        for entry in list(self.pending):
            self.cancel(entry, reason)
        for entry in list(self.running.values()):
            self.cancel(entry, reason)
