"""A server's settings and its parts, whatever carries its requests.

``genesis serve`` (HTTP, :mod:`coding_genesis._serve.server`) and ``genesis
mcp`` on stdio build the same parts here: the hub, the journals and what an
earlier start left in them, the queue of runs, the live sessions, the
approval inbox and the history, in one :class:`~coding_genesis._serve.service.Service`.
Nothing here imports FastAPI or uvicorn: a server without HTTP needs neither.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coding_genesis._serve.history import History, entry_view, recover
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.inbox import Inbox, recover as recover_approvals
from coding_genesis._serve.journal import Journal
from coding_genesis._serve.runs import Runs
from coding_genesis._serve.service import Doctor, Mount, Service
from coding_genesis._serve.sessions import Sessions, recover as recover_sessions
from coding_genesis._util.files import FILE_FLAGS, private_dir
from coding_genesis._util.redact import Redactor

__all__ = ["Built", "Settings", "build", "locked"]


@dataclass(frozen=True)
class Settings:
    """A server's settings, as the command line read them (``host`` to
    ``heartbeat``: HTTP's alone)."""

    host: str
    port: int
    root: str
    state_dir: Path
    trusted: bool
    concurrency: int
    queue: int
    max_body: int
    drain_timeout: float
    on_term: Literal["drain", "cancel"]
    fallback_backend: str
    defaults: dict[str, Any]
    transcripts: Path | None
    run_log: Path | None
    ledger: str | bool | None
    version: str
    #: ``GET /doctor``: the command line's checks (``Service.doctor``).
    doctor: Doctor
    token: str | None = None
    allow_hosts: tuple[str, ...] = ()
    heartbeat: float = 15.0
    #: An approval of the inbox waits this long unless its request sets another.
    approval_timeout: float = 300.0
    #: ``request`` or ``inbox`` (``--approvals``).
    approvals: str = "request"
    #: Sessions held at once, and the most turns one keeps.
    max_sessions: int = 16
    session_history: int = 1000
    event_buffer: int = 10_000
    doctor_backends: list[str] = field(default_factory=list)
    #: Each backend's CLI as the command line finds it (``Rules.cli_paths``).
    cli_paths: dict[str, dict[str, str]] = field(default_factory=dict)
    #: What else the server serves beside its routes (``/mcp``), made of its
    #: parts: handed down by the command line, which knows the extras.
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class Built:
    """The parts, and what the journals showed unfinished at start."""

    service: Service
    lost_runs: int
    lost_sessions: int
    expired: int


async def build(settings: Settings, token: str) -> Built:
    """The server's parts over its state directory (which the caller holds locked)."""
    redactor = Redactor.of_environment({"GENESIS_SERVE_TOKEN": token})
    hub = Hub(
        redactor,
        keep=settings.event_buffer,
        keep_per_topic=min(settings.event_buffer, 2_000),
    )
    journal = Journal(settings.state_dir / "journal.jsonl", redactor)
    past, lost = await recover(journal, settings.transcripts, settings.ledger)
    approvals = Journal(settings.state_dir / "approvals.jsonl", redactor)
    asked, expired = recover_approvals(approvals)
    inbox = Inbox(hub, approvals, redactor, asked)
    session_journal = Journal(settings.state_dir / "sessions.jsonl", redactor)
    held, lost_sessions = recover_sessions(session_journal)
    sessions = Sessions(
        hub,
        session_journal,
        redactor,
        limit=settings.max_sessions,
        past=held,
    )
    runs: Runs

    def view(entry: Any) -> dict[str, Any]:
        return entry_view(entry, runs)

    runs = Runs(
        hub,
        journal,
        redactor,
        concurrency=settings.concurrency,
        queue=settings.queue,
        transcripts=str(settings.transcripts) if settings.transcripts is not None else None,
        view=view,
    )
    history = History(runs, past, settings.transcripts)
    service = Service(
        root=settings.root,
        trusted=settings.trusted,
        defaults=settings.defaults,
        fallback_backend=settings.fallback_backend,
        version=settings.version,
        run_log=settings.run_log,
        hub=hub,
        runs=runs,
        history=history,
        redactor=redactor,
        token=token,
        inbox=inbox,
        sessions=sessions,
        approval_timeout=settings.approval_timeout,
        approvals=settings.approvals,
        session_history=settings.session_history,
        doctor_backends=settings.doctor_backends,
        cli_paths=settings.cli_paths,
        doctor=settings.doctor,
    )
    return Built(service, lost, lost_sessions, expired)


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """One server per state directory (its journal and token are its own)."""
    private_dir(state_dir)
    fd = os.open(state_dir / "lock", FILE_FLAGS, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(
                f"another genesis serve uses {state_dir} (or a genesis mcp); stop it, or give this one "
                "another --state-dir"
            ) from None
        yield
    finally:
        os.close(fd)
