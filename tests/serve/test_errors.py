"""A bug of the server (a route that raises) answers a JSON 500 in the API's one
error shape, with no traceback or secret in it, and is logged redacted; a
``Content-Length`` that is no number is a bad request (400), not a large one.
In this process: the server's app behind its guard, one service method made
to raise (what no real request can make it do)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from coding_genesis._serve.app import build_app
from coding_genesis._serve.security import Guard
from coding_genesis._util.redact import Redactor
from tests.serve.schema import in_process_service
from tests.serve.support import Served

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-test-internal-0123456789"
TOKEN = "t" * 43


def _guarded(tmp: Path) -> tuple[Guard, Any]:
    service = in_process_service(str(tmp), Redactor({"GENESIS_TEST_API_KEY": SECRET}))
    guard = Guard(build_app(service), token=TOKEN, hosts=frozenset({"test"}), max_body=1024)
    return guard, service


@pytest.mark.anyio
async def test_an_unexpected_exception_answers_a_json_500_and_is_logged_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard, service = _guarded(tmp_path)

    def broken(**_kwargs: Any) -> list[dict[str, Any]]:
        raise RuntimeError(f"boom with {SECRET}")

    monkeypatch.setattr(service.inbox, "listing", broken)
    transport = httpx.ASGITransport(app=guard)  # raises what the guard lets through
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", headers=headers
    ) as client:
        with caplog.at_level(logging.ERROR, logger="coding_genesis._serve"):
            response = await client.get("/approvals")
        assert response.status_code == 500, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {
            "error": "internal",
            "message": "internal error in coding-genesis (see the server's log)",
        }
        assert SECRET not in response.text and "Traceback" not in response.text
        # The server goes on answering.
        assert (await client.get("/approvals/0123abcd")).status_code == 404
    logged = [r.getMessage() for r in caplog.records if r.name == "coding_genesis._serve.app"]
    assert len(logged) == 1 and "GET /approvals raised" in logged[0]
    assert "RuntimeError: boom with [REDACTED]" in logged[0] and "Traceback" in logged[0]
    assert SECRET not in caplog.text


@pytest.mark.anyio
async def test_a_content_length_that_is_no_number_is_a_bad_request(tmp_path: Path) -> None:
    guard, _service = _guarded(tmp_path)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    for length, status, error in ((b"12abc", 400, "invalid_request"), (b"2048", 413, "too_large")):
        sent.clear()
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/runs",
            "query_string": b"",
            "headers": [
                (b"host", b"test"),
                (b"authorization", f"Bearer {TOKEN}".encode()),
                (b"content-length", length),
            ],
        }
        await guard(scope, receive, send)
        assert sent[0]["status"] == status, sent
        assert orjson.loads(sent[1]["body"])["error"] == error


@pytest.mark.slow
def test_a_served_content_length_that_is_no_number_is_a_bad_request(served: Served) -> None:
    """On the wire (whichever layer sees it first): 400, never 413."""
    host, port = served.host.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST /runs HTTP/1.1\r\nHost: {served.host}\r\n"
            f"Authorization: Bearer {served.token}\r\nContent-Length: 12abc\r\n\r\n{{}}".encode()
        )
        head = sock.recv(4096).split(b"\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 400 "), head
