"""The approval inbox: tool calls of served runs (``"approvals": "inbox"``)
wait for an answer from the API or ``genesis approvals``; the deadline's
default; two watchers of one inbox; a SIGKILL of the server mid-approval and a
restart (the approval expired with its tool call, no answer taken, nothing
left running).  Real server processes and the two-way failer; nothing of the
process layer is mocked."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.serve.support import ROOT, Served, asked, serve, serving, sse, turn_ended

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _pending(client: httpx.Client, run: str, within: float = 30.0) -> dict[str, Any]:
    """The first approval of ``run`` once it waits in the inbox."""
    deadline = time.monotonic() + within
    while True:
        found = client.get("/approvals", params={"run": run}).json()["approvals"]
        if found or time.monotonic() > deadline:
            assert found, "no approval was asked"
            view: dict[str, Any] = found[0]
            return view
        time.sleep(0.05)


def _ask(served: Served, client: httpx.Client, command: str, **body: Any) -> dict[str, Any]:
    return served.start(client, {"prompt": f"/bash {command}", "approvals": "inbox", **body})


def _genesis(served: Served, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "approvals", *argv],
        capture_output=True,
        text=True,
        env={**served.env, "XDG_STATE_HOME": str(served.state.parents[1])},
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def test_an_approval_answered_over_http_lets_the_call_run(served: Served) -> None:
    with served.client() as client:
        run = _ask(served, client, "echo inbox-allowed")
        item = _pending(client, run["id"])
        assert client.get("/server").json()["approvals_pending"] >= 1
        assert item["state"] == "pending" and item["run"] == run["id"]
        assert item["call"]["tool"] == "Bash" and item["call"]["command"] == "echo inbox-allowed"
        assert item["default"] == "deny" and item["timeout_s"] == 300
        assert item["deadline"] == pytest.approx(item["asked"] + 300)
        assert client.get(f"/approvals/{item['id'][:8]}").json()["id"] == item["id"]
        answered = client.post(
            f"/approvals/{item['id']}",
            json={"decision": "allow", "by": "alice"},
            headers={"X-Genesis-Channel": "dashboard"},
        )
        assert answered.status_code == 200, answered.text
        answer = answered.json()["answer"]
        assert answered.json()["state"] == "answered"
        assert answer["decision"] == "allow_once" and answer["allowed"] is True
        assert (answer["channel"], answer["by"], answer["via"]) == ("dashboard", "alice", "bearer")
        view = served.wait(client, run["id"])
        assert view["status"] == 0
        result = client.get(f"/runs/{run['id']}").json()["result"]
        assert "inbox-allowed" in result["message"]
        # The first answer wins: a second one is refused with what happened.
        again = client.post(f"/approvals/{item['id']}", json={"decision": "deny"})
        assert again.status_code == 409 and again.json()["error"] == "answered"
        assert "already answered: allow_once (dashboard, by alice)" in again.json()["message"]
        # The run's own stream carries its approval, asked and answered.
        events = sse(
            client.get(f"/runs/{run['id']}/events"),
            until=lambda e: e["event"] == "run" and e["data"]["state"] == "finished",
        )
        asked = [e["data"]["state"] for e in events if e["event"] == "approval_request"]
        assert asked == ["pending", "answered"]
        settled = client.get("/approvals", params={"state": "answered", "run": run["id"]})
        assert [a["id"] for a in settled.json()["approvals"]] == [item["id"]]


def test_a_denial_with_a_message_reaches_the_agent(served: Served) -> None:
    with served.client() as client:
        run = _ask(served, client, "echo never-run")
        item = _pending(client, run["id"])
        denied = client.post(
            f"/approvals/{item['id']}", json={"decision": "deny", "message": "not today"}
        )
        assert denied.status_code == 200, denied.text
        assert denied.json()["answer"]["allowed"] is False
        assert denied.json()["answer"]["message"] == "not today"
        served.wait(client, run["id"])
        result = client.get(f"/runs/{run['id']}").json()["result"]
        assert "never-run" not in result["message"].replace("echo never-run", "")
        assert "not today" in json.dumps(result)


def test_no_answer_by_the_deadline_applies_the_default_and_refuses_a_late_answer(
    served: Served,
) -> None:
    with served.client() as client:
        run = _ask(served, client, "echo too-late", approval_timeout=0.5)
        item = _pending(client, run["id"])
        assert item["timeout_s"] == 0.5
        served.wait(client, run["id"])
        view = client.get(f"/approvals/{item['id']}").json()
        assert view["state"] == "expired" and "0.5 s" in view["why"]
        assert view["call"]["command"] == "echo too-late"
        late = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert late.status_code == 409 and late.json()["error"] == "expired"
        result = client.get(f"/runs/{run['id']}").json()["result"]
        assert "ran echo too-late" not in result["message"]


def test_an_unanswered_approval_waits_under_the_run_s_and_the_turn_s_clocks(
    served: Served,
) -> None:
    """A run (and a session's turn) of 2 s whose approval may wait a day, and
    nobody answers: it ends by its own timeout, the approval withdrawn (not
    expired: its day was never up), not a day later."""
    with served.client() as client:
        run = _ask(served, client, "echo unanswered", approval_timeout=86_400, timeout=2)
        item = _pending(client, run["id"])
        assert item["timeout_s"] == 86_400
        ended = served.wait(client, run["id"], within=30)
        assert ended["error"] == "timeout", ended
        view = client.get(f"/approvals/{item['id']}").json()
        assert view["state"] == "withdrawn", view
        opened = client.post("/sessions", json={"approval_timeout": 86_400, "timeout": 2})
        assert opened.status_code == 201, opened.text
        session = opened.json()["id"]
        started = client.post(f"/sessions/{session}/turns", json={"prompt": "/bash echo y"})
        assert started.status_code == 202, started.text
        asked_view = asked(client, session)
        turn = turn_ended(client, session, 1, within=30)
        assert turn["error"] == "timeout", turn
        assert client.get(f"/approvals/{asked_view['id']}").json()["state"] == "withdrawn"
        assert client.post(f"/sessions/{session}/close").status_code == 200


def test_a_cancelled_run_withdraws_its_approval(served: Served) -> None:
    with served.client() as client:
        run = _ask(served, client, "echo cancelled")
        item = _pending(client, run["id"])
        assert client.post(f"/runs/{run['id']}/cancel").status_code == 200
        view = client.get(f"/approvals/{item['id']}").json()
        assert view["state"] == "withdrawn"
        refused = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert refused.status_code == 409 and refused.json()["error"] == "withdrawn"


def test_only_a_full_pending_id_is_answered(served: Served) -> None:
    """A forged id, a prefix, a malformed answer: refused, the approval still waits."""
    with served.client() as client:
        run = _ask(served, client, "echo exact")
        item = _pending(client, run["id"])
        forged = client.post(f"/approvals/{'0' * 32}", json={"decision": "allow"})
        assert forged.status_code == 404 and forged.json()["error"] == "not_found"
        prefix = client.post(f"/approvals/{item['id'][:8]}", json={"decision": "allow"})
        assert prefix.status_code == 404 and "full id" in prefix.json()["message"]
        for bad in (
            {"decision": "yes"},
            {"decision": "allow", "approver": "x"},
            {"decision": "allow", "by": "x" * 101},
            {},
        ):
            refused = client.post(f"/approvals/{item['id']}", json=bad)
            assert refused.status_code == 422, (bad, refused.text)
        channel = client.post(
            f"/approvals/{item['id']}",
            json={"decision": "allow"},
            headers={"X-Genesis-Channel": "mcp"},
        )
        assert channel.status_code == 400 and channel.json()["error"] == "invalid_channel"
        assert client.get(f"/approvals/{item['id']}").json()["state"] == "pending"
        client.post(f"/approvals/{item['id']}", json={"decision": "deny"})
        served.wait(client, run["id"])


def test_the_inbox_is_asked_for_in_data_never_code(served: Served) -> None:
    with served.client() as client:
        for body, words in (
            ({"prompt": "hi", "approvals": "all"}, 'approvals must be "inbox" or "none"'),
            ({"prompt": "hi", "approvals": "inbox", "approval_timeout": 0}, "approval_timeout"),
            ({"prompt": "hi", "approvals": "inbox", "approval_timeout": True}, "approval_timeout"),
            ({"prompt": "hi", "approvals": "inbox", "backend": "oneway"}, "no two-way protocol"),
            ({"prompt": "hi", "approvals": "inbox", "approve_tools": ["Bash"]}, "approve_tools"),
            ({"prompt": "hi", "approvals": "inbox", "approver": "x"}, "approver"),
        ):
            refused = client.post("/runs", json=body)
            assert refused.status_code == 422, (body, refused.text)
            assert words in refused.json()["message"], (body, refused.text)


def test_a_day_and_a_second_is_refused_by_run_many_and_the_server_in_the_same_words(
    served: Served, tmp_path: Path
) -> None:
    """approval_timeout is data, at most a day: the one check (the untrusted-input
    list's) refuses a day and a second for a run-many line and a served run or
    session alike, in one wording; a day is taken."""
    line = {"prompt": "hi", "backend": "failer", "approval_timeout": 86_401}
    ran = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "run-many", "-q", "-"],
        input=f"{json.dumps(line)}\n{json.dumps({**line, 'approval_timeout': 86_400})}\n",
        capture_output=True,
        text=True,
        env=served.env,
        cwd=tmp_path,
        timeout=60,
    )
    refused, taken = (json.loads(text) for text in ran.stdout.splitlines())
    assert refused["error"] == "invalid_request", refused
    words = refused["message"].removeprefix("line 1: ")
    assert words.startswith("refused approval_timeout 86401: untrusted input may wait at most")
    assert taken["status"] == 0, taken
    with served.client() as client:
        run = client.post("/runs", json={**line, "approvals": "inbox"})
        session = client.post("/sessions", json={"approval_timeout": 86_401})
        assert run.status_code == 422 and run.json()["message"] == words, run.text
        assert session.status_code == 422 and session.json()["message"] == words, session.text
        day = served.start(client, {**line, "approvals": "inbox", "approval_timeout": 86_400})
        assert served.wait(client, day["id"])["status"] == 0


def test_two_clients_watch_one_inbox_one_answers_the_other_sees_it(served: Served) -> None:
    seen: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    ready = threading.Barrier(3)

    def watch(name: str) -> None:
        def until(event: dict[str, Any]) -> bool:
            if event["event"] == "inbox":
                ready.wait()  # the watcher follows the inbox: the run may ask
            data = event["data"]
            return bool(event["event"] == "approval_request" and data["state"] == "answered")

        with (
            served.client() as client,
            client.stream("GET", "/approvals/events") as response,
        ):
            seen[name] += sse(response, until=until)

    threads = [threading.Thread(target=watch, args=(n,)) for n in seen]
    for thread in threads:
        thread.start()
    ready.wait(30)
    with served.client() as client:
        run = _ask(served, client, "echo watched")
        item = _pending(client, run["id"])
        client.post(f"/approvals/{item['id']}", json={"decision": "allow", "by": "a"})
        served.wait(client, run["id"])
    for thread in threads:
        thread.join(30)
    for name, events in seen.items():
        assert events[0]["event"] == "inbox", name
        mine = [e["data"] for e in events[1:] if e["data"]["id"] == item["id"]]
        assert [e["state"] for e in mine] == ["pending", "answered"], name
        assert mine[-1]["answer"]["by"] == "a"


def test_genesis_approvals_lists_answers_and_watches(served: Served) -> None:
    with served.client() as client:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "coding_genesis._cli.main", "approvals", "watch", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**served.env, "XDG_STATE_HOME": str(served.state.parents[1])},
            cwd=ROOT,
        )
        try:
            assert watcher.stdout is not None
            first = json.loads(watcher.stdout.readline())
            assert first["event"] == "inbox"
            run = _ask(served, client, "echo from-the-cli")
            item = _pending(client, run["id"])
            listed = _genesis(served, "list")
            assert listed.returncode == 0, listed.stderr
            assert item["id"][:12] in listed.stdout and "echo from-the-cli" in listed.stdout
            as_json = json.loads(_genesis(served, "list", "--json").stdout)
            assert item["id"] in [a["id"] for a in as_json["approvals"]]
            answered = _genesis(served, "answer", item["id"][:8], "allow", "--by", "bob")
            assert answered.returncode == 0, answered.stderr
            assert "answered" in answered.stdout and "allow_once (cli, by bob)" in answered.stdout
            view = client.get(f"/approvals/{item['id']}").json()
            assert (view["answer"]["channel"], view["answer"]["by"]) == ("cli", "bob")
            again = _genesis(served, "answer", item["id"][:8], "deny")
            assert again.returncode == 1 and "already answered" in again.stderr
            unknown = _genesis(served, "answer", "ffffffffff", "deny")
            assert unknown.returncode == 1 and "not_found" in unknown.stderr
            states: list[str] = []
            while len(states) < 2:
                event = json.loads(watcher.stdout.readline())
                if event.get("id") == item["id"]:
                    states.append(event["state"])
            assert states == ["pending", "answered"]
            served.wait(client, run["id"])
        finally:
            watcher.kill()
            watcher.communicate(timeout=10)


def test_genesis_approvals_without_a_server_says_so(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "approvals", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "no genesis serve found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sigkill_mid_approval_then_restart_expires_it_with_its_call(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        with server.client() as client:
            run = _ask(server, client, "echo after-the-crash")
            item = _pending(client, run["id"])
            tree = psutil.Process(server.proc.pid).children(recursive=True)
            assert tree, "the run's CLI is running"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
    finally:
        server.stop()
    journal = server.state / "approvals.jsonl"
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.state.stat().st_mode) == 0o700
    with serving(tmp_path) as again, again.client() as client:
        for proc in tree:
            assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE
        view = client.get(f"/approvals/{item['id']}").json()
        assert view["state"] == "expired" and "server stopped" in view["why"]
        assert view["call"]["command"] == "echo after-the-crash"
        assert view["call"]["tool"] == "Bash" and view["run"] == run["id"]
        listed = client.get("/approvals", params={"state": "expired"}).json()["approvals"]
        assert item["id"] in [a["id"] for a in listed]
        assert client.get("/approvals").json()["approvals"] == []
        # A stale answer (to the approval of the killed server) changes nothing.
        stale = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert stale.status_code == 409 and stale.json()["error"] == "expired"
        assert client.get(f"/approvals/{item['id']}").json()["answer"] is None
        assert client.get(f"/runs/{run['id']}").json()["state"] == "lost"
        assert "1 approval(s) pending" in again.stderr()
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    with serving(tmp_path) as third, third.client() as client:
        assert client.get(f"/approvals/{item['id']}").json()["state"] == "expired"
        assert "approval(s) pending" not in third.stderr()


def test_a_large_tool_call_is_shown_cut_to_size(served: Served) -> None:
    """A Write of a large text: the inbox (its events, its journal) shows it cut."""
    text = "x" * 20_000
    with served.client() as client:
        run = served.start(
            client, {"prompt": f"/write big.txt {text}", "approvals": "inbox", "cwd": "."}
        )
        item = _pending(client, run["id"])
        shown = json.dumps(item["call"])
        assert "more characters)" in shown and len(shown) < 10_000
        client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert served.wait(client, run["id"])["status"] == 0
        assert (served.root / "big.txt").read_text().strip() == text  # the call itself was whole


def test_a_server_that_sends_every_call_to_the_inbox_lets_no_body_opt_out(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, "--approvals", "inbox") as server, server.client() as client:
        for path, body in (
            ("/runs", {"prompt": "/bash echo x", "approvals": "none"}),
            ("/sessions", {"approvals": "none"}),
        ):
            refused = client.post(path, json=body)
            assert refused.status_code == 422, refused.text
            assert "--approvals inbox" in refused.json()["message"]
        one_way = client.post("/runs", json={"prompt": "hi", "backend": "oneway"})
        assert one_way.status_code == 422 and "two-way" in one_way.json()["message"]
        # A run that says nothing waits in the inbox all the same.
        run = server.start(client, {"prompt": "/bash echo asked-anyway"})
        item = _pending(client, run["id"])
        assert item["call"]["command"] == "echo asked-anyway"
        client.post(f"/approvals/{item['id']}", json={"decision": "deny"})
        result = server.wait(client, run["id"])
        assert result["status"] is not None
        message = client.get(f"/runs/{run['id']}").json()["result"]["message"]
        assert "ran echo asked-anyway" not in message


def test_the_inbox_stream_resumes_after_last_event_id(served: Served) -> None:
    """A client that comes back with ``Last-Event-ID`` gets what happened after
    that event (no snapshot again): here its approval, then its answer."""
    with served.client() as client:
        runs: list[dict[str, Any]] = []

        def asked_now(event: dict[str, Any]) -> bool:
            if event["event"] == "inbox":
                runs.append(_ask(served, client, "echo resumed"))
                return False
            data = event["data"]
            return bool(data.get("run") == runs[0]["id"] and data["state"] == "pending")

        with client.stream("GET", "/approvals/events") as response:
            first = sse(response, until=asked_now)
        snapshot, pending = first[0], first[-1]
        assert snapshot["event"] == "inbox" and pending["event"] == "approval_request"
        item = pending["data"]["id"]
        answered = client.post(f"/approvals/{item}", json={"decision": "allow"})
        assert answered.status_code == 200, answered.text
        served.wait(client, runs[0]["id"])

        def settled(event: dict[str, Any]) -> bool:
            return bool(event["data"].get("id") == item and event["data"]["state"] == "answered")

        with client.stream(
            "GET", "/approvals/events", headers={"Last-Event-ID": pending["id"]}
        ) as response:
            rest = sse(response, until=settled)
        assert all(e["event"] == "approval_request" for e in rest), rest
        assert [e["data"]["state"] for e in rest if e["data"]["id"] == item] == ["answered"]
        with client.stream("GET", "/approvals/events") as response:  # without: a snapshot
            assert sse(response, limit=1)[0]["event"] == "inbox"
