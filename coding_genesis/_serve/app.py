"""The HTTP API: FastAPI routes over the server's parts (see docs/serve.md).

Every route sits behind :class:`~coding_genesis._serve.security.Guard`;
every JSON body is built through a model of :mod:`coding_genesis._serve.models`
and redacted (the environment's secrets and the token) before it is sent.
Live sessions (``/sessions``) and the approval inbox (``/approvals``) sit
beside the runs; ``/mcp`` will add its router beside these: the guard, the
hub and the journals are its too.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import orjson
from fastapi import FastAPI, Header, Path as PathParam, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._serve import models
from coding_genesis._serve.history import History
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.inbox import TOPIC as INBOX, Inbox, Refusal
from coding_genesis._serve.requests import (
    Refused,
    Rules,
    read_run_request,
    read_session_request,
)
from coding_genesis._serve.runs import Draining, Entry, Full, Runs, prompt_head
from coding_genesis._serve.security import COOKIE, Identity, cookie_value
from coding_genesis._serve.sessions import Busy, Live, NoRoom, Sessions
from coding_genesis._util.redact import Redactor

__all__ = ["Service", "build_app", "openapi_schema"]

#: Text of the SSE responses in the schema.
SSE = {
    "description": "Server-Sent Events (text/event-stream): one `id:`, `event:` (the "
    "event's type: run, state, run_started, text, tool_call, ..., missed, closing) and "
    "`data:` (a JSON object) per event; resumable with Last-Event-ID",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


#: A run named in a path: its request id or run id (a recorded run: a unique prefix).
RunId = Annotated[str, PathParam(min_length=1, max_length=100)]
#: An approval named in a path: its id (to read it: a unique prefix of at least 4).
ApprovalId = Annotated[str, PathParam(min_length=1, max_length=100)]
#: A session named in a path: its id.
SessionId = Annotated[str, PathParam(min_length=1, max_length=100)]


@dataclass
class Service:
    """Everything a route needs: the settings and the server's parts."""

    root: str
    trusted: bool
    defaults: Mapping[str, Any]
    fallback_backend: str
    version: str
    run_log: Path | None
    hub: Hub
    runs: Runs
    history: History
    redactor: Redactor
    token: str
    inbox: Inbox
    sessions: Sessions
    approval_timeout: float = 300.0
    #: ``request`` (a body chooses) or ``inbox`` (every call waits in the inbox).
    approvals: str = "request"
    #: The most turns a session of the server keeps.
    session_history: int = 1000
    doctor_backends: list[str] = field(default_factory=list)

    def rules(self) -> Rules:
        """What every request is read under."""
        return Rules(
            self.trusted,
            self.root,
            self.defaults,
            self.fallback_backend,
            self.approval_timeout,
            self.approvals,
        )


def _json(
    model: BaseModel | Mapping[str, Any],
    service: Service,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Response:
    data = model.model_dump(mode="json", by_alias=True) if isinstance(model, BaseModel) else model
    return Response(
        safe_dumps(service.redactor.deep(data)),
        status_code=status,
        media_type="application/json",
        headers=dict(headers or {}),
    )


def _error(
    service: Service,
    status: int,
    error: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> Response:
    return _json(models.Error(error=error, message=message), service, status, headers)


def _body(model: str, *, required: bool) -> dict[str, Any]:
    """A route's JSON body in the schema, read by the route itself (as data)."""
    ref = {"$ref": f"#/components/schemas/{model}"}
    content = {"application/json": {"schema": ref}}
    return {"requestBody": {"required": required, "content": content}}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    # 400: a body that is no JSON, or an unknown X-Genesis-Channel (the guard)
    return {code: {"model": models.Error} for code in (*codes, 400, 401, 403, 421, 422)}


def build_app(service: Service) -> FastAPI:
    """The FastAPI application of one server."""
    app = FastAPI(
        title="coding-genesis",
        version=service.version,
        summary="Runs of coding-agent CLIs over HTTP and Server-Sent Events",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> Response:
        words = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}"
            for err in exc.errors()
        )
        return _error(service, 422, "invalid_request", words[:2000] or "invalid request")

    @app.exception_handler(400)
    async def unreadable(_request: Request, _exc: Exception) -> Response:
        return _error(service, 400, "invalid_request", "the body could not be read as JSON")

    @app.exception_handler(404)
    async def missing(_request: Request, _exc: Exception) -> Response:
        return _error(service, 404, "not_found", "no such route (see GET /openapi.json)")

    @app.exception_handler(405)
    async def method(_request: Request, _exc: Exception) -> Response:
        return _error(service, 405, "method_not_allowed", "this route takes another method")

    # -- the server -------------------------------------------------------------------

    @app.get(
        "/server", response_model=None, responses={200: {"model": models.ServerInfo}, **_errors()}
    )
    async def server(request: Request) -> Response:
        """What this server is and holds."""
        runs = service.runs
        identity: Identity = request.state.identity
        info = models.ServerInfo(
            version=service.version,
            boot=service.hub.boot,
            root=service.root,
            trusted_input=service.trusted,
            accepting=runs.accepting,
            queue=models.QueueInfo(
                size=runs.queue_size,
                queued=len(runs.pending),
                running=len(runs.running),
                concurrency=runs.concurrency,
            ),
            identity={"name": identity.name, "via": identity.via, "channel": identity.channel},
            answered=runs.answered,
            sessions=len(service.sessions.held),
            approvals_pending=len(service.inbox.pending),
        )
        return _json(info, service)

    # -- runs ----------------------------------------------------------------------------

    @app.post(
        "/runs",
        status_code=202,
        response_model=None,
        responses={202: {"model": models.Run}, **_errors(413, 429, 503)},
        openapi_extra=_body("RunRequest", required=True),
    )
    async def create_run(request: Request) -> Response:
        """Start a run: the body is one ``genesis run-many`` line (see RunRequest).
        Answers at once (202) with the queued run; 429 with Retry-After when the
        queue is full."""
        runs = service.runs
        try:
            runs.check_room()
        except Draining:
            return _error(
                service, 503, "draining", "the server is shutting down", {"Retry-After": "5"}
            )
        except Full as full:
            return _error(
                service, 429, "queue_full", str(full), {"Retry-After": str(full.retry_after)}
            )
        body = await request.body()
        key = runs.new_id()
        entry = Entry(id=key, backend="", prompt="", cwd="", model=None, accepted=time.time())
        read = read_run_request(
            body,
            service.rules(),
            owned={"observers": runs.observers(entry)},
            inbox=lambda timeout: service.inbox.approver(timeout, lambda _: ({"run": key}, (key,))),
        )
        if isinstance(read, Refused):
            return _error(service, 422, "invalid_request", read.message)
        entry.spec, entry.agent, entry.cwd = read.spec, read.agent, read.cwd
        entry.backend = read.spec.backend
        entry.prompt = prompt_head(read.spec.prompt)
        model = (read.spec.model_extra or {}).get("model")
        entry.model = model if isinstance(model, str) else None
        try:
            runs.add(entry)
        except Draining:
            return _error(service, 503, "draining", "the server is shutting down")
        except Full as full:
            return _error(
                service, 429, "queue_full", str(full), {"Retry-After": str(full.retry_after)}
            )
        view = service.history.find(key)
        assert view is not None
        return _json(models.Run.model_validate(view), service, 202, {"Location": f"/runs/{key}"})

    @app.get("/runs", response_model=None, responses={200: {"model": models.RunList}, **_errors()})
    async def list_runs(
        state: Annotated[models.RunState | None, Query()] = None,
        backend: Annotated[str | None, Query(max_length=100)] = None,
        source: Annotated[str | None, Query(pattern="^(api|cli)$")] = None,
        failed: Annotated[bool | None, Query()] = None,
        since: Annotated[str | None, Query(max_length=20, description="24h, 7d, all")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> Response:
        """Runs, newest first: this server's requests and every recorded run
        (the history `genesis runs` shows)."""
        window = _window(since)
        if isinstance(window, str):
            return _error(service, 422, "invalid_request", window)
        views = await service.history.listing(
            state=state,
            backend=backend,
            source=source,
            failed=failed,
            since=window,
            limit=limit,
        )
        return _json(models.RunList(runs=[models.Run.model_validate(v) for v in views]), service)

    @app.get(
        "/runs/{run}", response_model=None, responses={200: {"model": models.Run}, **_errors(404)}
    )
    async def get_run(run: RunId) -> Response:
        """One run by request id or run id, with its result once finished."""
        view = service.history.find(run)
        if view is None:
            return _error(service, 404, "not_found", f"no run {run[:100]!r}")
        return _json(models.Run.model_validate(view), service)

    @app.post(
        "/runs/{run}/cancel",
        response_model=None,
        responses={200: {"model": models.Run}, **_errors(404, 409)},
    )
    async def cancel_run(run: RunId, request: Request) -> Response:
        """Cancel a queued or running run of this server: its process tree is
        stopped, its answer is status 130 ``cancelled``."""
        runs = service.runs
        key = run if run in runs.entries else runs.by_run_id.get(run)
        entry = runs.entries.get(key) if key is not None else None
        if entry is None:
            known = service.history.find(run) is not None
            return _error(
                service,
                409 if known else 404,
                "not_cancellable" if known else "not_found",
                "that run is not held by this server (finished or lost)"
                if known
                else f"no run {run[:100]!r}",
            )
        identity: Identity = request.state.identity
        if not runs.cancel(entry, f"cancelled through the API ({identity.via})"):
            return _error(service, 409, "not_cancellable", "that run has finished")
        if entry.done is not None:
            with anyio.move_on_after(30):  # its tree stopped: the answer is final
                await entry.done.wait()
        view = service.history.find(entry.id)
        assert view is not None
        return _json(models.Run.model_validate(view), service)

    @app.get(
        "/runs/{run}/transcript",
        response_model=None,
        responses={200: {"model": models.Transcript}, **_errors(404)},
    )
    async def transcript(
        run: RunId,
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    ) -> Response:
        """The run's recorded events (a page of them), result and stderr tail."""
        view = service.history.find(run)
        if view is None:
            return _error(service, 404, "not_found", f"no run {run[:100]!r}")
        record = service.history.record(view.get("run_id"))
        if record is None:
            return _error(
                service,
                404,
                "not_found",
                "that run has no transcript (not started yet, or transcripts are off)",
            )

        def read() -> models.Transcript:
            # lazy: the registry loads every backend
            from coding_genesis.backends import translator_for

            page = []
            events = record.timed_events(translator_for)
            for event, estimated in itertools.islice(events, offset, offset + limit + 1):
                line = event.to_dict()
                if estimated:
                    line["ts_estimated"] = True
                page.append(line)
            more = len(page) > limit
            return models.Transcript(
                run_id=record.run_id,
                meta=record.meta,
                events=page[:limit],
                offset=offset,
                next_offset=offset + limit if more else None,
                result=record.result,
                ended=record.ended,
                stderr_tail=record.stderr()[-65536:],
                damaged=list(record.damaged),
            )

        return _json(await anyio.to_thread.run_sync(read), service)

    # -- events -----------------------------------------------------------------------------

    def _stream(topic: str | None, last_event_id: str | None) -> StreamingResponse:
        return StreamingResponse(
            service.hub.follow(topic, last_event_id),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    @app.get("/events", response_model=None, responses={200: SSE, **_errors()})
    async def events(
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> StreamingResponse:
        """Every event of every run from now on (after Last-Event-ID's when given)."""
        return _stream(None, last_event_id)

    @app.get("/runs/{run}/events", response_model=None, responses={200: SSE, **_errors(404)})
    async def run_events(
        run: RunId,
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> Response:
        """One run's events from its first (after Last-Event-ID's when given);
        the stream ends with the run (its last event: ``run``, state finished)."""
        runs = service.runs
        key = run if run in runs.entries else runs.by_run_id.get(run)
        if key is not None and service.hub.has_topic(key):
            return _stream(key, last_event_id)
        view = service.history.find(run)
        if view is None:
            return _error(service, 404, "not_found", f"no run {run[:100]!r}")
        frame = service.hub.final_frame(models.Run.model_validate(view).model_dump(mode="json"))

        async def once() -> Any:
            yield frame

        return StreamingResponse(once(), media_type="text/event-stream")

    # -- live sessions --------------------------------------------------------------------

    def _session_json(live: Live, status: int = 200) -> Response:
        return _json(models.SessionView.model_validate(live.view()), service, status)

    def _no_room(why: NoRoom) -> Response:
        return _error(service, 429, "sessions_full", str(why), {"Retry-After": "10"})

    def _no_session(ref: str) -> Response:
        return _error(service, 404, "not_found", f"no session {ref[:100]!r}")

    async def _open(body: bytes, live: Live | None) -> Response:
        sessions = service.sessions
        key = live.id if live is not None else sessions.new_id()
        read = read_session_request(
            body,
            service.rules(),
            inbox=lambda timeout: service.inbox.approver(timeout, sessions.where(key)),
            history=service.session_history,
            resume=live.session_id if live is not None else None,
        )
        if isinstance(read, Refused):
            return _error(service, 422, "invalid_request", read.message)
        try:
            opened = await sessions.open(key, read, live)
        except NoRoom as none_left:
            return _no_room(none_left)
        except Busy as busy:
            return _error(service, 409, "open", str(busy))
        if opened.state == "failed":
            return _error(
                service, 502, "open_failed", f"the session did not open: {opened.why}"[:2000]
            )
        return _session_json(opened, 201)

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
        try:
            service.sessions.check_room()
        except NoRoom as none_left:
            return _no_room(none_left)
        return await _open(await request.body(), None)

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
        return _no_session(session) if live is None else _session_json(live)

    @app.post(
        "/sessions/{session}/turns",
        status_code=202,
        response_model=None,
        responses={202: {"model": models.Turn}, **_errors(404, 409, 413)},
    )
    async def send_turn(session: SessionId, turn: models.TurnRequest) -> Response:
        """Start a turn (202 at once; follow it on GET /sessions/{id}/events,
        or wait for it with GET /sessions/{id}/turns/{n}?wait=S); 409 while
        another turn runs or once the session is closed."""
        live = service.sessions.find(session)
        if live is None:
            return _no_session(session)
        try:
            started = service.sessions.send(live, turn.prompt, turn.timeout)
        except Busy as busy:
            return _error(service, 409, "busy", str(busy))
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
            return _no_session(session)
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
            return _no_session(session)
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
            return _no_session(session)
        running = live.running
        if running is None or not await service.sessions.interrupt(live):
            return _error(service, 409, "no_turn", f"session {live.id} has no turn under way")
        if live.turn_done is not None and live.running == running:
            with anyio.move_on_after(30):
                await live.turn_done.wait()
        return _session_json(live)

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
            return _no_session(session)
        try:
            await service.sessions.steer(live, steer.text)
        except Busy as busy:
            return _error(service, 409, "cannot_steer", str(busy))
        return _session_json(live)

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
            return _no_session(session)
        identity: Identity = request.state.identity
        await service.sessions.close(live, f"closed through the API ({identity.channel})")
        return _session_json(live)

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
            return _no_session(session)
        if live.state in ("opening", "open", "closing"):
            return _error(service, 409, "open", f"session {live.id} is {live.state}")
        if not live.session_id:
            return _error(
                service, 409, "not_resumable", f"session {live.id} has no CLI session id to resume"
            )
        try:
            sessions.check_room()
        except NoRoom as none_left:
            return _no_room(none_left)
        return await _open(orjson.dumps(live.data), live)

    # -- the approval inbox -----------------------------------------------------------------

    @app.get(
        "/approvals",
        response_model=None,
        responses={200: {"model": models.ApprovalList}, **_errors()},
    )
    async def list_approvals(
        state: Annotated[models.ApprovalState | Literal["all"], Query()] = "pending",
        run: Annotated[str | None, Query(max_length=100)] = None,
        session: Annotated[str | None, Query(max_length=100)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Response:
        """The approvals of the inbox, newest first: pending ones by default,
        and (``state``) the settled ones, this start's and earlier starts';
        ``run`` or ``session``: only those it asked."""
        views = service.inbox.listing(
            state=None if state == "all" else state, run=run, session=session, limit=limit
        )
        approvals = [models.Approval.model_validate(v) for v in views]
        return _json(models.ApprovalList(approvals=approvals), service)

    @app.get("/approvals/events", response_model=None, responses={200: SSE, **_errors()})
    async def approval_events(
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> StreamingResponse:
        """The inbox as it changes: first an ``inbox`` event (what is pending
        now), then an ``approval_request`` event each time an approval is asked
        or settled (answered, expired, withdrawn); resumable with Last-Event-ID."""
        return StreamingResponse(
            service.hub.follow(INBOX, last_event_id, service.inbox.snapshot),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    @app.get(
        "/approvals/{approval}",
        response_model=None,
        responses={200: {"model": models.Approval}, **_errors(404, 409)},
    )
    async def get_approval(approval: ApprovalId) -> Response:
        """One approval by its id, or a unique prefix of it (4 characters or more)."""
        try:
            view = service.inbox.find(approval)
        except Refusal as refusal:
            return _error(service, 409, refusal.error, refusal.message)
        if view is None:
            return _error(service, 404, "not_found", f"no approval {approval[:100]!r}")
        return _json(models.Approval.model_validate(view), service)

    @app.post(
        "/approvals/{approval}",
        response_model=None,
        responses={200: {"model": models.Approval}, **_errors(404, 409, 413)},
    )
    async def answer_approval(
        approval: ApprovalId, answer: models.Answer, request: Request
    ) -> Response:
        """Answer a pending approval by its full id: allow, allow_always or deny
        (with a message). The first answer wins; an answer to one already
        answered, expired (its deadline passed, or the server restarted) or
        withdrawn is refused (409) with what happened instead. Recorded with
        the caller's channel (the X-Genesis-Channel header: api, cli,
        dashboard) and name (``by``)."""
        identity: Identity = request.state.identity
        try:
            view = service.inbox.answer(
                approval,
                allow=answer.decision != "deny",
                always=answer.decision == "allow_always",
                message=answer.message,
                end_turn=answer.end_turn,
                by=answer.by,
                channel=identity.channel,
                via=identity.via,
            )
        except Refusal as refusal:
            status = 404 if refusal.error == "not_found" else 409
            return _error(service, status, refusal.error, refusal.message)
        return _json(models.Approval.model_validate(view), service)

    # -- stats and doctor -------------------------------------------------------------------

    @app.get(
        "/stats", response_model=None, responses={200: {"model": models.Stats}, **_errors(404)}
    )
    async def stats(
        since: Annotated[str, Query(max_length=20, description="30m, 24h, 7d, all")] = "24h",
        backend: Annotated[str | None, Query(max_length=100)] = None,
    ) -> Response:
        """Failures by category, and runs, tokens and cost by backend and by day (UTC)."""
        window = _window(since)
        if isinstance(window, str):
            return _error(service, 422, "invalid_request", window)
        log = service.run_log
        if log is None:
            return _error(service, 404, "not_found", "the run log is off (GENESIS_RUN_LOG=off)")

        def read() -> models.Stats:
            from coding_genesis._observers.runlog import failure_stats, usage_stats

            failures = failure_stats(log, since_s=window, backend=backend)
            by_backend = usage_stats(log, since_s=window, backend=backend, by="backend")
            by_day = usage_stats(log, since_s=window, backend=backend, by="day")
            return models.Stats.model_validate(
                {
                    **{k: v for k, v in failures.items() if k != "by_backend"},
                    "total": by_backend["total"],
                    "by_backend": by_backend["groups"],
                    "by_day": by_day["groups"],
                }
            )

        return _json(await anyio.to_thread.run_sync(read), service)

    @app.get("/doctor", response_model=None, responses={200: {"model": models.Doctor}, **_errors()})
    async def doctor(
        backend: Annotated[list[str] | None, Query(max_length=20)] = None,
        timeout: Annotated[float, Query(gt=0, le=60)] = 15.0,
    ) -> Response:
        """``genesis doctor``: can each backend run on this machine, and if not, why."""
        known = service.doctor_backends
        names = list(dict.fromkeys(backend or known))
        unknown = [n for n in names if n not in known]
        if unknown:
            return _error(
                service,
                422,
                "invalid_request",
                f"unknown backend(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}",
            )

        def run() -> models.Doctor:
            from coding_genesis._cli.doctor import run_checks

            checks = run_checks(names, None, timeout)
            cannot = {c.backend for c in checks if c.status == "FAIL"}
            return models.Doctor(
                checks=[models.Check(**asdict(c)) for c in checks],
                can_run={n: n not in cannot for n in names},
            )

        return _json(await anyio.to_thread.run_sync(run), service)

    # -- the token exchange ----------------------------------------------------------------

    @app.post(
        "/auth/session",
        status_code=204,
        response_model=None,
        responses={204: {"description": "the cookie is set"}, **_errors()},
    )
    async def login() -> Response:
        """For a browser: the cookie that stands for the token (HttpOnly,
        SameSite=Strict). A write with it needs the X-Genesis-CSRF header."""
        response = Response(status_code=204)
        response.set_cookie(
            COOKIE, cookie_value(service.token), httponly=True, samesite="strict", path="/"
        )
        return response

    @app.delete(
        "/auth/session",
        status_code=204,
        response_model=None,
        responses={204: {"description": "the cookie is cleared"}, **_errors()},
    )
    async def logout() -> Response:
        """Clear the cookie."""
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", path="/")
        return response

    app.openapi = lambda: openapi_schema(app)  # type: ignore[method-assign]
    return app


def _window(text: str | None) -> float | str | None:
    """A time window in seconds (None: all), or why it is not one."""
    if text is None:
        return None
    from coding_genesis._observers.runlog import parse_window

    try:
        value = parse_window(text)
    except ValueError as exc:
        return str(exc)
    return value if value is None or math.isfinite(value) else "the time window is too long"


def openapi_schema(app: FastAPI) -> dict[str, Any]:
    """The schema: FastAPI's, with the request body's model and the token."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version="1",
        summary=app.summary,
        description="The API of `genesis serve` (docs/serve.md). Every route needs the "
        "server's token: `Authorization: Bearer TOKEN`, or the cookie of POST /auth/session "
        "(a write with the cookie also needs the X-Genesis-CSRF header).",
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for model in (models.RunRequest, models.SessionRequest):
        schemas[model.__name__] = model.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer"},
        "cookie": {"type": "apiKey", "in": "cookie", "name": COOKIE},
    }
    schema["security"] = [{"bearer": []}, {"cookie": []}]
    app.openapi_schema = schema
    return schema
