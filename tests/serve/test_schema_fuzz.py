"""schemathesis against the served schema: generated requests to every JSON route
(the event streams never end and are tested on their own; the doctor runs each CLI
and is tested on its own) get no 5xx and no response that breaks the schema.
Bounded: a few dozen examples per route, no deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The test extra installs schemathesis; without it this module skips, saying so, and the
# imports below (hence E402) come after that check.
schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serve.support import ROOT, Served, serving  # noqa: E402

SCHEMA = ROOT / "docs" / "openapi.json"

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

#: Examples per route (each a real request to a real server).
EXAMPLES = 40


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    with serving(tmp, "--concurrency", "4", "--queue", "20", "--on-term", "cancel") as server:
        yield server


#: The operations fuzzed: every JSON route of the committed schema.
RAW = json.loads(SCHEMA.read_text())
OPERATIONS = sorted(
    f"{method.upper()} {path}"
    for path, methods in RAW["paths"].items()
    for method in methods
    if not path.endswith("/events") and path != "/doctor"
)


@pytest.fixture(autouse=True)
def settled(fuzzed: Served) -> Iterator[None]:
    """Each test ends with no run or session of the server going (the suite's
    leak check)."""
    yield
    with fuzzed.client() as client:
        for session in client.get("/sessions", params={"limit": 1000}).json()["sessions"]:
            if session["state"] in ("opening", "open", "closing"):
                client.post(f"/sessions/{session['id']}/close")
        for _ in range(200):
            held = [
                r
                for r in client.get("/runs", params={"source": "api", "limit": 1000}).json()["runs"]
                if r["state"] in ("queued", "running")
            ]
            if not held:
                return
            for run in held:
                client.post(f"/runs/{run['id']}/cancel")
            time.sleep(0.05)


@pytest.mark.parametrize("label", OPERATIONS)
@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_server_error_and_no_response_outside_the_schema(
    fuzzed: Served, label: str, mode: str
) -> None:
    with fuzzed.client() as client:
        served_schema = client.get("/openapi.json").json()
    assert served_schema == RAW, "the served schema is the committed one"
    schema = schemathesis.openapi.from_dict(served_schema)
    schema.config.update(base_url=fuzzed.url)
    method, path = label.split(" ", 1)
    operation = schema[path][method]
    strategy = operation.as_strategy(
        generation_mode=GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    )
    headers = {"Authorization": f"Bearer {fuzzed.token}"}

    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def call(case: Any) -> None:
        case.call_and_validate(
            headers=headers,
            checks=[
                not_a_server_error,
                response_schema_conformance,
                status_code_conformance,
                content_type_conformance,
            ],
        )

    call()
