"""The routes of live sessions (``/sessions``): open, turns, their events,
interrupt, steer, close, resume (see docs/serve.md).  The sessions themselves
are :mod:`coding_genesis._serve.sessions`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import anyio
import orjson
from fastapi import FastAPI, Header, Path as PathParam, Query, Request
from fastapi.responses import Response, StreamingResponse

from coding_genesis._serve import models
from coding_genesis._serve.actions import Problem, open_session, send_turn as start_turn
from coding_genesis._serve.replies import (
    SSE,
    body_schema as _body,
    error as _error,
    errors as _errors,
    json_response as _json,
    problem as _problem,
)
from coding_genesis._serve.security import Identity
from coding_genesis._serve.sessions import Busy, Live

if TYPE_CHECKING:
    from coding_genesis._serve.service import Service

__all__ = ["add_session_routes"]

#: A session named in a path: its id.
SessionId = Annotated[str, PathParam(min_length=1, max_length=100)]


def add_session_routes(app: FastAPI, service: Service) -> None:
    """The session routes of one server's application."""
    _add_opening_routes(app, service)
    _add_turn_routes(app, service)
    _add_control_routes(app, service)


def _add_opening_routes(app: FastAPI, service: Service) -> None:
    """Open a session, list them, read one."""

    @app.post(
        "/sessions",
        status_code=201,
        response_model=None,
        responses={201: {"model": models.SessionView}, **_errors(413, 429, 502, 503)},
        openapi_extra=_body("SessionRequest", required=False),
    )
    async def open_session(request: Request) -> Response:
        """Open a live session (one CLI process across turns): the body is a
        run's settings without a prompt (see SessionRequest). Its tool calls
        wait in the approval inbox unless ``"approvals": "none"``. Answers
        once it is open (201); 502 when its CLI could not open it."""
        return await _open(service, await request.body(), None)

    @app.get(
        "/sessions",
        response_model=None,
        responses={200: {"model": models.SessionList}, **_errors()},
    )
    async def list_sessions(
        state: Annotated[models.SessionState | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Response:
        """The server's sessions, newest first (their turns: GET /sessions/{id})."""
        views = service.sessions.listing(state=state, limit=limit)
        sessions = [models.SessionView.model_validate(v) for v in views]
        return _json(models.SessionList(sessions=sessions), service)

    @app.get(
        "/sessions/{session}",
        response_model=None,
        responses={200: {"model": models.SessionView}, **_errors(404)},
    )
    async def get_session(session: SessionId) -> Response:
        """One session, with its last turns."""
        live = service.sessions.find(session)
        return _no_session(service, session) if live is None else _session_json(service, live)


def _add_turn_routes(app: FastAPI, service: Service) -> None:
    """A session's turns: start one, answer one, and its events."""

    @app.post(
        "/sessions/{session}/turns",
        status_code=202,
        response_model=None,
        responses={202: {"model": models.Turn}, **_errors(404, 409, 413)},
    )
    async def send_turn(session: SessionId, turn: models.TurnRequest) -> Response:
        """Start a turn (202 at once; follow it on GET /sessions/{id}/events,
        or wait for it with GET /sessions/{id}/turns/{n}?wait=S); 409 while
        another turn runs or once the session is closed; 422 for an option
        only --trusted-input accepts. Its model and level hold for the next
        turns; one the backend cannot switch answers the turn 64."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        started = start_turn(service, live, turn.model_dump(exclude_none=True))
        if isinstance(started, Problem):
            return _problem(service, started)
        return _json(models.Turn.model_validate(started), service, 202)

    @app.get(
        "/sessions/{session}/turns/{number}",
        response_model=None,
        responses={200: {"model": models.Turn}, **_errors(404)},
    )
    async def get_turn(
        session: SessionId,
        number: Annotated[int, PathParam(ge=1, le=10**9)],
        wait: Annotated[float, Query(ge=0, le=600, description="wait for its end, s")] = 0,
    ) -> Response:
        """One turn of the session's kept history, with its result once
        finished (``wait``: at most this many seconds for its end)."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        found = next((t for t in live.turns if t["turn"] == number), None)
        if found is None:
            return _error(service, 404, "not_found", f"session {live.id} keeps no turn {number}")
        if found["state"] == "running" and wait > 0 and live.turn_done is not None:
            with anyio.move_on_after(wait):
                await live.turn_done.wait()
        return _json(models.Turn.model_validate(found), service)

    @app.get(
        "/sessions/{session}/events", response_model=None, responses={200: SSE, **_errors(404)}
    )
    async def session_events(
        session: SessionId,
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> Response:
        """The session's events: first a ``session`` event (what it is now),
        then its turns' events (each with ``turn``), its ``approval_request``s,
        a ``turn`` event at each turn's end and a ``session`` event at each
        change; resumable with Last-Event-ID; ends when it closes."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        if live.state in ("opening", "open", "closing") and service.hub.has_topic(live.topic):
            return StreamingResponse(
                service.hub.follow(
                    live.topic,
                    last_event_id,
                    lambda: ("session", {"type": "session", **live.view()}),
                ),
                media_type="text/event-stream",
                headers={"X-Accel-Buffering": "no"},
            )
        frame = service.hub.final_frame(live.view(), "session")

        async def once() -> Any:
            yield frame

        return StreamingResponse(once(), media_type="text/event-stream")


def _add_control_routes(app: FastAPI, service: Service) -> None:
    """Interrupt, steer, close and resume a session."""

    @app.post(
        "/sessions/{session}/interrupt",
        response_model=None,
        responses={200: {"model": models.SessionView}, **_errors(404, 409)},
    )
    async def interrupt_session(session: SessionId) -> Response:
        """End the turn under way (it answers 130 ``interrupted``); the session
        lives on. 409 when no turn runs."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        running = live.running
        if running is None or not await service.sessions.interrupt(live):
            return _error(service, 409, "no_turn", f"session {live.id} has no turn under way")
        if live.turn_done is not None and live.running == running:
            with anyio.move_on_after(30):
                await live.turn_done.wait()
        return _session_json(service, live)

    @app.post(
        "/sessions/{session}/steer",
        response_model=None,
        responses={200: {"model": models.SessionView}, **_errors(404, 409, 413)},
    )
    async def steer_session(session: SessionId, steer: models.SteerRequest) -> Response:
        """Add input to the turn under way (codex); 409 on a backend that
        cannot steer, or when no turn runs."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        try:
            await service.sessions.steer(live, steer.text)
        except Busy as busy:
            return _error(service, 409, "cannot_steer", str(busy))
        return _session_json(service, live)

    @app.post(
        "/sessions/{session}/close",
        response_model=None,
        responses={200: {"model": models.SessionView}, **_errors(404)},
    )
    async def close_session(session: SessionId, request: Request) -> Response:
        """Close the session: its turn ends, its CLI is told goodbye and its
        process tree stopped. A session already ended is answered as it is."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(service, session)
        identity: Identity = request.state.identity
        await service.sessions.close(live, f"closed through the API ({identity.channel})")
        return _session_json(service, live)

    @app.post(
        "/sessions/{session}/resume",
        status_code=201,
        response_model=None,
        responses={201: {"model": models.SessionView}, **_errors(404, 409, 422, 429, 502)},
    )
    async def resume_session(session: SessionId) -> Response:
        """Resume a lost or closed session where its CLI resumes (claude,
        codex, failer): a new CLI process continues its conversation under
        the same session id, its turns listed on. Its settings are read
        again under this server's rules."""
        sessions = service.sessions
        live = sessions.find(session)
        if live is None:
            return _no_session(service, session)
        if live.state in ("opening", "open", "closing"):
            return _error(service, 409, "open", f"session {live.id} is {live.state}")
        if not live.session_id:
            return _error(
                service, 409, "not_resumable", f"session {live.id} has no CLI session id to resume"
            )
        return await _open(service, orjson.dumps(live.data), live)


def _session_json(service: Service, live: Live, status: int = 200) -> Response:
    return _json(models.SessionView.model_validate(live.view()), service, status)


def _no_session(service: Service, ref: str) -> Response:
    return _error(service, 404, "not_found", f"no session {ref[:100]!r}")


async def _open(service: Service, body: bytes, live: Live | None) -> Response:
    opened = await open_session(service, body, live)
    if isinstance(opened, Problem):
        return _problem(service, opened)
    return _session_json(service, opened, 201)
