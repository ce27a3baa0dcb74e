"""A served session turn's own options (issue 41): ``model`` is data, held for
the next turns; ``permissions`` and ``output_schema`` need ``--trusted-input``
(refused in the one list's words, as a body's); a prompt's parts as a run's; a
switch the backend cannot make answers the turn 64 in the check's words and
the session lives on; ``partial`` runs and sessions stream ``text_delta``
events.  Real server processes and the two-way failer (which writes claude's
``stream_event`` pieces when told to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.support import Served, serving, sse, turn_ended

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

#: A 1x1 PNG.
B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
}


def _open(client: httpx.Client, **body: Any) -> str:
    response = client.post("/sessions", json={"approvals": "none", **body})
    assert response.status_code == 201, response.text
    sid: str = response.json()["id"]
    return sid


def _turn(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/sessions/{sid}/turns", json=body)
    assert response.status_code == 202, response.text
    return turn_ended(client, sid, response.json()["turn"])


def test_a_turn_s_model_holds_and_its_trusted_options_are_refused(served: Served) -> None:
    with served.client() as client:
        sid = _open(client)
        first = _turn(client, sid, prompt="hello", model="m-b")
        assert first["status"] == 0 and first["result"]["model"] == "m-b"
        assert _turn(client, sid, prompt="hello again")["result"]["model"] == "m-b"
        for field, value in (("permissions", "full"), ("output_schema", SCHEMA)):
            refused = client.post(f"/sessions/{sid}/turns", json={"prompt": "x", field: value})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"] == "invalid_request"
            assert refused.json()["message"].startswith(
                f"refused field(s) {field}: a run-many file may set only"
            )
        named = client.post(
            f"/sessions/{sid}/turns",
            json={"prompt": ["look", {"type": "image", "path": "/etc/hostname"}]},
        )
        assert named.status_code == 422
        assert "refused prompt part(s) naming a path" in named.json()["message"]
        dash = client.post(f"/sessions/{sid}/turns", json={"prompt": "x", "model": "--yolo"})
        assert dash.status_code == 422 and "command-line option" in dash.json()["message"]
        unknown = client.post(f"/sessions/{sid}/turns", json={"prompt": "x", "grace": 1})
        assert unknown.status_code == 422
        # An image as data is data; the turn is listed by its text alone.
        image = _turn(client, sid, prompt=["look\nat this", {"type": "image", "data": B64}])
        assert image["status"] == 0 and image["prompt"] == "look"
        view = client.get(f"/sessions/{sid}").json()
        assert [t["turn"] for t in view["turns"]] == [1, 2, 3] and view["alive"] is True
        assert B64 not in str(view)
        client.post(f"/sessions/{sid}/close")


def test_a_trusted_turn_switches_its_level_or_answers_64_and_the_session_lives_on(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, "--trusted-input") as served, served.client() as client:
        sid = _open(client, permissions="read-only")
        refused = _turn(client, sid, prompt="/write w.txt x", permissions="edit")
        assert refused["status"] == 64 and refused["error"] == "invalid_request"
        assert "opened with permissions='read-only' to 'edit'" in refused["message"]
        assert not (served.root / "w.txt").exists()
        assert _turn(client, sid, prompt="hello")["status"] == 0
        shaped = _turn(client, sid, prompt='/json {"verdict": "fine"}', output_schema=SCHEMA)
        assert shaped["status"] == 0 and shaped["result"]["output"] == {"verdict": "fine"}
        assert client.get(f"/sessions/{sid}").json()["state"] == "open"


def _deltas(events: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The text a stream's deltas joined, and its whole text events."""
    joined = "".join(e["data"]["text"] for e in events if e["event"] == "text_delta")
    return joined, [e["data"]["text"] for e in events if e["event"] == "text"]


def test_a_partial_run_and_session_stream_text_deltas(served: Served) -> None:
    with served.client() as client:
        run = served.start(client, {"prompt": "hello", "partial": True})
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            events = sse(response)
        kinds = [e["event"] for e in events]
        assert kinds.count("text_delta") == 3, kinds
        assert kinds.index("text_delta") < kinds.index("text")
        joined, texts = _deltas(events)
        assert joined and joined in texts
        # Without partial: whole messages alone.
        plain = served.start(client, {"prompt": "hello"})
        with client.stream("GET", f"/runs/{plain['id']}/events") as response:
            assert "text_delta" not in [e["event"] for e in sse(response)]

        sid = _open(client, partial=True)

        def act(event: dict[str, Any]) -> bool:
            if event["event"] == "session" and event["data"].get("turn_count") == 0:
                started = client.post(f"/sessions/{sid}/turns", json={"prompt": "hello"})
                assert started.status_code == 202
            return bool(event["event"] == "turn")

        with client.stream("GET", f"/sessions/{sid}/events") as response:
            events = sse(response, until=act)
        assert [e["event"] for e in events].count("text_delta") == 3
        joined, texts = _deltas(events)
        assert joined and joined in texts
        assert all(e["data"]["turn"] == 1 for e in events if e["event"] == "text_delta")
        client.post(f"/sessions/{sid}/close")
