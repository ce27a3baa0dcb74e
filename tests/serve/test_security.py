"""The server's door: the token on every route (SSE included), the cookie and its
CSRF rules, Host and Origin against DNS rebinding, no CORS, body limits,
secrets redacted, the untrusted-input rules of a run-many line, cwd under --root."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.support import SCHEMA_PATHS, Served, asked, serving, turn_ended

pytestmark = pytest.mark.timeout(90)

#: One call per route of the schema (the schema test holds this list complete).
CALLS = [
    ("GET", "/server"),
    ("GET", "/runs"),
    ("POST", "/runs"),
    ("GET", "/runs/0123abcd"),
    ("POST", "/runs/0123abcd/cancel"),
    ("GET", "/runs/0123abcd/transcript"),
    ("GET", "/runs/0123abcd/events"),
    ("GET", "/events"),
    ("GET", "/stats"),
    ("GET", "/doctor"),
    ("POST", "/auth/session"),
    ("DELETE", "/auth/session"),
    ("GET", "/approvals"),
    ("GET", "/approvals/events"),
    ("GET", "/approvals/0123abcd"),
    ("POST", "/approvals/0123abcd"),
    ("GET", "/sessions"),
    ("POST", "/sessions"),
    ("GET", "/sessions/0123abcd"),
    ("POST", "/sessions/0123abcd/turns"),
    ("GET", "/sessions/0123abcd/turns/1"),
    ("GET", "/sessions/0123abcd/events"),
    ("POST", "/sessions/0123abcd/interrupt"),
    ("POST", "/sessions/0123abcd/steer"),
    ("POST", "/sessions/0123abcd/close"),
    ("POST", "/sessions/0123abcd/resume"),
    ("GET", "/openapi.json"),
]


def test_the_calls_cover_every_route() -> None:
    names = {"/approvals": "{approval}", "/sessions": "{session}", "/runs": "{run}"}
    templated = {
        path.replace(
            "0123abcd", next((v for k, v in names.items() if path.startswith(k)), "")
        ).replace("/turns/1", "/turns/{number}")
        for _method, path in CALLS
    }
    assert templated == SCHEMA_PATHS | {"/openapi.json"}


@pytest.mark.slow
@pytest.mark.parametrize(("method", "path"), CALLS)
def test_every_route_refuses_a_caller_without_the_token(
    served: Served, method: str, path: str
) -> None:
    with served.anonymous() as client:
        bare = client.request(method, path, json={"prompt": "x"} if method == "POST" else None)
        wrong = client.request(method, path, headers={"Authorization": "Bearer " + "x" * 43})
        basic = client.request(method, path, headers={"Authorization": f"Basic {served.token}"})
    for response in (bare, wrong, basic):
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    assert served.token not in bare.text


@pytest.mark.slow
def test_the_generated_token_is_private(served: Served) -> None:
    path = served.state / "token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.state.stat().st_mode) == 0o700
    assert stat.S_IMODE((served.state / "journal.jsonl").stat().st_mode) == 0o600
    assert len(served.token) >= 40


def _cookie_client(served: Served) -> httpx.Client:
    with served.client() as client:
        login = client.post("/auth/session")
    assert login.status_code == 204
    jar = httpx.Cookies()
    jar.set("genesis_session", login.cookies["genesis_session"], domain="127.0.0.1")
    return served.anonymous(cookies=jar)


@pytest.mark.slow
def test_a_cookie_reads_but_writes_only_with_the_csrf_header_and_origin(served: Served) -> None:
    origin = f"http://{served.host}"
    with _cookie_client(served) as browser:
        assert browser.get("/runs").status_code == 200
        with browser.stream("GET", "/events") as stream:  # EventSource: cookie only
            assert stream.status_code == 200
        plain = browser.post("/runs", json={"prompt": "hi"})
        no_origin = browser.post("/runs", json={"prompt": "hi"}, headers={"X-Genesis-CSRF": "1"})
        no_header = browser.post("/runs", json={"prompt": "hi"}, headers={"Origin": origin})
        cancel = browser.post("/runs/0123abcd/cancel", headers={"Origin": origin})
        for refused in (plain, no_origin, no_header, cancel):
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "csrf"
        ok = browser.post(
            "/runs", json={"prompt": "hi"}, headers={"X-Genesis-CSRF": "1", "Origin": origin}
        )
        assert ok.status_code == 202, ok.text
        assert ok.json()["state"] in ("queued", "running", "finished")
    with served.client() as client:
        served.wait(client, ok.json()["id"])
    bad = httpx.Cookies()
    bad.set("genesis_session", "0" * 64, domain="127.0.0.1")
    with served.anonymous(cookies=bad) as forged:
        assert forged.get("/runs").status_code == 401


@pytest.mark.slow
@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "attacker.example"},
        {"Host": "attacker.example:{port}"},
        {"Host": "127.0.0.2:{port}"},
    ],
    ids=["rebinding", "rebinding-with-port", "other-address"],
)
def test_a_request_for_another_host_is_refused(served: Served, headers: dict[str, str]) -> None:
    port = served.url.rsplit(":", 1)[1]
    with served.client() as client:
        response = client.get("/runs", headers={k: v.format(port=port) for k, v in headers.items()})
    assert response.status_code == 421 and response.json()["error"] == "wrong_host"


@pytest.mark.slow
def test_localhost_is_this_server(served: Served) -> None:
    port = served.url.rsplit(":", 1)[1]
    with served.client() as client:
        assert client.get("/runs", headers={"Host": f"localhost:{port}"}).status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize(
    "origin", ["http://attacker.example", "null", "https://127.0.0.1", "http://localhost:1"]
)
def test_another_sites_page_is_refused_and_no_cors(served: Served, origin: str) -> None:
    with served.client() as client:
        read = client.get("/runs", headers={"Origin": origin})
        write = client.post("/runs", json={"prompt": "x"}, headers={"Origin": origin})
        preflight = client.options(
            "/runs",
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
    for response in (read, write, preflight):
        assert response.status_code == 403 and response.json()["error"] == "wrong_origin"
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


@pytest.mark.slow
def test_no_cors_header_even_for_this_servers_own_origin(served: Served) -> None:
    with served.client() as client:
        response = client.get("/runs", headers={"Origin": f"http://{served.host}"})
        preflight = client.options("/runs", headers={"Origin": f"http://{served.host}"})
    assert response.status_code == 200
    assert preflight.status_code == 405
    for r in (response, preflight):
        assert not [h for h in r.headers if h.lower().startswith("access-control-")]
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.slow
def test_a_body_over_the_limit_is_refused(served: Served) -> None:
    with served.client() as client:
        big = client.post(
            "/runs",
            content=b'{"prompt": "' + b"x" * (1 << 20) + b'"}',
            headers={"Content-Type": "application/json"},
        )

        def chunks() -> Any:
            for _ in range(40):
                yield b"x" * 32768

        streamed = client.post("/runs", content=chunks())
    for response in (big, streamed):
        assert response.status_code == 413, response.text
        assert response.json()["error"] == "too_large"


#: Each field an untrusted run-many line may not set, and the words that refuse it.
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"cli_path": "/bin/sh"}, "refused field(s) cli_path"),
    ({"node_path": "/bin/sh"}, "refused field(s) node_path"),
    ({"env": {"PATH": "/tmp"}}, "refused field(s) env"),
    ({"inherit_env": False}, "refused field(s) inherit_env"),
    ({"env_allow": ["HOME"]}, "refused field(s) env_allow"),
    ({"extra_args": ["--dangerously-skip-permissions"]}, "refused field(s) extra_args"),
    ({"verify": "rm -rf ~"}, "refused field(s) verify"),
    ({"add_dirs": ["/"]}, "refused field(s) add_dirs"),
    ({"permissions": "full"}, "refused field(s) permissions"),
    ({"setting_sources": ["project"]}, "refused field(s) setting_sources"),
    ({"transcripts": "/tmp/x"}, "refused field(s) transcripts"),
    ({"run_log": "/tmp/x"}, "refused field(s) run_log"),
    ({"ledger": False}, "refused field(s) ledger"),
    ({"worktrees_dir": "/tmp"}, "refused field(s) worktrees_dir"),
    ({"hooks": {}}, "refused field(s) hooks"),
    ({"observers": []}, "refused field(s) observers"),
    ({"tools": []}, "refused field(s) tools"),
    ({"options": {"dangerously_skip_permissions": True}}, "options.dangerously_skip_permissions"),
    ({"approver": "allow"}, "an approver comes only from the command line"),
    ({"approve_tools": ["Bash"]}, "an approver comes only from the command line"),
    ({"deny_commands": ["rm"]}, "an approver comes only from the command line"),
    ({"writes_under": ["/"]}, "an approver comes only from the command line"),
    ({"model": "--dangerously-skip-permissions"}, "it would read as a command-line option"),
    ({"resume": "-x"}, "it would read as a command-line option"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fields", "words"), REFUSED, ids=[next(iter(f)) for f, _ in REFUSED])
def test_each_untrusted_field_is_refused(
    served: Served, fields: dict[str, Any], words: str
) -> None:
    with served.client() as client:
        before = client.get("/server").json()["answered"]
        response = client.post("/runs", json={"prompt": "hi", **fields})
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "invalid_request"
        assert words in response.json()["message"]
        assert client.get("/server").json()["answered"] == before, "nothing was queued"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", "the body is empty"),
        (b"[1, 2]", "expected a JSON object"),
        (b"{not json", "invalid JSON"),
        (b'{"backend": "failer"}', "prompt"),
        (b'{"prompt": "x", "backend": "nope"}', "nope"),
        (b'{"prompt": "x", "timeout": -1}', "timeout"),
        (b'{"prompt": 3}', "prompt"),
    ],
)
def test_a_bad_body_gets_the_words_of_a_bad_line(served: Served, body: bytes, words: str) -> None:
    with served.client() as client:
        response = client.post("/runs", content=body)
    assert response.status_code == 422, response.text
    assert words in response.json()["message"]


@pytest.mark.slow
def test_cwd_must_lie_under_the_root(served: Served, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (served.root / "inside").mkdir(exist_ok=True)
    link = served.root / "escape"
    if not link.exists():
        link.symlink_to(outside)
    with served.client() as client:
        for cwd in (str(outside), "../", "escape", "/", str(served.root) + "/../"):
            response = client.post("/runs", json={"prompt": "x", "cwd": cwd})
            assert response.status_code == 422, (cwd, response.text)
            assert "outside the server's root" in response.json()["message"]
        missing = client.post("/runs", json={"prompt": "x", "cwd": "no-such-dir"})
        assert missing.status_code == 422 and "not a directory" in missing.json()["message"]
        ok = served.start(client, {"prompt": "x", "cwd": "inside"})
        assert ok["cwd"] == os.path.realpath(served.root / "inside")
        served.wait(client, ok["id"])


@pytest.mark.slow
def test_trusted_input_accepts_what_untrusted_input_may_not(tmp_path: Path) -> None:
    with serving(tmp_path, "--trusted-input") as server, server.client() as client:
        run = server.start(
            client, {"prompt": "x", "env": {"GENESIS_SERVE_MARK": "1"}, "grace": 0.5}
        )
        done = server.wait(client, run["id"])
        assert done["status"] == 0
        assert "--trusted-input" in server.stderr()
        outside = client.post("/runs", json={"prompt": "x", "cwd": "/"})
        assert outside.status_code == 422, "cwd stays under the root, trusted or not"


@pytest.mark.slow
def test_secrets_are_redacted_in_every_response(tmp_path: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    env = {"GENESIS_TEST_API_KEY": secret}
    with serving(tmp_path, env=env) as server, server.client() as client:
        with client.stream("GET", "/events") as stream:
            run = server.start(client, {"prompt": f"say {secret} and {server.token}"})
            events = []
            for line in stream.iter_lines():
                events.append(line)
                if line.startswith("data: ") and '"state":"finished"' in line:
                    break
        done = server.wait(client, run["id"])
        transcript = client.get(f"/runs/{run['id']}/transcript").text
        listing = client.get("/runs").text
    for text in ("\n".join(events), json.dumps(done), transcript, listing, json.dumps(run)):
        assert secret not in text and server.token not in text
    assert "[REDACTED]" in done["prompt"] and "[REDACTED]" in "\n".join(events)


@pytest.mark.slow
def test_a_warning_when_bound_beyond_loopback(tmp_path: Path) -> None:
    with serving(tmp_path, "--host", "0.0.0.0") as server:
        assert "WARNING: listening on 0.0.0.0" in server.stderr()
        port = server.url.rsplit(":", 1)[1]
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {server.token}"},
        ) as client:
            assert client.get("/server").status_code == 200
    with serving(tmp_path / "loop") as quiet:
        assert "WARNING" not in quiet.stderr()


@pytest.mark.slow
def test_a_given_token_is_used_and_never_written(tmp_path: Path) -> None:
    token = "given-token-0123456789abcdef"
    with serving(tmp_path, env={"GENESIS_SERVE_TOKEN": token}) as server:
        assert server.token == token
        with server.client() as client:
            assert client.get("/server").status_code == 200
        assert not (server.state / "token").exists()


@pytest.mark.slow
def test_a_token_file_must_be_private_and_a_state_dir_has_one_server(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.serve.support import ROOT, server_env

    token = tmp_path / "token"
    token.write_text("from-a-file-0123456789abcdef\n")
    token.chmod(0o644)
    argv = [
        sys.executable,
        "-m",
        "coding_genesis._cli.main",
        "serve",
        "--port",
        "0",
        "--root",
        str(tmp_path),
        "--token-file",
        str(token),
    ]
    env = server_env(tmp_path)
    open_file = subprocess.run(
        argv, env=env, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert open_file.returncode == 2 and "can be read by others" in open_file.stderr
    token.chmod(0o600)
    with serving(tmp_path, "--token-file", str(token)) as server:
        assert server.token == "from-a-file-0123456789abcdef"
        with server.client() as client:
            assert client.get("/server").status_code == 200
        second = subprocess.run(
            [*argv[:6], "--root", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2 and "another genesis serve uses" in second.stderr


#: The fake CLIs (tests/fakes/fakecli.py: ``FAKE_CLI_RECORD`` records how each started).
FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"


@pytest.mark.slow
def test_no_secret_reaches_the_servers_files(tmp_path: Path) -> None:
    """The journals (runs, sessions, approvals) hold a request's prompt, a
    session's settings and its turns' prompts: redacted as the transcripts
    are, of the server's environment and of a request's own ``env``; so is
    every answer of the API about them."""
    secret = "sk-test-0123456789abcdef"  # the server's environment
    own = "ghp-run-own-secret-9876543210"  # a request's env (trusted input)
    env = {"GENESIS_TEST_API_KEY": secret, "GENESIS_CLAUDE_PATH": str(FAKES / "claude")}
    said = f"say {secret} and {own}"
    answers: list[str] = []
    with serving(tmp_path, "--trusted-input", env=env) as server, server.client() as client:
        run = server.start(
            client,
            {"prompt": f"{said}\n/bash echo {secret}", "env": {"GENESIS_RUN_TOKEN": own}},
        )
        assert server.wait(client, run["id"])["status"] == 0
        opened = client.post(
            "/sessions",
            json={
                "model": f"m-{secret}-{own}",  # the failer takes no system_prompt
                "env": {"GENESIS_RUN_TOKEN": own},
                "approval_timeout": 30,
            },
        )
        assert opened.status_code == 201, opened.text
        sid = opened.json()["id"]
        turn = client.post(f"/sessions/{sid}/turns", json={"prompt": f"/bash echo {secret}"})
        assert turn.status_code == 202, turn.text
        item = asked(client, sid)
        answer = {"decision": "deny", "message": said, "by": secret}
        assert client.post(f"/approvals/{item['id']}", json=answer).status_code == 200
        turn_ended(client, sid, 1)
        assert client.post(f"/sessions/{sid}/close").status_code == 200
        prompted = client.post(
            "/sessions",
            json={
                "backend": "claude",
                "system_prompt": said,
                "env": {"GENESIS_RUN_TOKEN": own},
                "approvals": "none",
            },
        )
        assert prompted.status_code == 201, prompted.text
        other = prompted.json()["id"]
        client.post(f"/sessions/{other}/turns", json={"prompt": said})
        turn_ended(client, other, 1)
        assert client.post(f"/sessions/{other}/close").status_code == 200
        for route in (
            f"/runs/{run['id']}",
            "/runs",
            f"/runs/{run['id']}/transcript",
            f"/sessions/{sid}",
            f"/sessions/{sid}/turns/1",
            f"/sessions/{other}",
            f"/sessions/{other}/turns/1",
            "/sessions",
            "/approvals?state=all",
        ):
            answers.append(client.get(route).text)
        journals = {p.name for p in server.state.iterdir()}
    for text in answers:
        assert secret not in text and own not in text, text
    assert {"journal.jsonl", "sessions.jsonl", "approvals.jsonl"} <= journals
    assert server.proc.returncode == 0
    checked = 0
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            checked += 1
            assert secret.encode() not in data and own.encode() not in data, path
    records = (server.state / "journal.jsonl").read_text() + (
        server.state / "sessions.jsonl"
    ).read_text()
    assert "[REDACTED]" in records, "the records are there, masked"
    assert checked > 5


def _sources(argv: list[str]) -> str | None:
    """What ``--setting-sources`` tells a claude (None: not told)."""
    for index, arg in enumerate(argv):
        if arg.startswith("--setting-sources="):
            return arg.partition("=")[2]
        if arg == "--setting-sources" and index + 1 < len(argv):
            return argv[index + 1]
    return None


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted-input"])
def test_a_served_run_and_session_get_the_safe_start(tmp_path: Path, trusted: bool) -> None:
    """Untrusted, a run's CLI reads the user's settings alone: qwen (whose
    default reads the project's) in its safe mode, claude's run and session
    told ``--setting-sources user``; with ``--trusted-input`` a body chooses
    (here the project too).  Seen in what the CLIs were started with."""
    record = tmp_path / "argv.jsonl"
    env = safe_start_env(record)
    flags = ("--trusted-input",) if trusted else ()
    asked = {"setting_sources": ["user", "project"]} if trusted else {}
    with serving(tmp_path, *flags, env=env) as server, server.client() as client:
        qwen = server.start(client, {"prompt": "hi", "backend": "qwen", **asked})
        assert server.wait(client, qwen["id"])["status"] == 0
        run = server.start(client, {"prompt": "hi", "backend": "claude", **asked})
        assert server.wait(client, run["id"])["status"] == 0
        opened = client.post("/sessions", json={"backend": "claude", "approvals": "none", **asked})
        assert opened.status_code == 201, opened.text
        client.post(f"/sessions/{opened.json()['id']}/close")
    assert_safe_start(record, trusted)


def safe_start_env(record: Path) -> dict[str, str]:
    """A server's environment whose claude and qwen are the fakes, which record
    what they were started with (and qwen's safe mode) in ``record``."""
    return {
        "GENESIS_CLAUDE_PATH": str(FAKES / "claude"),
        "GENESIS_QWEN_PATH": str(FAKES / "qwen"),
        "FAKE_CLI_RECORD": str(record),
        "FAKE_CLI_RECORD_ENV": "QWEN_CODE_SAFE_MODE",
    }


def assert_safe_start(record: Path, trusted: bool) -> None:
    """qwen's run, claude's run and claude's session, in that order, were
    started on the user's settings alone (``trusted``: the project's too, as
    asked)."""
    entries = [json.loads(line) for line in record.read_text().splitlines()]
    started = [entry for entry in entries if "argv" in entry]
    assert len(started) == 3, started  # qwen's run, claude's run and claude's session
    assert started[0]["env"] == {"QWEN_CODE_SAFE_MODE": None if trusted else "1"}
    expected = "user,project" if trusted else "user"
    assert [_sources(entry["argv"]) for entry in started[1:]] == [expected] * 2, started
