"""Live sessions over HTTP: open, turns, their events, approvals answered over
HTTP, by ``genesis approvals`` and by the deadline's default, interrupt,
steer, close, a bounded history, the untrusted-input rules; a SIGKILL of the
server mid-approval and a restart (the session lost with its turns, the
approval expired with its call, nothing left running, the session resumed
with its history).  Real server processes and the two-way failer; nothing of
the process layer is mocked."""

from __future__ import annotations

import signal
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.serve.support import Served, asked, serve, serving, sse, turn_ended
from tests.serve.test_inbox import _genesis

#: Every test here talks to a real server process (0.15 s or more with its start).
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _open(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/sessions", json=body)
    assert response.status_code == 201, response.text
    view: dict[str, Any] = response.json()
    assert view["state"] == "open" and view["alive"] is True
    return view


def _turn(client: httpx.Client, session: str, prompt: str) -> dict[str, Any]:
    response = client.post(f"/sessions/{session}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    turn: dict[str, Any] = response.json()
    assert turn["state"] == "running"
    return turn


def _ended(client: httpx.Client, session: str, number: int) -> dict[str, Any]:
    return turn_ended(client, session, number)


def _asked(client: httpx.Client, session: str) -> dict[str, Any]:
    return asked(client, session)


def _cli_pids(served: Served) -> list[psutil.Process]:
    return psutil.Process(served.proc.pid).children(recursive=True)


def test_a_session_over_http_turns_events_approvals_and_close(served: Served) -> None:
    with served.client() as client:
        session = _open(client, approval_timeout=1)
        sid = session["id"]
        assert session["approvals"] == "inbox" and session["approval_timeout_s"] == 1
        assert session["can_steer"] is False and session["turns"] == []
        assert sid in [s["id"] for s in client.get("/sessions").json()["sessions"]]
        # A plain turn.
        _turn(client, sid, "hello there")
        first = _ended(client, sid, 1)
        assert first["status"] == 0 and "responding normally" in first["message"]
        assert first["result"]["status"] == 0 and first["run_id"]
        # An approval answered over HTTP: the call runs.
        _turn(client, sid, "/bash echo answered-over-http")
        item = _asked(client, sid)
        assert item["turn"] == 2 and item["call"]["command"] == "echo answered-over-http"
        assert item["timeout_s"] == 1
        busy = client.post(f"/sessions/{sid}/turns", json={"prompt": "meanwhile"})
        assert busy.status_code == 409 and "turn 2" in busy.json()["message"]
        client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert "ran echo answered-over-http" in _ended(client, sid, 2)["message"]
        # No answer within the deadline: its default (deny) applies.
        _turn(client, sid, "/bash echo never-answered")
        item = _asked(client, sid)
        third = _ended(client, sid, 3)
        assert "ran echo never-answered" not in third["message"]
        assert client.get(f"/approvals/{item['id']}").json()["state"] == "expired"
        # The session's stream: what it is now, then its events; it ends when it closes.
        pids: list[psutil.Process] = []

        def act(event: dict[str, Any]) -> bool:
            if event["data"].get("turn_count") == 3 and not pids:  # the stream's first event
                assert event["event"] == "session"
                _turn(client, sid, "once more")
                _ended(client, sid, 4)
                pids.extend(_cli_pids(served))
                closed = client.post(f"/sessions/{sid}/close")
                assert closed.status_code == 200 and closed.json()["state"] == "closed"
            return False

        with client.stream("GET", f"/sessions/{sid}/events") as response:
            events = sse(response, until=act)
        assert pids and events[0]["event"] == "session"
        kinds = [e["event"] for e in events]
        assert "turn" in kinds and kinds[-1] == "session"
        assert events[-1]["data"]["state"] == "closed"
        texts = [e["data"] for e in events if e["event"] == "turn"]
        assert texts[0]["turn"] == 4 and texts[0]["status"] == 0
        assert all(e["data"]["session"] == sid for e in events if e["event"] != "session")
        for proc in pids:
            assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE
        view = client.get(f"/sessions/{sid}").json()
        assert [t["turn"] for t in view["turns"]] == [1, 2, 3, 4]
        refused = client.post(f"/sessions/{sid}/turns", json={"prompt": "after"})
        assert refused.status_code == 409 and "closed" in refused.json()["message"]
        ended = sse(client.get(f"/sessions/{sid}/events"))
        assert [e["event"] for e in ended] == ["session"]


#: The fake ACP agent as the real CLIs are named (tests/fakes/fake_acp.py).
FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


def test_a_session_over_http_on_an_acp_agent(tmp_path: Path) -> None:
    """gemini over the Agent Client Protocol (the fake agent, found as
    ``$GENESIS_GEMINI_PATH``): turns and an approval answered over HTTP, as on
    the failer; its close leaves no process."""
    env = {"GENESIS_GEMINI_PATH": str(FAKES / "gemini")}
    with serving(tmp_path, env=env) as server, server.client() as client:
        sid = _open(client, backend="gemini")["id"]
        _turn(client, sid, "hello")
        first = _ended(client, sid, 1)
        assert first["status"] == 0 and first["message"] == "fake gemini got: hello", first
        _turn(client, sid, 'ASK execute {"command": "touch made"}')
        item = _asked(client, sid)
        assert item["turn"] == 2 and item["state"] == "pending"
        assert "touch made" in str(item["call"])
        client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        second = _ended(client, sid, 2)
        assert second["message"] == "allowed allow_once", second
        assert client.get(f"/approvals/{item['id']}").json()["state"] == "answered"
        tree = _cli_pids(server)
        assert tree
        assert client.post(f"/sessions/{sid}/close").json()["state"] == "closed"
        for proc in tree:
            assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE


def test_a_session_approval_answered_by_genesis_approvals(served: Served) -> None:
    with served.client() as client:
        sid = _open(client)["id"]
        _turn(client, sid, "/bash echo from-the-terminal")
        item = _asked(client, sid)
        listed = _genesis(served, "list", "--session", sid)
        assert f"session {sid[:12]} turn 1" in listed.stdout, listed
        assert client.get("/approvals", params={"session": "other"}).json()["approvals"] == []
        answered = _genesis(served, "answer", item["id"], "deny", "-m", "not from here")
        assert answered.returncode == 0, answered.stderr
        turn = _ended(client, sid, 1)
        assert "ran echo" not in turn["message"]
        view = client.get(f"/approvals/{item['id']}").json()
        assert view["answer"]["channel"] == "cli" and view["answer"]["message"] == "not from here"
        client.post(f"/sessions/{sid}/close")


def test_allow_always_over_http_is_not_asked_again_in_the_session(served: Served) -> None:
    """``allow_always`` answered over HTTP covers the session's next same call
    (the library's store: this exact command), not another."""
    with served.client() as client:
        sid = _open(client, approval_timeout=30)["id"]
        _turn(client, sid, "/bash echo always")
        item = _asked(client, sid)
        answer = client.post(f"/approvals/{item['id']}", json={"decision": "allow_always"})
        assert answer.status_code == 200 and answer.json()["answer"]["always"] == "exact"
        assert "ran echo always" in _ended(client, sid, 1)["message"]
        _turn(client, sid, "/bash echo always")
        assert "ran echo always" in _ended(client, sid, 2)["message"]
        every = client.get("/approvals", params={"session": sid, "state": "all"}).json()
        assert [a["id"] for a in every["approvals"]] == [item["id"]], "turn 2 asked nothing"
        _turn(client, sid, "/bash echo other")
        other = _asked(client, sid)
        assert other["id"] != item["id"] and other["call"]["command"] == "echo other"
        client.post(f"/approvals/{other['id']}", json={"decision": "deny"})
        assert "ran echo other" not in _ended(client, sid, 3)["message"]
        client.post(f"/sessions/{sid}/close")


def test_interrupt_and_steer(served: Served) -> None:
    with served.client() as client:
        sid = _open(client, approvals="none")["id"]
        nothing = client.post(f"/sessions/{sid}/interrupt")
        assert nothing.status_code == 409 and nothing.json()["error"] == "no_turn"
        _turn(client, sid, "/timeout 60")
        time.sleep(0.3)
        steer = client.post(f"/sessions/{sid}/steer", json={"text": "faster"})
        assert steer.status_code == 409 and "codex" in steer.json()["message"]
        interrupted = client.post(f"/sessions/{sid}/interrupt")
        assert interrupted.status_code == 200, interrupted.text
        # Ended by the interrupt (130), within a wait shorter than the turn's own 60 s.
        turn = turn_ended(client, sid, 1, within=20)
        assert turn["status"] == 130
        # The session lives on.
        _turn(client, sid, "still here")
        assert _ended(client, sid, 2)["status"] == 0
        client.post(f"/sessions/{sid}/close")


def test_a_session_keeps_a_bounded_history(served: Served) -> None:
    with served.client() as client:
        sid = _open(client, keep_results=2, approvals="none")["id"]
        for number in (1, 2, 3):
            _turn(client, sid, f"turn {number}")
            _ended(client, sid, number)
        view = client.get(f"/sessions/{sid}").json()
        assert view["turn_count"] == 3 and [t["turn"] for t in view["turns"]] == [2, 3]
        assert client.get(f"/sessions/{sid}/turns/1").status_code == 404
        client.post(f"/sessions/{sid}/close")
        too_many = client.post("/sessions", json={"keep_results": 5000})
        assert too_many.status_code == 422 and "at most 1000" in too_many.json()["message"]


def test_a_session_body_is_untrusted_data(served: Served) -> None:
    with served.client() as client:
        for body, words in (
            ({"prompt": "hi"}, "opens without a prompt"),
            ({"verify": ["true"]}, "verify"),
            ({"cli_path": "/bin/sh"}, "cli_path"),
            ({"permissions": "full"}, "permissions"),
            ({"hooks": {}}, "hooks"),
            ({"env": {"X": "1"}}, "env"),
            ({"extra_args": ["--dangerously-skip-permissions"]}, "extra_args"),
            ({"approver": "allow"}, "approver"),
            ({"writes_under": "/"}, "writes_under"),
            ({"cwd": "/"}, "root"),
            ({"backend": "oneway"}, "no two-way protocol"),
            ({"approvals": "everything"}, "approvals must be"),
            ({"keep_results": -1}, "keep_results"),
        ):
            refused = client.post("/sessions", json=body)
            assert refused.status_code == 422, (body, refused.text)
            assert words in refused.json()["message"], (body, refused.text)
        assert client.get("/sessions", params={"state": "open"}).json()["sessions"] == []
        missing = client.post("/sessions/nope/turns", json={"prompt": "x"})
        assert missing.status_code == 404


def test_the_number_of_sessions_is_bounded(tmp_path: Path) -> None:
    with serving(tmp_path, "--max-sessions", "1") as server, server.client() as client:
        sid = _open(client)["id"]
        assert client.get("/server").json()["sessions"] == 1
        full = client.post("/sessions", json={})
        assert full.status_code == 429 and full.headers["Retry-After"]
        client.post(f"/sessions/{sid}/close")
        _open(client)


def test_sigkill_mid_approval_then_restart_lost_expired_and_resumed(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        with server.client() as client:
            sid = _open(client)["id"]
            _turn(client, sid, "remember the tide")
            _ended(client, sid, 1)
            _turn(client, sid, "/bash echo mid-crash")
            item = _asked(client, sid)
            tree = _cli_pids(server)
            assert tree, "the session's CLI is running"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
    finally:
        server.stop()
    with serving(tmp_path) as again, again.client() as client:
        for proc in tree:
            assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE, (
                "the restart's sweep stopped the session's CLI"
            )
        view = client.get(f"/sessions/{sid}").json()
        assert view["state"] == "lost" and view["lost"]["was"] == "open"
        assert [(t["turn"], t["state"]) for t in view["turns"]] == [(1, "finished"), (2, "lost")]
        assert "1 session(s)" in again.stderr()
        journal = again.state / "sessions.jsonl"
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
        approval = client.get(f"/approvals/{item['id']}").json()
        assert approval["state"] == "expired" and approval["session"] == sid
        assert approval["call"]["command"] == "echo mid-crash" and approval["turn"] == 2
        stale = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert stale.status_code == 409 and stale.json()["error"] == "expired"
        # Resumed where its CLI resumes: the conversation goes on.
        resumed = client.post(f"/sessions/{sid}/resume")
        assert resumed.status_code == 201, resumed.text
        assert resumed.json()["state"] == "open" and resumed.json()["resumed"] == 1
        _turn(client, sid, "/history")
        history = _ended(client, sid, 3)
        assert "remember the tide" in history["message"], history
        again_open = client.post(f"/sessions/{sid}/resume")
        assert again_open.status_code == 409
        client.post(f"/sessions/{sid}/close")


def test_with_trusted_input_a_session_takes_every_setting_but_an_approver(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, "--trusted-input") as server, server.client() as client:
        refused = client.post("/sessions", json={"approver": "allow"})
        assert refused.status_code == 422 and "approver" in refused.json()["message"]
        sid = _open(client, permissions="full", approvals="none", max_turns=3, output_schema=None)[
            "id"
        ]
        _turn(client, sid, "/bash echo trusted-setting")
        turn = _ended(client, sid, 1)
        assert "ran echo trusted-setting" in turn["message"], turn
        assert client.get("/approvals", params={"state": "all"}).json()["approvals"] == []
        client.post(f"/sessions/{sid}/close")


def test_a_sessions_stream_resumes_after_last_event_id(served: Served) -> None:
    with served.client() as client:
        sid = _open(client, approvals="none")["id"]
        _turn(client, sid, "first")
        _ended(client, sid, 1)
        seen: list[dict[str, Any]] = []

        def second_turn(event: dict[str, Any]) -> bool:
            if not seen:
                seen.append(event)
                _turn(client, sid, "second")
            return bool(event["event"] == "turn")

        with client.stream("GET", f"/sessions/{sid}/events") as response:
            events = sse(response, until=second_turn)
        assert events[0]["event"] == "session" and events[-1]["data"]["turn"] == 2
        middle = events[len(events) // 2]
        with client.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": middle["id"]}
        ) as response:
            again = sse(response, until=lambda e: e["event"] == "turn")
        assert [e["id"] for e in again] == [e["id"] for e in events[events.index(middle) + 1 :]]
        client.post(f"/sessions/{sid}/close")


def test_sigterm_closes_the_sessions_and_leaves_no_process(tmp_path: Path) -> None:
    server = serve(tmp_path)
    with server.client() as client:
        sid = _open(client)["id"]
        _turn(client, sid, "/bash echo at-the-stop")
        item = _asked(client, sid)
        tree = _cli_pids(server)
        assert tree
    assert server.stop(signal.SIGTERM) == 0
    for proc in tree:
        assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE
    with serving(tmp_path) as again, again.client() as client:
        view = client.get(f"/sessions/{sid}").json()
        assert view["state"] == "closed" and "server was stopped" in view["why"]
        assert view["turns"][0]["state"] == "finished"
        assert client.get(f"/approvals/{item['id']}").json()["state"] == "withdrawn"
        assert "listed lost" not in again.stderr()


def test_a_session_whose_cli_ends_is_listed_closed(served: Served) -> None:
    with served.client() as client:
        sid = _open(client, approvals="none")["id"]
        _turn(client, sid, "/partial")  # the failer writes half an answer and exits
        assert _ended(client, sid, 1)["error"] == "incomplete"
        deadline = time.monotonic() + 30
        while (view := client.get(f"/sessions/{sid}").json())["state"] != "closed":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        assert "its CLI ended the session" in view["why"] and view["alive"] is False
        refused = client.post(f"/sessions/{sid}/turns", json={"prompt": "hello"})
        assert refused.status_code == 409 and "closed" in refused.json()["message"]
        resumed = client.post(f"/sessions/{sid}/resume")
        assert resumed.status_code == 201, resumed.text
        _turn(client, sid, "/history")
        assert "/partial" in _ended(client, sid, 2)["message"]
        client.post(f"/sessions/{sid}/close")


def test_a_held_session_whose_cli_dies_while_idle_is_closed_at_once(tmp_path: Path) -> None:
    """Its CLI killed between turns: the session is listed closed (not open
    and dead until a client sends a turn), its place free again."""
    with serving(tmp_path, "--max-sessions", "1") as server, server.client() as client:
        sid = _open(client, approvals="none")["id"]
        _turn(client, sid, "hello")
        assert _ended(client, sid, 1)["status"] == 0
        tree = _cli_pids(server)
        assert tree
        for proc in tree:
            proc.kill()
        deadline = time.monotonic() + 15
        while (view := client.get(f"/sessions/{sid}").json())["state"] != "closed":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        assert "its CLI ended the session" in view["why"] and view["alive"] is False
        assert view["turns"][0]["state"] == "finished"
        assert _open(client, approvals="none")["state"] == "open"  # its place is free


def test_concurrent_opens_and_resumes_take_one_place_each(tmp_path: Path) -> None:
    """Two opens for the last place, two resumes of one session: one of each wins."""
    with serving(tmp_path, "--max-sessions", "1") as server, server.client() as client:

        def at_once(method: str, path: str) -> list[int]:
            codes: list[int] = []

            def slow() -> Iterator[bytes]:  # both requests wait for their bodies at once
                yield b"{"
                time.sleep(0.5)
                yield b"}"

            def call() -> None:
                with server.client() as own:
                    response = own.request(
                        method, path, content=slow(), headers={"Content-Type": "application/json"}
                    )
                    codes.append(response.status_code)

            threads = [threading.Thread(target=call) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            return sorted(codes)

        assert at_once("POST", "/sessions") == [201, 429]
        [held] = client.get("/sessions", params={"state": "open"}).json()["sessions"]
        # A turn first: its CLI resumes a conversation it has (with none, the failer
        # ends at once, and the resumed session is closed as its CLI ends).
        _turn(client, held["id"], "hello")
        assert _ended(client, held["id"], 1)["status"] == 0
        client.post(f"/sessions/{held['id']}/close")
        assert sorted(at_once("POST", f"/sessions/{held['id']}/resume")) in ([201, 409], [201, 429])
        assert len(client.get("/sessions", params={"state": "open"}).json()["sessions"]) == 1
        assert client.get(f"/sessions/{held['id']}").json()["resumed"] == 1
        client.post(f"/sessions/{held['id']}/close")
