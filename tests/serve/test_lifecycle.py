"""What a server does over time: streams resumed, a slow client, a full queue,
SIGTERM (drain, cancel, the drain timeout) and a SIGKILL followed by a restart.
Real server processes, the failer and the fake CLIs; nothing of the process
layer is mocked (the suite's leak check runs after each test too)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.serve.support import ROOT, Served, finished, serve, serving, sse
from tests.support import FakeCLI

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_a_runs_stream_resumes_after_last_event_id(served: Served) -> None:
    with served.client() as client:
        run = served.start(client, {"prompt": "hello"})
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            events = sse(response)
        assert finished(events[-1]) and len(events) >= 6
        for k in (0, 2, len(events) - 2):
            with client.stream(
                "GET", f"/runs/{run['id']}/events", headers={"Last-Event-ID": events[k]["id"]}
            ) as response:
                rest = sse(response)
            assert [e["id"] for e in rest] == [e["id"] for e in events[k + 1 :]]
        # An id of another start of the server: the client is told it missed events.
        with client.stream(
            "GET", f"/runs/{run['id']}/events", headers={"Last-Event-ID": "0000-5"}
        ) as response:
            told = sse(response)
        assert told[0]["event"] == "missed" and "restarted" in told[0]["data"]["message"]
        assert finished(told[-1])


def test_the_stream_of_everything_resumes_after_last_event_id(served: Served) -> None:
    with served.client() as client:
        with client.stream("GET", "/events") as response:
            run = served.start(client, {"prompt": "everything"})
            events = sse(response, until=lambda e: finished(e) and e["data"]["id"] == run["id"])
        mine = [e for e in events if e["data"].get("run", e["data"].get("id")) == run["id"]]
        assert mine[0]["event"] == "run" and mine[0]["data"]["state"] == "queued"
        k = len(events) // 2
        with client.stream("GET", "/events", headers={"Last-Event-ID": events[k]["id"]}) as again:
            rest = sse(again, until=lambda e: e["id"] == events[-1]["id"])
        assert [e["id"] for e in rest] == [e["id"] for e in events[k + 1 :]]


def test_a_run_goes_on_when_its_stream_client_disconnects(served: Served) -> None:
    """A client that closes the run's stream mid-run changes nothing of the
    run: it finishes, its transcript is whole, and a new stream has it all."""
    with served.client() as client:
        run = served.start(client, {"prompt": "/timeout 3"})
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            early = sse(response, until=lambda e: e["event"] == "run_started")
        assert client.get(f"/runs/{run['id']}").json()["state"] == "running", "closed mid-run"
        done = served.wait(client, run["id"])
        assert done["status"] == 0 and "responding normally" in done["result"]["message"]
        transcript = client.get(f"/runs/{run['id']}/transcript").json()
        assert transcript["result"]["status"] == 0
        types = [e["type"] for e in transcript["events"]]
        assert types.count("run_started") == 1 and types[-1] == "run_finished", types
        assert "text" in types, "what the run said after its client left is recorded"
        with client.stream("GET", f"/runs/{run['id']}/events") as response:
            whole = sse(response)
        assert [e["id"] for e in whole[: len(early)]] == [e["id"] for e in early]
        assert finished(whole[-1]) and whole[-1]["data"]["status"] == 0


def _slow_reader(served: Served, path: str) -> socket.socket:
    """A client that asks for a stream and then reads nothing (a tiny receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = served.host.split(":")
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {served.host}\r\n"
        f"Authorization: Bearer {served.token}\r\n\r\n".encode()
    )
    return sock


def _read_until(sock: socket.socket, marker: bytes, within: float = 60.0) -> bytes:
    sock.settimeout(within)
    data = b""
    deadline = time.monotonic() + within
    while marker not in data and time.monotonic() < deadline:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


def test_a_slow_client_never_slows_a_run_and_is_told_what_it_missed(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    big = "x" * 32_000
    fake.script(
        [
            {"init": True},
            *[
                {
                    "emit": {
                        "type": "assistant",
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "text", "text": f"{i} {big}"}],
                        },
                    }
                }
                for i in range(300)
            ],
            {"result": "done"},
        ]
    )
    env = {**fake.env(), "GENESIS_CLAUDE_PATH": fake.path}
    with serving(tmp_path, "--event-buffer", "64", env=env) as server, server.client() as client:
        slow = _slow_reader(server, "/events")
        with client.stream("GET", "/events") as fast:
            time.sleep(0.3)
            run = server.start(client, {"prompt": "flood", "backend": "claude"})
            seen = sse(fast, until=lambda e: finished(e) and e["data"]["id"] == run["id"])
            # The run finished while the slow client had read nothing at all.
            done = server.wait(client, run["id"])
        assert done["status"] == 0, done
        assert not [e for e in seen if e["event"] == "missed"], "the fast client missed nothing"
        texts = [e for e in seen if e["event"] == "text"]
        assert len(texts) == 300
        data = _read_until(slow, b'"state":"finished"')
        slow.close()
        frames = [f for f in data.split(b"\n\n") if b"event: missed" in f]
        assert frames, "the slow client was told it missed events"
        told = json.loads(frames[0].split(b"data: ", 1)[1])
        assert told["missed"] > 0 and told["next"] is not None
        assert b'"state":"finished"' in data, "and then it got the rest, up to the end"


def test_a_full_queue_answers_429_with_retry_after(tmp_path: Path) -> None:
    with (
        serving(tmp_path, "--concurrency", "1", "--queue", "2") as server,
        server.client() as client,
    ):
        running = server.start(client, {"prompt": "/timeout 60"})
        server.wait(client, running["id"], ("running",))
        queued = [server.start(client, {"prompt": f"q{i}"}) for i in range(2)]
        full = client.post("/runs", json={"prompt": "one too many"})
        assert full.status_code == 429, full.text
        assert full.json()["error"] == "queue_full"
        assert int(full.headers["retry-after"]) >= 1
        assert client.get("/server").json()["queue"] == {
            "size": 2,
            "queued": 2,
            "running": 1,
            "concurrency": 1,
        }
        client.post(f"/runs/{running['id']}/cancel")
        for q in queued:
            assert server.wait(client, q["id"])["status"] == 0
        assert client.post("/runs", json={"prompt": "room again"}).status_code == 202


def _pids_of_runs(server: Served) -> list[int]:
    """The CLIs the server started (its children), alive."""
    try:
        return [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _genesis(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_sigterm_drains_then_exits_with_no_process_left(tmp_path: Path) -> None:
    server = serve(tmp_path, "--concurrency", "1")
    try:
        with server.client() as client:
            first = server.start(client, {"prompt": "/timeout 2"})
            second = server.start(client, {"prompt": "after it"})
            server.wait(client, first["id"], ("running",))
            cli = _pids_of_runs(server)
            assert cli
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            refused = client.post("/runs", json={"prompt": "too late"})
            assert refused.status_code == 503 and refused.json()["error"] == "draining"
            assert client.get(f"/runs/{second['id']}").json()["state"] in ("queued", "running")
        assert server.proc.wait(60) == 0
    finally:
        server.stop()
    assert not [p for p in cli if psutil.pid_exists(p)]
    runs = {r["prompt"]: r for r in _genesis(server.env, "runs", "--json")}
    assert runs["/timeout 2"]["status"] == 0 and runs["after it"]["status"] == 0
    assert "draining" in server.stderr() and "2 run(s) answered" in server.stderr()


@pytest.mark.parametrize("how", ["cancel", "drain-timeout"])
def test_sigterm_cancels_by_option_or_after_the_drain_timeout(tmp_path: Path, how: str) -> None:
    args = ["--on-term", "cancel"] if how == "cancel" else ["--drain-timeout", "1"]
    server = serve(tmp_path, "--concurrency", "1", *args)
    try:
        with server.client() as client:
            first = server.start(client, {"prompt": "/timeout 60"})
            server.start(client, {"prompt": "queued"})
            server.wait(client, first["id"], ("running",))
            cli = _pids_of_runs(server)
            with client.stream("GET", "/events") as stream:
                server.proc.send_signal(signal.SIGTERM)
                told = sse(stream)  # ends: the server said it closes
            assert told[-1]["event"] == "closing"
        assert server.proc.wait(60) == 0
    finally:
        server.stop()
    assert cli and not [p for p in cli if psutil.pid_exists(p)]
    runs = {r["prompt"]: r for r in _genesis(server.env, "runs", "--json")}
    assert runs["/timeout 60"]["status"] == 130 and runs["/timeout 60"]["error"] == "cancelled"
    assert "queued" not in runs, "the queued run never started: no transcript"
    journal = [
        json.loads(line) for line in (server.state / "journal.jsonl").read_text().splitlines()
    ]
    ends = [r for r in journal if r["state"] == "finished"]
    assert len(ends) == 2 and {r["summary"]["status"] for r in ends} == {130}


def test_sigkill_mid_run_then_restart_lists_the_lost_run_and_nothing_runs(
    tmp_path: Path,
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {
                "emit": {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "t1",
                                "name": "Bash",
                                "input": {"command": "ls"},
                            }
                        ],
                    },
                }
            },
            {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
            {"hang": True},
        ]
    )
    env = {**fake.env(), "GENESIS_CLAUDE_PATH": fake.path}
    server = serve(tmp_path, "--concurrency", "1", env=env)
    try:
        with server.client() as client:
            run = server.start(client, {"prompt": "work", "backend": "claude"})
            queued = server.start(client, {"prompt": "waiting", "backend": "claude"})
            deadline = time.monotonic() + 30
            while not [r for r in fake.records() if "child" in r] and time.monotonic() < deadline:
                time.sleep(0.05)
            escaped = [r["child"] for r in fake.records() if "child" in r]
            assert escaped and psutil.pid_exists(escaped[0])
            time.sleep(0.3)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        assert psutil.pid_exists(escaped[0]), "a setsid grandchild outlives its runner's death"
    finally:
        server.stop()
    with serving(tmp_path, "--concurrency", "1", env=env) as again, again.client() as client:
        assert not psutil.pid_exists(escaped[0]) or psutil.Process(escaped[0]).status() == (
            psutil.STATUS_ZOMBIE
        ), "the restart's sweep stopped the tree"
        lost = {r["id"]: r for r in client.get("/runs", params={"state": "lost"}).json()["runs"]}
        assert set(lost) == {run["id"], queued["id"]}
        view = client.get(f"/runs/{run['id']}").json()
        assert view["state"] == "lost" and view["lost"]["was"] == "running"
        done = view["lost"]["done"]
        assert done["attempts"] == 1 and done["tool_calls"] == 1
        assert done["tool_usage"] == {"Bash": 1} and done["session_id"]
        assert "killed or crashed" in view["lost"]["reason"]
        never = client.get(f"/runs/{queued['id']}").json()
        assert never["lost"]["was"] == "queued" and never["lost"]["done"] is None
        assert "2 run(s)" in again.stderr()
        # The command line's history says the same.
        recorded = {r["run_id"]: r for r in _genesis(again.env, "runs", "--json")}
        assert recorded[view["run_id"]]["ended_by"] == "runner_death"
        # The lost runs stay lost across one more restart (answered once).
    with serving(tmp_path, "--concurrency", "1", env=env) as third, third.client() as client:
        assert client.get(f"/runs/{run['id']}").json()["state"] == "lost"
        assert "listed lost" not in third.stderr()
