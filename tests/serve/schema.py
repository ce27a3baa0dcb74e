"""``python -m tests.serve.schema > docs/openapi.json``: the API's schema, as
the server generates it from its models (tests/serve/test_routes.py holds the
committed file to what a server serves)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import anyio

from coding_genesis._serve.app import build_app, openapi_schema
from coding_genesis._serve.history import History, entry_view
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.inbox import Inbox
from coding_genesis._serve.journal import Journal
from coding_genesis._serve.runs import Runs
from coding_genesis._serve.service import Service
from coding_genesis._serve.sessions import Sessions
from coding_genesis._util.redact import Redactor


def _unused(names: list[str], timeout: float) -> list[dict[str, object]]:
    raise AssertionError("the doctor is not asked in this process")


def in_process_service(tmp: str, redactor: Redactor) -> Service:
    """A server's service built in this process (call it on an event loop):
    for the schema, and for a test that makes a route fail on purpose."""
    hub = Hub(redactor)
    runs: Runs = Runs(
        hub,
        Journal(Path(tmp) / "journal.jsonl", redactor),
        redactor,
        concurrency=1,
        queue=1,
        transcripts=None,
        view=lambda entry: entry_view(entry, runs),
    )
    return Service(
        root=tmp,
        trusted=False,
        defaults={},
        fallback_backend="failer",
        version="0",
        run_log=None,
        hub=hub,
        runs=runs,
        history=History(runs, {}, None),
        redactor=redactor,
        token="x" * 32,
        inbox=Inbox(hub, Journal(Path(tmp) / "approvals.jsonl", redactor), redactor),
        sessions=Sessions(hub, Journal(Path(tmp) / "sessions.jsonl", redactor), redactor, limit=1),
        doctor=_unused,
    )


async def schema() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        return openapi_schema(build_app(in_process_service(tmp, Redactor({}))))


if __name__ == "__main__":
    json.dump(anyio.run(schema), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
