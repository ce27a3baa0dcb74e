"""What a client asks of the server, whatever carries it: start a run, open a
session.  The HTTP routes (``app.py``, ``session_routes.py``) and the MCP
tools (``genesis mcp``, ``/mcp``) both call these: one path from an
untrusted body to a queued run or an open session
(:mod:`coding_genesis._serve.requests` reads the body), each refusal a
:class:`Problem` that either answers in its own form."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coding_genesis._pipeline.run import run_redactor
from coding_genesis._serve.requests import (
    Refused,
    read_run_request,
    read_session_request,
    read_turn_request,
)
from coding_genesis._serve.runs import Draining, Entry, Full, prompt_head
from coding_genesis._serve.service import Service
from coding_genesis._serve.sessions import Busy, Live, NoRoom

__all__ = ["Problem", "open_session", "send_turn", "start_run"]


@dataclass(frozen=True)
class Problem:
    """Why a request was not taken: its HTTP status, error code and words."""

    status: int
    error: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


def _full(full: Full) -> Problem:
    return Problem(429, "queue_full", str(full), {"Retry-After": str(full.retry_after)})


def start_run(service: Service, body: bytes) -> Entry | Problem:
    """Read ``body`` as a run request (a ``run-many`` line, untrusted unless
    the server trusts its input) and queue it: its entry, or why not."""
    runs = service.runs
    draining = Problem(503, "draining", "the server is shutting down", {"Retry-After": "5"})
    try:
        runs.check_room()
    except Draining:
        return draining
    except Full as full:
        return _full(full)
    key = runs.new_id()
    entry = Entry(id=key, backend="", prompt="", cwd="", model=None, accepted=time.time())
    read = read_run_request(
        body,
        service.rules(),
        owned={"observers": runs.observers(entry)},
        inbox=lambda timeout: service.inbox.approver(
            timeout, lambda _: ({"run": key}, (key,), entry.redactor)
        ),
    )
    if isinstance(read, Refused):
        return Problem(422, "invalid_request", read.message)
    entry.spec, entry.agent, entry.cwd = read.spec, read.agent, read.cwd
    # What the server shows and records of it, masked as its transcript is.
    redactor = entry.redactor = run_redactor(read.agent.config)
    entry.backend = read.spec.backend
    entry.prompt = redactor.text(prompt_head(read.spec.prompt))
    model = (read.spec.model_extra or {}).get("model")
    entry.model = redactor.text(model) if isinstance(model, str) else None
    try:
        runs.add(entry)
    except Draining:
        return draining
    except Full as full:
        return _full(full)
    return entry


def _no_room(why: NoRoom) -> Problem:
    return Problem(429, "sessions_full", str(why), {"Retry-After": "10"})


async def open_session(service: Service, body: bytes, live: Live | None = None) -> Live | Problem:
    """Read ``body`` as a session request and open it (``live``: resume that
    one): the session once open, or why not."""
    sessions = service.sessions
    try:
        sessions.check_room()
    except NoRoom as none_left:
        return _no_room(none_left)
    key = live.id if live is not None else sessions.new_id()
    read = read_session_request(
        body,
        service.rules(),
        inbox=lambda timeout: service.inbox.approver(timeout, sessions.where(key)),
        history=service.session_history,
        resume=live.session_id if live is not None else None,
    )
    if isinstance(read, Refused):
        return Problem(422, "invalid_request", read.message)
    try:
        opened = await sessions.open(key, read, live)
    except NoRoom as none_left:
        return _no_room(none_left)
    except Busy as busy:
        return Problem(409, "open", str(busy))
    if opened.state == "failed":
        return Problem(502, "open_failed", f"the session did not open: {opened.why}"[:2000])
    return opened


def send_turn(service: Service, live: Live, fields: Mapping[str, Any]) -> dict[str, Any] | Problem:
    """Start a turn of ``live`` with ``fields`` (its prompt and the options of
    ``send()``, read under the one untrusted-input list): the turn's summary,
    or why not."""
    read = read_turn_request(fields, service.rules())
    if isinstance(read, Refused):
        return Problem(422, "invalid_request", read.message)
    prompt, timeout = read.pop("prompt"), read.pop("timeout", None)
    try:
        return service.sessions.send(live, prompt, timeout, read)
    except Busy as busy:
        return Problem(409, "busy", str(busy))
