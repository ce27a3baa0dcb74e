"""The API's answers, written once for every router: JSON built through a
model and redacted, the one error shape, a route's body and errors in the
schema, and the schema's text of an event stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi.responses import Response
from pydantic import BaseModel

from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._serve import models

if TYPE_CHECKING:
    from coding_genesis._serve.actions import Problem
    from coding_genesis._serve.service import Service

__all__ = ["SSE", "body_schema", "error", "errors", "json_response", "problem"]

#: Text of the SSE responses in the schema.
SSE = {
    "description": "Server-Sent Events (text/event-stream): one `id:`, `event:` (the "
    "event's type: run, state, run_started, text, tool_call, ..., missed, closing) and "
    "`data:` (a JSON object) per event; resumable with Last-Event-ID",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


def json_response(
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


def error(
    service: Service,
    status: int,
    error: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> Response:
    return json_response(models.Error(error=error, message=message), service, status, headers)


def problem(service: Service, problem: Problem) -> Response:
    """A request not taken (:class:`~coding_genesis._serve.actions.Problem`), answered."""
    return error(service, problem.status, problem.error, problem.message, problem.headers)


def body_schema(model: str, *, required: bool) -> dict[str, Any]:
    """A route's JSON body in the schema, read by the route itself (as data)."""
    ref = {"$ref": f"#/components/schemas/{model}"}
    content = {"application/json": {"schema": ref}}
    return {"requestBody": {"required": required, "content": content}}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    # 400: a body that is no JSON, or an unknown X-Genesis-Channel (the guard)
    return {code: {"model": models.Error} for code in (*codes, 400, 401, 403, 421, 422)}
