"""Secrets from the environment never reach a response, an event, a failure
report or the run log, wherever the CLI prints them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from coding_genesis._failures.report import parse_failure_report
from coding_genesis._observers.runlog import failure_stats
from tests.pipeline.test_always_responds import tool_result, tool_use
from tests.support import EventLog, FakeCLI

SECRET = "sk-test-4f1b9c0d2e7a8b3c5d6e"
TOKEN = "ghp_fakeToken0123456789abcdef"


def leaky_script(fail: bool) -> list[dict[str, Any]]:
    """The fake CLI prints the secrets in text, tool input, tool output and stderr."""
    steps: list[dict[str, Any]] = [
        {"init": True},
        {
            "emit": {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": f"using key {SECRET}"}]},
            }
        },
        tool_use("t1", "Bash", command=f"curl -H 'Authorization: Bearer {SECRET}' x"),
        tool_result("t1", f"echo {SECRET} and {TOKEN}"),
        tool_use("t2", "Write", file_path=f"out-{TOKEN}.txt", content=SECRET),
        tool_result("t2", "ok"),
        tool_use("t3", "Bash", command="false"),
        tool_result("t3", f"error: bad key {SECRET}", is_error=True),
        {"stderr": f"Error: authentication failed for {SECRET} / {TOKEN}"},
    ]
    if fail:
        body = json.dumps({"error_code": "AUTH", "error_message": f"key {SECRET} refused"})
        steps += [{"result": body, "is_error": True}, {"exit": 1}]
    else:
        steps += [{"result": f"done with {SECRET}"}]
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("fail", [True, False])
@pytest.mark.parametrize("where", ["process environment", "agent env option"])
def test_secrets_are_redacted_everywhere(
    fail: bool,
    where: str,
    tmp_path: Path,
    portal: BlockingPortal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_log = tmp_path / "runs.jsonl"
    env: dict[str, str] = {}
    if where == "process environment":
        monkeypatch.setenv("FAKE_SERVICE_API_KEY", SECRET)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    else:
        env = {"FAKE_SERVICE_API_KEY": SECRET, "GITHUB_TOKEN": TOKEN}
    fake = FakeCLI(tmp_path, "claude")
    fake.script(leaky_script(fail))
    agent = fake.agent(env=env, run_log=run_log)
    events = EventLog(agent)
    response = portal.call(agent.run, "do it")

    everything = json.dumps(response) + json.dumps(events.events) + run_log.read_text()
    assert SECRET not in everything and TOKEN not in everything
    assert "[REDACTED]" in response["message"]
    assert response["completed_steps"][0] == (
        "Ran Bash: curl -H 'Authorization: Bearer [REDACTED]' x"
    )
    if fail:
        failure = response["failure"]
        assert failure["category"] == "auth"
        assert "[REDACTED]" in failure["stderr_tail"]
        assert "[REDACTED]" in response["error_context"]["error_detail"]
        assert failure["files_modified"] == ["out-[REDACTED].txt"]
        report = response["failure_report"]
        assert SECRET not in report and "[REDACTED]" in report
        assert parse_failure_report(report).files_modified == ["out-[REDACTED].txt"]
        assert response["data"]["error_message"] == "key [REDACTED] refused"
        stats = failure_stats(run_log, since_s=None)
        assert stats["by_category"]["auth"]["count"] == 1
        assert SECRET not in json.dumps(stats)
    else:
        assert response["status"] == 0
        assert response["message"] == "done with [REDACTED]"


@pytest.mark.slow
def test_a_secret_with_characters_the_report_escapes(
    tmp_path: Path, portal: BlockingPortal, monkeypatch: pytest.MonkeyPatch
) -> None:
    odd = "p@ss\\w0rd, <status>x"
    monkeypatch.setenv("DB_PASSWORD", odd)
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            tool_use("t1", "Write", file_path=f"cfg {odd}.ini", content="x"),
            tool_result("t1", "ok"),
            {"result": f"login failed: {odd}\nsecond line", "is_error": True},
            {"exit": 1},
        ]
    )
    response = portal.call(fake.agent(run_log=tmp_path / "runs.jsonl").run, "do it")
    report = response["failure_report"]
    assert odd not in json.dumps(response) and odd not in report
    assert "p@ss" not in report  # neither raw nor escaped
    assert response["failure"]["files_modified"] == ["cfg [REDACTED].ini"]
    assert parse_failure_report(report).message == "login failed: [REDACTED]\nsecond line"


def test_deep_redaction_finds_secrets_that_json_escapes() -> None:
    """``deep`` checks one serialization for the secrets before walking: the
    check must see a secret wherever it sits, however JSON escapes it."""
    from coding_genesis._util.redact import MASK, Redactor

    odd = 'se"cr\\et-€-\n-0123'
    redactor = Redactor({"MY_TOKEN": odd, "API_KEY": SECRET})
    data = {
        "a": [{"b": f"x {odd} y"}],
        7: SECRET,  # a non-string key
        "t": (SECRET,),
        "huge": 2**70,  # beyond what orjson encodes: walked instead
    }
    assert redactor.deep(data) == {
        "a": [{"b": f"x {MASK} y"}],
        7: MASK,
        "t": [MASK],
        "huge": 2**70,
    }
    clean = {"a": [1, {"b": "nothing to hide"}], 2: None}
    assert redactor.deep(clean) is clean  # no secret: no copy
    assert redactor.deep(f"{odd}!") == f"{MASK}!"


def test_agents_share_one_redactor_while_the_environment_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from coding_genesis._util.redact import Redactor

    monkeypatch.setenv("PERF2_API_KEY", "first-secret-value-1")
    one = Redactor.of_environment({"EXTRA_TOKEN": "extra-secret-value"})
    assert Redactor.of_environment({"EXTRA_TOKEN": "extra-secret-value"}) is one
    assert one.text("a first-secret-value-1 b extra-secret-value") == "a [REDACTED] b [REDACTED]"
    other = Redactor.of_environment({})
    assert other is not one and other.text("extra-secret-value") == "extra-secret-value"
    monkeypatch.setenv("PERF2_API_KEY", "second-secret-value-2")  # a changed environment
    two = Redactor.of_environment({"EXTRA_TOKEN": "extra-secret-value"})
    assert two is not one
    assert two.text("first-secret-value-1 second-secret-value-2") == (
        "first-secret-value-1 [REDACTED]"
    )
