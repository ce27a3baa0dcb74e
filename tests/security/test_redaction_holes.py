"""Finding 3: the holes in redaction.  JSON-escaped and split forms in raw
stdout, text cut before it was masked, the returned dict and dict keys, URL
passwords, and the name list (tested in both directions)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._cli.main import main
from coding_genesis._util.redact import MASK, Redactor, is_secret_name, secret_values
from coding_genesis.graph import agent_node
from tests.otel_support import Spans, spans
from tests.support import FakeCLI, present

__all__ = ["spans"]

SECRET = "sk-live-9Hq2secretZ"


@pytest.mark.parametrize(
    "name",
    [
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "BASIC_AUTH",
        "AUTH_HEADER",
        "DATABASE_URL",
        "REDIS_URL",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "MYSQL_PWD",
        "GPG_PASSPHRASE",
        "BROWSER_SESSION",
        "SMTP_PASS",
        "HTTP_AUTHORIZATION",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert Redactor({name: SECRET}).text(f"x {SECRET} y") == f"x {MASK} y"


@pytest.mark.parametrize(
    "name",
    [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "SSH_AUTH_SOCK",
        "PWD",
        "OLDPWD",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_SESSION_TYPE",
        "ANTHROPIC_BASE_URL",
        "PATH",
        "HOME",
    ],
)
def test_names_that_are_not_secrets(name: str) -> None:
    value = "/run/user/1000/ssh-agent.sock-Jane Developer"
    assert not is_secret_name(name)
    assert Redactor({name: value}).text(f"x {value}") == f"x {value}"


def test_url_passwords_are_secrets_whatever_the_name() -> None:
    env = {"UPSTREAM": "postgres://app:hunter22@db.internal:5432/x", "DATABASE_URL": "x" * 3}
    assert secret_values(env) == {"hunter22"}
    redactor = Redactor(env)
    assert (
        redactor.text("connect postgres://app:hunter22@db") == f"connect postgres://app:{MASK}@db"
    )
    assert "hunter22" not in json.dumps(redactor.deep({"dsn": "a:hunter22@b"}))


def test_dict_keys_are_redacted() -> None:
    redactor = Redactor({"API_KEY": SECRET})
    assert redactor.deep({SECRET: 1, "a": [{f"k{SECRET}": SECRET}]}) == {
        MASK: 1,
        "a": [{f"k{MASK}": MASK}],
    }


def emit_raw_and_check(tmp_path: Path, secret: str, steps: list[dict[str, Any]]) -> str:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, *steps, {"answer": "done"}])
    result = fake.agent(transcripts=tmp_path / "runs", env={"SERVICE_TOKEN": secret}).run_sync("x")
    assert result["status"] == 0, result
    return (Path(present(result["transcript"])) / "stdout.jsonl").read_text("utf-8")


@pytest.mark.parametrize(
    "secret",
    ['quote"and\\back-slash9', "accent-é-unicode-ü-9", "multi\nline-secret-9", "tab\tsecret-99"],
    ids=["quote-backslash", "non-ascii", "newline", "tab"],
)
def test_json_escaped_forms_never_reach_raw_stdout(tmp_path: Path, secret: str) -> None:
    as_python = json.dumps(
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": f"python escapes {secret}"}]},
        }
    )  # \uXXXX for non-ASCII
    as_orjson = json.dumps(
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": f"raw utf-8 {secret}"}]},
        },
        ensure_ascii=False,
    )
    upper = as_python.replace("\\u00e9", "\\u00E9").replace("\\u00fc", "\\u00FC")
    raw = emit_raw_and_check(
        tmp_path,
        secret,
        [
            {"raw": as_python, "nl": True},
            {"raw": as_orjson, "nl": True},
            {"raw": upper, "nl": True},
        ],
    )
    assert MASK in raw
    decoded = json.dumps([json.loads(line) for line in raw.splitlines() if line.startswith("{")])
    assert secret not in raw
    assert secret not in json.loads(decoded.replace(MASK, "")).__repr__()
    for line in raw.splitlines():
        if line.startswith("{"):
            assert secret not in json.dumps(json.loads(line), ensure_ascii=False)


@pytest.mark.slow
def test_a_multi_line_secret_split_across_reads(tmp_path: Path) -> None:
    secret = "first-half-AAAA\nsecond-half-BBBB"
    raw = emit_raw_and_check(
        tmp_path,
        secret,
        [
            {"raw": "noise first-half-AAAA", "nl": True},
            {"sleep": 0.3},
            {"raw": "second-half-BBBB noise", "nl": True},
        ],
    )
    assert "first-half-AAAA" not in raw and "second-half-BBBB" not in raw
    assert f"noise {MASK} noise" in raw


@pytest.mark.slow
def test_text_is_masked_before_it_is_cut(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    long_command = "echo " + "x" * 480 + SECRET
    tool = {
        "type": "assistant",
        "message": {
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Bash",
                    "input": {"command": long_command},
                },
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Bash",
                    "input": {"command": long_command},
                },
            ]
        },
    }
    results = {
        "type": "user",
        "message": {
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "y" * 495 + SECRET,
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": "t2", "content": "ok"},
            ]
        },
    }
    fake.script([{"init": True}, {"emit": tool}, {"emit": results}, {"answer": "done"}])
    result = fake.agent(env={"SERVICE_TOKEN": SECRET}).run_sync("x")
    everything = json.dumps(result)
    for prefix in (SECRET[:6], SECRET[:4]):
        assert prefix not in everything, prefix


@pytest.mark.slow
def test_the_returned_dict_is_masked_like_result_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", SECRET)
    fake = FakeCLI(tmp_path, "claude")
    init = {"type": "system", "subtype": "init", "session_id": SECRET, "model": f"m-{SECRET}"}
    done = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "ok",
        "session_id": SECRET,
        "usage": {SECRET: 1, "note": SECRET},
    }
    fake.script([{"emit": init}, {"emit": done}])
    blocked = tmp_path / f"file-{SECRET}"
    blocked.write_text("a file, so the transcript cannot be a directory here")
    result = fake.agent(transcripts=blocked / "runs").run_sync("x")
    assert result["status"] == 0, result
    assert result["session_id"] == MASK and result["model"] == f"m-{MASK}"
    assert result["usage"] == {MASK: 1, "note": MASK}
    assert result["warnings"] and all(SECRET not in w for w in result["warnings"])
    assert SECRET not in json.dumps(result)

    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    argv = ["run", "-b", "claude", "--cli-path", fake.path, "--transcript-dir", str(tmp_path / "r")]
    assert main([*argv, "--json", "x"]) == 0
    assert SECRET not in capsys.readouterr().out
    assert main([*argv, "--events", "x"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert json.loads(last)["session_id"] == MASK and SECRET not in last
    stored = json.loads((tmp_path / "r" / json.loads(last)["run_id"] / "result.json").read_text())
    assert stored["usage"] == {MASK: 1, "note": MASK}


def test_the_start_of_a_cut_stderr_tail_is_masked(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    # 64 KiB of stderr is kept from the end: the cut falls inside the secret.
    cut = 5
    tail_bytes = 64 * 1024
    # The fake writes "SECRET[cut:]\n" + filler, exactly tail_bytes in all, last.
    rest = SECRET[cut:] + "\n"
    fake.script(
        [
            {"stderr": "x" * 1000 + SECRET[:cut] + rest + "y" * (tail_bytes - len(rest) - 1)},
            {"result": "boom", "is_error": True},
            {"exit": 1},
        ]
    )
    result = fake.agent(env={"SERVICE_TOKEN": SECRET}).run_sync("x")
    tail = result["stderr_tail"]
    assert SECRET[cut:] not in tail and SECRET[-4:] not in tail
    assert tail.startswith(MASK)
    redactor = Redactor({"SERVICE_TOKEN": SECRET})
    assert redactor.cut_start(SECRET[-6:] + " rest") == f"{MASK} rest"
    assert redactor.cut_start("abc rest") == "abc rest"


def test_a_secret_in_the_agents_name_is_masked_wherever_the_name_goes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spans: Spans,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The name stamps every event (``node``: the CLI's, the run's, the state
    events READY/BUSY) and names the run in its transcript, run log, spans,
    logs, answer and graph node: masked in all of them, as in the answer."""
    monkeypatch.setenv("SERVICE_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG, logger="coding_genesis")
    agent = CodingGenesisAgent(
        "failer",
        name=f"n-{SECRET}",
        transcripts=tmp_path / "runs",
        run_log=tmp_path / "runs.jsonl",
    )
    published: list[dict[str, Any]] = []
    agent.subscribe(lambda event: published.append(event.to_dict()))

    async def run_then_fail() -> dict[str, Any]:
        await agent.run("hello")
        return await agent_node(agent)({"task": "/fail"})

    update = anyio.run(run_then_fail)
    assert {e["type"] for e in published} >= {"state", "run_started", "result", "run_finished"}
    assert all(e["node"] == f"n-{MASK}" for e in published), published
    assert SECRET not in json.dumps(published)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in written) and (tmp_path / "runs.jsonl") in written
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []
    assert spans.named(f"invoke_agent n-{MASK}") and SECRET not in spans.text()
    assert update["error_context"]["failed_node"] == f"n-{MASK}"
    assert SECRET not in json.dumps(update, default=str)
    assert SECRET not in caplog.text and SECRET not in repr(agent)
