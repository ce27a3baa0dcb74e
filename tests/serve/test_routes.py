"""Every route of `genesis serve`, on a real server process with the failer backend;
one history with the command line; the committed OpenAPI schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.support import ROOT, SCHEMA_PATHS, Served, finished, sse

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

SCHEMA = ROOT / "docs" / "openapi.json"


def test_server_info(served: Served) -> None:
    with served.client() as client:
        info = client.get("/server").json()
    assert info["root"] == os.path.realpath(served.root)
    assert info["trusted_input"] is False and info["accepting"] is True
    assert info["queue"] == {"size": 50, "queued": 0, "running": 0, "concurrency": 2}
    assert info["identity"] == {"name": "owner", "via": "bearer", "channel": "api"}
    assert info["sessions"] == 0 and info["approvals_pending"] == 0


def test_a_run_over_http_its_events_transcript_and_listing(served: Served) -> None:
    with served.client() as client:
        run = served.start(client, {"prompt": "hello there"})
        assert run["state"] in ("queued", "running") and run["source"] == "api"
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = sse(response)  # the stream ends with the run
        kinds = [e["event"] for e in events]
        assert kinds[-1] == "run" and events[-1]["data"]["state"] == "finished"
        assert {"run_started", "run_finished", "text"} <= set(kinds), kinds
        assert all(e["data"].get("run", e["data"].get("id")) == run["id"] for e in events)
        ids = [e["id"] for e in events]
        assert len(set(ids)) == len(ids), "each event has its own id"

        view = client.get(f"/runs/{run['id']}").json()
        assert view["state"] == "finished" and view["status"] == 0
        assert "responding normally" in view["result"]["message"]
        assert view["run_id"] == view["result"]["run_id"]
        # The run id names the same run.
        assert client.get(f"/runs/{view['run_id']}").json()["id"] == run["id"]

        transcript = client.get(f"/runs/{run['id']}/transcript").json()
        assert transcript["run_id"] == view["run_id"]
        assert transcript["result"]["status"] == 0
        types = [e["type"] for e in transcript["events"]]
        assert "run_started" in types and "text" in types
        page = client.get(f"/runs/{run['id']}/transcript", params={"limit": 2}).json()
        assert len(page["events"]) == 2 and page["next_offset"] == 2
        rest = client.get(
            f"/runs/{run['id']}/transcript", params={"offset": 2, "limit": 1000}
        ).json()
        assert page["events"] + rest["events"] == transcript["events"]
        assert rest["next_offset"] is None

        listed = client.get("/runs", params={"source": "api"}).json()["runs"]
        assert run["id"] in [r["id"] for r in listed]
        assert all("result" not in r or r["result"] is None for r in listed)
        failed = client.get("/runs", params={"failed": "true"}).json()["runs"]
        assert run["id"] not in [r["id"] for r in failed]


def test_one_history_with_the_command_line(served: Served) -> None:
    """A `genesis run` shows in the API, a served run in `genesis runs`: the same
    transcripts and run log."""
    cli = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "run", "--json", "from the cli"],
        env=served.env,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert cli.returncode == 0, cli.stderr
    cli_run = json.loads(cli.stdout)["run_id"]
    with served.client() as client:
        run = served.start(client, {"prompt": "from the api"})
        done = served.wait(client, run["id"])
        listed = client.get("/runs", params={"limit": 1000}).json()["runs"]
        by_run = {r["run_id"]: r for r in listed}
        assert by_run[cli_run]["source"] == "cli" and by_run[cli_run]["state"] == "finished"
        assert by_run[done["run_id"]]["id"] == run["id"], "a served run is listed once"
        assert client.get(f"/runs/{cli_run}").json()["result"]["run_id"] == cli_run
        stats = client.get("/stats", params={"since": "all"}).json()
    runs = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "runs", "--json", "-n", "1000"],
        env=served.env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    recorded = {json.loads(line)["run_id"] for line in runs.stdout.splitlines()}
    assert {cli_run, done["run_id"]} <= recorded
    cli_stats = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "stats", "--since", "all", "--json"],
        env=served.env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert json.loads(cli_stats.stdout)["runs"] == stats["runs"] >= 2


def test_stats_by_day_and_by_backend(served: Served) -> None:
    with served.client() as client:
        failed = served.start(client, {"prompt": "/fail"})
        served.wait(client, failed["id"])
        stats = client.get("/stats", params={"since": "7d"}).json()
        only = client.get("/stats", params={"since": "7d", "backend": "claude"}).json()
        bad = client.get("/stats", params={"since": "soon"})
    assert stats["failures"] >= 1 and stats["by_category"]["agent_error"]["count"] >= 1
    assert stats["by_backend"]["failer"]["runs"] == stats["runs"]
    assert sum(day["runs"] for day in stats["by_day"].values()) == stats["runs"]
    assert stats["total"]["runs"] == stats["runs"]
    assert only["runs"] == 0 and only["by_backend"] == {}
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_request"


def test_doctor(served: Served) -> None:
    with served.client() as client:
        report = client.get("/doctor", params={"backend": "failer"}).json()
        unknown = client.get("/doctor", params={"backend": "nope"})
    assert report["can_run"] == {"failer": True}
    assert {c["backend"] for c in report["checks"]} >= {"failer", "*"}
    assert unknown.status_code == 422 and "nope" in unknown.json()["message"]


def test_cancel_a_running_and_a_queued_run(tmp_path: Path) -> None:
    from tests.serve.support import serving

    with serving(tmp_path, "--concurrency", "1") as server, server.client() as client:
        running = server.start(client, {"prompt": "/timeout 60"})
        queued = server.start(client, {"prompt": "never runs"})
        server.wait(client, running["id"], ("running",))
        assert client.get(f"/runs/{queued['id']}").json()["position"] == 1
        gone = client.post(f"/runs/{queued['id']}/cancel").json()
        assert gone["state"] == "finished" and gone["status"] == 130
        assert gone["result"]["error"] == "cancelled"
        assert "before it started" in gone["result"]["message"]
        stopped = client.post(f"/runs/{running['id']}/cancel").json()
        assert stopped["state"] == "finished" and stopped["status"] == 130, stopped
        assert "process tree stopped" in stopped["result"]["message"]
        again = client.post(f"/runs/{running['id']}/cancel")
        assert again.status_code == 409 and again.json()["error"] == "not_cancellable"
        assert client.post("/runs/0123abcd/cancel").status_code == 404
        # The transcript says cancelled too (one history).
        record = client.get(f"/runs/{running['id']}/transcript").json()
        assert record["result"]["error"] == "cancelled"
        assert client.get("/server").json()["queue"]["running"] == 0


def test_unknown_runs_and_routes(served: Served) -> None:
    with served.client() as client:
        for path in ("/runs/feedface", "/runs/feedface/transcript", "/runs/feedface/events"):
            missing = client.get(path)
            assert missing.status_code == 404 and missing.json()["error"] == "not_found", path
        assert client.get("/nope").json()["error"] == "not_found"
        assert client.put("/runs").status_code == 405


def test_a_finished_runs_stream_is_its_end(served: Served) -> None:
    """A stream asked for after the run ended (and after the server let its
    events go) still says how it ended."""
    with served.client() as client:
        run = served.start(client, {"prompt": "short"})
        served.wait(client, run["id"])
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            events = sse(response)
    assert finished(events[-1]) and events[-1]["data"]["result"]["status"] == 0


def test_the_token_exchange_sets_a_strict_cookie(served: Served) -> None:
    with served.client() as client:
        login = client.post("/auth/session")
        assert login.status_code == 204
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert served.token not in cookie
        logout = client.delete("/auth/session")
        assert logout.status_code == 204 and "genesis_session=" in logout.headers["set-cookie"]


def test_the_committed_schema_is_the_served_one(served: Served) -> None:
    """docs/openapi.json is what the server serves: regenerate it with
    `python -m tests.serve.schema > docs/openapi.json` when the API changes."""
    with served.client() as client:
        served_schema = client.get("/openapi.json").json()
    committed = json.loads(SCHEMA.read_text())
    assert served_schema == committed, (
        "the API changed: regenerate docs/openapi.json (python -m tests.serve.schema)"
    )
    assert set(committed["paths"]) == SCHEMA_PATHS
