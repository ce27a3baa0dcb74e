"""Sessions of ``genesis serve`` with the REAL claude and codex against the fake model server.

The server runs in a process of its own with the CLI's environment for the fake model
(tests/serve/support.py); its clients are this test (httpx).  claude: turns over HTTP, a
write allowed from the approval inbox, a SIGKILL of the server mid-approval and a restart
(the session lost, the approval expired with its call, nothing left running), then the
session resumed through the API with its history; in one more session, an approval
answered by ``genesis approvals answer``, one left to its deadline (the default denies, a
late answer is refused) and a running tool interrupted over HTTP.  codex: a running turn
steered over HTTP.  A served untrusted claude run in a planted repository runs none of
its programs (with ``--trusted-input`` and its settings asked for, they run).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env, rig
from tests.security.test_repository_programs import ALL_SOURCES, found, hooks
from tests.serve.support import Served, asked, serve, serving, turn_ended
from tests.serve.test_inbox import _genesis

__all__ = [
    "claude_rig",
    "codex_rig",
    "hermetic_env",
    "rig",
]  # the real-CLI fixtures, active here too

pytest.importorskip("fastapi", reason="genesis serve needs the serve extra (fastapi)")

pytestmark = pytest.mark.timeout(180)

WAIT = 90.0


def _env(rig: Rig) -> dict[str, str]:
    return {**rig.env(), f"GENESIS_{rig.backend.upper()}_PATH": rig.cli}


def _open(client: httpx.Client, rig: Rig, **body: Any) -> str:
    opened = client.post(
        "/sessions", json={"backend": rig.backend, "cwd": str(rig.work), "timeout": 60, **body}
    )
    assert opened.status_code == 201, opened.text
    key: str = opened.json()["id"]
    return key


def _start(client: httpx.Client, session: str, prompt: str) -> int:
    started = client.post(f"/sessions/{session}/turns", json={"prompt": prompt})
    assert started.status_code == 202, started.text
    number: int = started.json()["turn"]
    return number


def _end(client: httpx.Client, session: str, number: int) -> dict[str, Any]:
    return turn_ended(client, session, number, WAIT)


def _asked(client: httpx.Client, session: str) -> dict[str, Any]:
    return asked(client, session, WAIT)


def _tree(served: Served) -> list[psutil.Process]:
    return psutil.Process(served.proc.pid).children(recursive=True)


def test_a_claude_session_over_http_survives_a_server_sigkill(
    claude_rig: Rig, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = claude_rig
    env = _env(rig)
    server = serve(tmp_path / "serve", env=env, root=rig.work)
    try:
        with server.client() as client:
            sid = _open(client, rig)
            first = _end(client, sid, _start(client, sid, "SCENARIO:text remember tangerine"))
            assert first["status"] == 0 and first["message"] == "remember tangerine", first
            # A write waits in the inbox; allowed over HTTP, it is made.
            number = _start(client, sid, "SCENARIO:write allowed.txt hello")
            item = _asked(client, sid)
            assert item["call"]["tool"] == "Write" and item["turn"] == number
            answered = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
            assert answered.status_code == 200, answered.text
            assert _end(client, sid, number)["status"] == 0
            assert (rig.work / "allowed.txt").read_text().strip() == "hello"
            # Another waits when the server is killed.
            _start(client, sid, "SCENARIO:write crash.txt never")
            pending = _asked(client, sid)
            tree = _tree(server)
            assert tree, "the session's claude is running"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
    finally:
        server.stop()
    model_server.clear()
    with serving(tmp_path / "serve", env=env, root=rig.work) as again, again.client() as client:
        for proc in tree:
            assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE
        view = client.get(f"/sessions/{sid}").json()
        assert view["state"] == "lost" and view["session_id"]
        assert [t["state"] for t in view["turns"]] == ["finished", "finished", "lost"]
        expired = client.get(f"/approvals/{pending['id']}").json()
        assert expired["state"] == "expired" and expired["call"]["tool"] == "Write"
        assert not (rig.work / "crash.txt").exists()
        stale = client.post(f"/approvals/{pending['id']}", json={"decision": "allow"})
        assert stale.status_code == 409
        resumed = client.post(f"/sessions/{sid}/resume")
        assert resumed.status_code == 201, resumed.text
        after = _end(client, sid, _start(client, sid, "SCENARIO:text and now?"))
        assert after["status"] == 0 and after["message"] == "and now?", after
        bodies = str([req.body for req in model_server.model_requests()])
        assert "tangerine" in bodies  # the history went with the resumed session
        client.post(f"/sessions/{sid}/close")


def _sleepers(seconds: int) -> list[psutil.Process]:
    """The python sleeps of ``SCENARIO:sleep <seconds>`` running now."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if f"time.sleep({seconds})" in " ".join(proc.info["cmdline"] or ()):
            found.append(proc)
    return found


def _gone(procs: list[psutil.Process]) -> bool:
    """Whether none of ``procs`` runs any more (a zombie has ended)."""
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def _until(check: Any, what: str, within: float = WAIT) -> Any:
    """``check()`` once it is true (a bounded wait on the condition)."""
    deadline = time.monotonic() + within
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} within {within} s"
        time.sleep(0.1)
    return value


def test_a_claude_session_over_http_cli_answer_deadline_and_interrupt(
    claude_rig: Rig, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = claude_rig
    with (
        serving(tmp_path / "serve", env=_env(rig), root=rig.work) as server,
        server.client() as client,
    ):
        sid = _open(client, rig, approval_timeout=8)
        # Answered from the terminal: genesis approvals answer.
        number = _start(client, sid, "SCENARIO:write by-cli.txt hello")
        item = _asked(client, sid)
        assert item["call"]["tool"] == "Write" and item["timeout_s"] == 8
        done = _genesis(server, "answer", item["id"], "allow", "--by", "tester")
        assert done.returncode == 0, done.stderr
        assert _end(client, sid, number)["status"] == 0
        assert (rig.work / "by-cli.txt").read_text().strip() == "hello"
        answer = client.get(f"/approvals/{item['id']}").json()["answer"]
        assert answer["channel"] == "cli" and answer["by"] == "tester" and answer["allowed"]
        # Left to its deadline: the default (deny) applies, a late answer is refused.
        number = _start(client, sid, "SCENARIO:write late.txt never")
        item = _asked(client, sid)
        _until(
            lambda: client.get(f"/approvals/{item['id']}").json()["state"] == "expired",
            "the approval expired",
        )
        late = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        assert late.status_code == 409 and late.json()["error"] == "expired", late.text
        _end(client, sid, number)
        assert not (rig.work / "late.txt").exists()
        # A running tool interrupted over HTTP; the session lives on.
        number = _start(client, sid, "SCENARIO:sleep 47")
        item = _asked(client, sid)
        client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        sleepers = _until(lambda: _sleepers(47), "the allowed sleep started")
        interrupted = client.post(f"/sessions/{sid}/interrupt")
        assert interrupted.status_code == 200, interrupted.text
        # Ended by the interrupt (130), within a wait shorter than the sleep.
        assert turn_ended(client, sid, number, within=20)["status"] == 130
        _until(lambda: _gone(sleepers), "the sleep stopped", within=20)
        after = _end(client, sid, _start(client, sid, "SCENARIO:text still here"))
        assert after["status"] == 0 and after["message"] == "still here", after
        assert client.post(f"/sessions/{sid}/close").status_code == 200


def test_a_codex_turn_steered_over_http(codex_rig: Rig, tmp_path: Path) -> None:
    rig = codex_rig
    with (
        serving(tmp_path / "serve", env=_env(rig), root=rig.work) as server,
        server.client() as client,
    ):
        sid = _open(client, rig)
        number = _start(client, sid, "SCENARIO:sleep 2")
        item = _asked(client, sid)
        client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
        time.sleep(0.5)
        steered = client.post(
            f"/sessions/{sid}/steer", json={"text": "SCENARIO:text steered answer"}
        )
        assert steered.status_code == 200, steered.text
        turn = _end(client, sid, number)
        assert turn["status"] == 0 and turn["message"] == "steered answer", turn
        client.post(f"/sessions/{sid}/close")


def test_a_served_untrusted_claude_run_runs_no_program_of_its_repository(
    claude_rig: Rig, tmp_path: Path
) -> None:
    rig = claude_rig
    repo, marks = rig.work / "repo", tmp_path / "markers"
    repo.mkdir()
    marks.mkdir()
    planted = hooks(repo, marks, rig)  # .claude/settings.json: a hook per event
    body = {"prompt": planted.prompt, "backend": "claude", "cwd": "repo", "timeout": 60}
    with serving(tmp_path / "untrusted", env=_env(rig), root=rig.work) as server:
        with server.client() as client:
            run = server.start(client, body)
            done = server.wait(client, run["id"], within=WAIT)
        assert done["status"] == 0, done
        assert found(planted.markers) == [], "a served untrusted run ran the repository's hooks"
    # The same run, trusted and asking for the project's settings: the hooks run.
    with serving(tmp_path / "trusted", "--trusted-input", env=_env(rig), root=rig.work) as server:
        with server.client() as client:
            run = server.start(client, {**body, "setting_sources": list(ALL_SOURCES)})
            done = server.wait(client, run["id"], within=WAIT)
        assert done["status"] == 0, done
        assert found(planted.markers) == [m.name for m in planted.markers]
