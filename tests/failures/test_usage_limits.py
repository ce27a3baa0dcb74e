"""Usage limits: the recorded (codex) and documented (claude) usage-limit
lines give ``retry_after`` at the reset time; the retry policy waits for it
within its deadline (virtual clock) or says when to retry; a batch pauses."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._failures.usagelimits import reset_at
from coding_genesis._util.clock import VirtualClock, iso_utc
from coding_genesis.batch import RunSpec, run_many
from coding_genesis.retry import RetryPolicy
from tests.support import FAKE_BIN, RECORDINGS, FakeCLI, present

pytestmark = pytest.mark.anyio

LIMITS = RECORDINGS / "usage_limits"


def replay(name: str) -> dict[str, Any]:
    path = LIMITS / f"{name}.jsonl"
    flavour = name.split("_", 1)[0]
    rc = int((LIMITS / f"{name}.rc").read_text())
    stderr = (LIMITS / f"{name}.stderr").read_text()
    return dict(
        CodingGenesisAgent(flavour, ledger=False).replay(
            path.read_bytes(), returncode=rc, stderr=stderr
        )
    )


def _local(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%b %d %Y %I:%M %p").astimezone()


def test_recorded_codex_usage_limit_with_a_date_gives_its_reset() -> None:
    result = replay("codex_usage_limit_days")
    failure = result["failure"]
    assert failure["category"] == "rate_limit"
    # "try again at Nov 27th, 2026 11:11 AM" (local time)
    expected = _local("Nov 27 2026 11:11 AM").timestamp()
    assert failure["retry_at"] == iso_utc(expected, "seconds", zulu=True)
    assert failure["retry_after_s"] == pytest.approx(max(0.0, expected - time.time()), abs=5)


def test_recorded_codex_usage_limit_as_a_time_of_day() -> None:
    """ "try again at 11:11 AM": the next 11:11 local time."""
    result = replay("codex_usage_limit")
    failure = result["failure"]
    assert failure["category"] == "rate_limit"
    at = dt.datetime.fromisoformat(failure["retry_at"].replace("Z", "+00:00")).astimezone()
    assert (at.hour, at.minute) == (11, 11)
    assert 0 <= failure["retry_after_s"] <= 86400


def test_documented_claude_usage_limit_lines() -> None:
    epoch = replay("claude_usage_limit_epoch")["failure"]
    assert epoch["category"] == "rate_limit"
    assert epoch["retry_at"] == "2026-11-24T11:11:13Z"
    named = replay("claude_usage_limit_reset")["failure"]
    at = dt.datetime.fromisoformat(named["retry_at"].replace("Z", "+00:00"))
    from zoneinfo import ZoneInfo

    paris = at.astimezone(ZoneInfo("Europe/Paris"))
    assert (paris.hour, paris.minute) == (17, 0)


def test_reset_at_reads_error_bodies_and_ignores_other_text() -> None:
    now = 1_800_000_000.0
    body = {"error": {"type": "usage_limit_reached", "resets_at": 1_800_003_600}}
    assert reset_at(data=body, now=now) == 1_800_003_600
    assert reset_at(data={"resets_in_seconds": 60}, now=now) == now + 60
    assert reset_at("try again at 11:11 AM", now=now) is None  # no usage-limit words
    assert reset_at("usage limit reached; try again at 99:99 PM", now=now) is None


def _limit_script(fake: FakeCLI, reset: float) -> None:
    """claude hitting the usage limit once, then answering (a resumed session)."""
    fake.script(
        [
            {"init": True},
            {
                "emit": {
                    "type": "result",
                    "subtype": "success",
                    "is_error": True,
                    "result": f"Claude AI usage limit reached|{int(reset)}",
                    "session_id": "s-1",
                }
            },
            {"exit": 1},
        ]
    )


@pytest.mark.slow
async def test_retry_policy_waits_for_the_reset_within_its_deadline(
    fake_claude: FakeCLI, tmp_path: Path
) -> None:
    clock = VirtualClock()
    reset = time.time() + 600
    _limit_script(fake_claude, reset)
    policy = RetryPolicy.default(deadline=3600)
    agent = fake_claude.agent(retry=policy, clock=clock)

    # The second attempt answers normally: the script file is replaced once the
    # first attempt has run (the policy's wait is virtual and returns at once).
    def swap(event: Any) -> None:
        if event.kind == "attempt" and event.action == "retry":
            fake_claude.script([{"answer": "done after the reset"}])

    agent.subscribe(swap)
    result = await agent.run("work")
    assert result["status"] == 0, result["message"]
    assert result["message"] == "done after the reset"
    assert len(clock.sleeps) == 1
    assert clock.sleeps[0] == pytest.approx(600, abs=5)  # waited until the reset
    history = result["retry_history"]
    assert [h["action"] for h in history] == ["retry"]
    assert "waiting for the usage limit to reset" in history[0]["reason"]


async def test_retry_policy_says_when_to_retry_past_its_deadline(fake_claude: FakeCLI) -> None:
    clock = VirtualClock()
    reset = time.time() + 7200
    _limit_script(fake_claude, reset)
    agent = fake_claude.agent(retry=RetryPolicy.default(deadline=600), clock=clock)
    result = await agent.run("work")
    assert result["status"] == 1
    failure = present(result["failure"])
    assert failure["category"] == "rate_limit"
    assert failure["retry_at"] == iso_utc(int(reset), "seconds", zulu=True)
    assert clock.sleeps == []  # no wait, no retry burnt on the same error
    assert len([r for r in fake_claude.records() if "argv" in r]) == 1


@pytest.mark.slow
async def test_a_batch_pauses_for_a_usage_limit_within_its_deadline(tmp_path: Path) -> None:
    """The first run hits the limit; the batch waits (virtually) for the reset
    before starting the queued requests, which then succeed."""
    clock = VirtualClock()
    _, _, specs = _limited_batch(tmp_path, reset_in=900)
    results = await run_many(specs, concurrency=1, deadline=3600, clock=clock)
    assert results[0]["failure"]["category"] == "rate_limit"
    assert [r["status"] for r in results[1:]] == [0, 0, 0]
    assert len(clock.sleeps) == 1 and clock.sleeps[0] == pytest.approx(900, abs=5)


async def test_a_batch_past_its_deadline_does_not_start_queued_requests(tmp_path: Path) -> None:
    clock = VirtualClock()
    reset, queued, specs = _limited_batch(tmp_path, reset_in=7200)
    results = await run_many(specs, concurrency=1, deadline=600, clock=clock)
    assert clock.sleeps == []
    for result in results[1:]:
        assert result["status"] == 69 and result["error"] == "usage_limit"
        assert "not started" in result["message"]
        assert result["failure"]["category"] == "not_started"  # issue 28: its own name
        assert result["failure"]["retry_at"] == iso_utc(int(reset), "seconds", zulu=True)
    assert all(not f.records() for f in queued)  # nothing was started


def _spec(fake: FakeCLI) -> RunSpec:
    return RunSpec.model_validate(
        {
            "prompt": "work",
            "backend": "claude",
            "cli_path": str(FAKE_BIN / "claude"),
            "env": fake.env(),
            "timeout": 10.0,
            "ledger": False,
        }
    )


def _limited_batch(
    tmp_path: Path, *, reset_in: float
) -> tuple[float, list[FakeCLI], list[RunSpec]]:
    """A request that hits a usage limit resetting in ``reset_in`` seconds, then three queued
    ones that answer "ok": the reset time, the queued fakes and the four specs."""
    reset = time.time() + reset_in
    limited = FakeCLI(tmp_path)
    _limit_script(limited, reset)
    queued = [FakeCLI(tmp_path) for _ in range(3)]
    for fake in queued:
        fake.script([{"answer": "ok"}])
    return reset, queued, [_spec(f) for f in (limited, *queued)]


def test_recordings_are_listed_in_their_readme() -> None:
    readme = (LIMITS / "README.md").read_text()
    for path in LIMITS.glob("*.jsonl"):
        assert f"`{path.stem}`" in readme
        json.loads(path.read_text().splitlines()[-1])
