"""The HTTP API: FastAPI routes over the server's parts (see docs/serve.md).

Every route sits behind :class:`~coding_genesis._serve.security.Guard`;
every JSON body is built through a model of :mod:`coding_genesis._serve.models`
and redacted (the environment's secrets and the token) before it is sent.
The routes of live sessions (``session_routes.py``) and of the approval inbox
(``inbox_routes.py``) are added beside the runs', answering through the same
replies (``replies.py``); what a client asks (start a run, open a session)
is ``actions.py``'s, which ``/mcp`` (mounted beside these, behind the same
guard) calls too.
"""

from __future__ import annotations

import itertools
import logging
import math
import traceback
from typing import Annotated, Any

import anyio
from fastapi import FastAPI, Header, Path as PathParam, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response, StreamingResponse

from coding_genesis._observers.runlog import failure_stats, parse_window, usage_stats
from coding_genesis._serve import models
from coding_genesis._serve.actions import Problem, start_run
from coding_genesis._serve.inbox_routes import add_inbox_routes
from coding_genesis._serve.replies import (
    SSE,
    body_schema as _body,
    error as _error,
    errors as _errors,
    json_response as _json,
    problem as _problem,
)
from coding_genesis._serve.security import COOKIE, Identity, cookie_value
from coding_genesis._serve.service import Service
from coding_genesis._serve.session_routes import add_session_routes

__all__ = ["build_app", "openapi_schema"]

log = logging.getLogger("coding_genesis._serve.app")

#: A run named in a path: its request id or run id (a recorded run: a unique prefix).
RunId = Annotated[str, PathParam(min_length=1, max_length=100)]


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

    _add_error_handlers(app, service)
    _add_server_route(app, service)
    _add_run_routes(app, service)
    _add_transcript_route(app, service)
    _add_event_routes(app, service)
    add_session_routes(app, service)
    add_inbox_routes(app, service)
    _add_stats_routes(app, service)
    _add_auth_routes(app, service)
    app.openapi = lambda: openapi_schema(app)  # type: ignore[method-assign]
    return app


def _add_error_handlers(app: FastAPI, service: Service) -> None:
    """Errors in the API's one shape (a body it cannot read, no such route or method)."""

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

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        # A bug of ours: logged here, redacted (the guard keeps the raw
        # traceback from uvicorn's log); the client gets the one error shape.
        trace = "".join(traceback.format_exception(exc))
        log.error(
            "%s %s raised: %s", request.method, request.url.path, service.redactor.text(trace)
        )
        request.state.logged = True
        return _error(
            service, 500, "internal", "internal error in coding-genesis (see the server's log)"
        )


def _add_server_route(app: FastAPI, service: Service) -> None:
    """``GET /server``."""

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


def _add_run_routes(app: FastAPI, service: Service) -> None:
    """The runs: start, list, read, cancel, and a run's transcript."""

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
        started = start_run(service, await request.body())
        if isinstance(started, Problem):
            return _problem(service, started)
        key = started.id
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
        entry = runs.held(run)
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


def _add_transcript_route(app: FastAPI, service: Service) -> None:
    """``GET /runs/{run}/transcript``: a run's transcript, a page at a time."""

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


def _add_event_routes(app: FastAPI, service: Service) -> None:
    """The Server-Sent Events of every run and of one."""

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
        entry = service.runs.held(run)
        if entry is not None and service.hub.has_topic(entry.id):
            return _stream(entry.id, last_event_id)
        view = service.history.find(run)
        if view is None:
            return _error(service, 404, "not_found", f"no run {run[:100]!r}")
        frame = service.hub.final_frame(models.Run.model_validate(view).model_dump(mode="json"))

        async def once() -> Any:
            yield frame

        return StreamingResponse(once(), media_type="text/event-stream")


def _add_stats_routes(app: FastAPI, service: Service) -> None:
    """``GET /stats`` and ``GET /doctor``."""

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
            checks = service.doctor(names, timeout)
            cannot = {c["backend"] for c in checks if c["status"] == "FAIL"}
            return models.Doctor(
                checks=[models.Check(**c) for c in checks],
                can_run={n: n not in cannot for n in names},
            )

        return _json(await anyio.to_thread.run_sync(run), service)


def _add_auth_routes(app: FastAPI, service: Service) -> None:
    """The token exchange of a browser (``/auth/session``)."""

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


def _window(text: str | None) -> float | str | None:
    """A time window in seconds (None: all), or why it is not one."""
    if text is None:
        return None

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
