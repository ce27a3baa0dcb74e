"""Load on loopback, the clients in another process (tests/serve/load_client.py):
200 concurrent SSE clients and 500 queued failer runs.  Every run is answered
exactly once; memory is bounded as ratios measured in the test (never a
wall-clock limit): RSS after 500 queued runs at most 1.5x after 50, and once
the 200 clients are gone, back within 10 % of one client's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.serve.support import ROOT, Served, serving

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


def rss(server: Served) -> int:
    return int(psutil.Process(server.proc.pid).memory_info().rss)


def settled_rss(server: Served, samples: int = 5) -> int:
    """The server's RSS once it stopped moving (the lowest of a few samples)."""
    values = []
    for _ in range(samples):
        time.sleep(0.2)
        values.append(rss(server))
    return min(values)


def clients(server: Served, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.serve.load_client",
            args[0],
            server.url,
            server.token,
            *args[1:],
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    text = proc.stdout.readline()
    assert text, f"the client process ended (exit {proc.wait()})"
    result: dict[str, Any] = json.loads(text)
    return result


def say(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def done(proc: subprocess.Popen[str], *, tell: bool = True) -> None:
    """Tell the clients to disconnect (``tell``); wait for their process to end."""
    if tell:
        say(proc)
    assert proc.wait(120) == 0
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def follow(server: Served, n: int, runs: int) -> tuple[dict[str, Any], subprocess.Popen[str]]:
    """``n`` clients following everything while ``runs`` failer runs go."""
    proc = clients(server, "sse", str(n), str(runs))
    assert line(proc) == {"connected": n}
    with server.client() as client:
        ids = [server.start(client, {"prompt": f"watched {i}"})["id"] for i in range(runs)]
        for key in ids:
            assert server.wait(client, key)["status"] == 0
    return line(proc), proc


def test_200_sse_clients_each_get_every_event_and_memory_comes_back(tmp_path: Path) -> None:
    with serving(tmp_path, "--concurrency", "4") as server:
        one, proc = follow(server, 1, 3)  # warm-up: every code path once
        done(proc)
        one, proc = follow(server, 1, 3)
        rss_one = settled_rss(server)
        done(proc)
        many, proc = follow(server, 200, 3)
        done(proc)
        rss_after = settled_rss(server, samples=10)
    assert many["missed"] == 0
    assert set(many["events"]) == {one["events"][0]}, "every client got every event"
    assert many["ids"] == 1, "in the same order, with the same ids"
    assert rss_after <= 1.10 * rss_one, (rss_after, rss_one)


def test_500_queued_runs_each_answered_once_in_bounded_memory(tmp_path: Path) -> None:
    with (
        serving(tmp_path, "--concurrency", "4", "--queue", "600") as server,
        server.client() as client,
    ):
        blockers = [server.start(client, {"prompt": "/timeout 120"}) for _ in range(4)]
        for b in blockers:
            server.wait(client, b["id"], ("running",))
        first = clients(server, "submit", "50")
        assert line(first) == {"submitted": 50, "refused": []}
        rss_50 = settled_rss(server)
        rest = clients(server, "submit", "450")
        assert line(rest) == {"submitted": 450, "refused": []}
        assert client.get("/server").json()["queue"]["queued"] == 500
        rss_500 = settled_rss(server)
        for b in blockers:
            client.post(f"/runs/{b['id']}/cancel")
        say(first)
        say(rest)
        answers = [line(first), line(rest)]
        done(first, tell=False)
        done(rest, tell=False)
    assert answers[0] == {
        "ids": 50,
        "answered_once": 50,
        "answered_more": 0,
        "states": {"finished 0": 50},
    }
    assert answers[1] == {
        "ids": 450,
        "answered_once": 450,
        "answered_more": 0,
        "states": {"finished 0": 450},
    }
    assert rss_500 <= 1.5 * rss_50, (rss_500, rss_50)
    journal = [json.loads(x) for x in (server.state / "journal.jsonl").read_text().splitlines()]
    ends = [r["id"] for r in journal if r["state"] == "finished"]
    assert len(ends) == len(set(ends)) == 504, "each answered exactly once"
