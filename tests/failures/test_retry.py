"""Retry policies, virtual time, resume, the circuit breaker and the CLI's
retry options.  The scenarios of the user's spec are in features/retry.feature
and features/degraded.feature; these tests pin the details."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from coding_genesis import (
    AgentState,
    AttemptEvent,
    CircuitBreaker,
    CodingGenesisAgent,
    ConfigError,
    RunResult,
    Status,
    retry as retry_mod,
)
from coding_genesis._cli.main import main as cli_main
from coding_genesis._failures.taxonomy import retry_verdict
from coding_genesis._pipeline.retrying import continuation_prompt, escalation_record
from coding_genesis._util.clock import SystemClock, VirtualClock, current_clock, is_testing
from coding_genesis.result import ChildFailure
from coding_genesis.retry import (
    Action,
    Backoff,
    CategoryPolicy,
    RetryPolicy,
    set_testing,
)
from coding_genesis.status import FailureCategory
from tests.support import EventLog, FakeCLI, present

# -- policies ------------------------------------------------------------------


def failure(
    category: str, *, progress: bool = False, retry_after_s: float | None = None
) -> ChildFailure:
    """A failure value as the analysis decides it (the policy only reads it)."""
    try:
        cat = FailureCategory(category)
    except ValueError:
        cat = FailureCategory.UNKNOWN
    retryable, why = retry_verdict(cat, progress=progress)
    return ChildFailure(
        category=cat,
        message="m",
        suggested_retry=retryable,
        retryable_reason=why,
        retry_after_s=retry_after_s,
        suggested_actions=[f"act on {cat}"],
    )


def test_default_policy_has_spec_002_numbers() -> None:
    policy = RetryPolicy.default()
    timeout = policy.for_category("timeout")
    assert (timeout.max_retries, timeout.backoff, timeout.base_delay) == (2, Backoff.LINEAR, 30)
    assert timeout.extend_timeout == 1.5
    network = policy.for_category("network")
    assert (network.max_retries, network.backoff, network.base_delay) == (3, "exponential", 1)
    assert network.max_delay == 30
    rate = policy.for_category("rate_limit")
    assert (rate.max_retries, rate.backoff, rate.base_delay) == (5, "exponential", 60)
    assert rate.use_retry_after
    internal = policy.for_category("internal")
    assert (internal.max_retries, internal.backoff, internal.base_delay) == (1, "fixed", 60)
    assert internal.on_give_up is Action.ESCALATE
    for name in ("auth", "invalid_task", "missing_context", "not_found", "tool_error", "unknown"):
        assert policy.for_category(name).max_retries == 0
    assert policy.resume is True and policy.deadline is None


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        (Backoff.FIXED, [10, 10, 10, 10]),
        (Backoff.LINEAR, [10, 20, 30, 40]),
        (Backoff.EXPONENTIAL, [10, 20, 25, 25]),
    ],
)
def test_backoff_kinds_and_cap(backoff: Backoff, expected: list[float]) -> None:
    policy = CategoryPolicy(max_retries=4, backoff=backoff, base_delay=10, max_delay=25)
    assert [policy.delay(n) for n in range(1, 5)] == [min(e, 25) for e in expected]


def test_full_jitter_draws_below_the_delay() -> None:
    policy = CategoryPolicy(backoff=Backoff.EXPONENTIAL, base_delay=8, jitter=True)
    assert policy.delay(3, random=lambda: 0.25) == 8.0  # 32 * 0.25
    assert policy.delay(3, random=lambda: 0.0) == 0.0


def test_network_backoff_is_capped_at_30_seconds() -> None:
    network = RetryPolicy.default().for_category("network")
    assert [network.delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert network.delay(10_000) == 30  # no overflow


def test_decide_retries_then_gives_up() -> None:
    policy = RetryPolicy.default()
    first = policy.decide(failure("network"), retries_done=0, timeout_s=300)
    assert (first.action, first.delay_s, first.next_timeout_s) == (Action.RETRY, 1.0, 300)
    last = policy.decide(failure("network"), retries_done=3)
    assert last.action is Action.FAIL
    assert "gave up after 3 retries" in last.reason


def test_timeout_retry_extends_the_timeout_only_with_progress() -> None:
    policy = RetryPolicy.default()
    retry = policy.decide(failure("timeout", progress=True), retries_done=1, timeout_s=300)
    assert (retry.action, retry.delay_s, retry.next_timeout_s) == (Action.RETRY, 60.0, 450.0)
    stuck = policy.decide(failure("timeout"), retries_done=0, timeout_s=300)
    assert stuck.action is Action.ESCALATE
    assert "no progress" in stuck.reason and "smaller subtasks" in stuck.reason


def test_retry_after_is_honored_and_capped() -> None:
    policy = RetryPolicy.default()
    assert policy.decide(failure("rate_limit", retry_after_s=30), retries_done=0).delay_s == 30
    assert policy.decide(failure("rate_limit"), retries_done=2).delay_s == 240  # no hint: backoff
    capped = policy.decide(failure("rate_limit", retry_after_s=86400), retries_done=0)
    assert capped.delay_s == 900 and "capped" in capped.reason
    tighter = policy.with_category("rate_limit", retry_after_cap=45)
    assert tighter.decide(failure("rate_limit", retry_after_s=120), retries_done=0).delay_s == 45


def test_non_retryable_categories_fail_or_escalate_at_once() -> None:
    policy = RetryPolicy.default()
    actions = {
        cat: policy.decide(failure(cat), retries_done=0).action
        for cat in ("auth", "not_found", "unknown", "tool_error", "invalid_task", "missing_context")
    }
    assert actions == {
        "auth": Action.ESCALATE,
        "not_found": Action.ESCALATE,
        "unknown": Action.ESCALATE,
        "tool_error": Action.ESCALATE,
        "invalid_task": Action.FAIL,
        "missing_context": Action.FAIL,
    }
    assert policy.decide(failure("no-such-category"), retries_done=0).action is Action.ESCALATE


def test_deadline_gives_up_and_clips_the_next_timeout() -> None:
    policy = RetryPolicy.default(deadline=100)
    clipped = policy.decide(failure("network"), retries_done=0, timeout_s=300, elapsed_s=50)
    assert clipped.action is Action.RETRY and clipped.next_timeout_s == 49
    late = policy.decide(failure("network"), retries_done=0, timeout_s=300, elapsed_s=99.5)
    assert late.action is Action.FAIL and "deadline" in late.reason


def test_parse_accepts_the_documented_forms() -> None:
    assert RetryPolicy.parse(None) is None
    assert RetryPolicy.parse("none") is None
    assert RetryPolicy.parse(False) is None
    assert RetryPolicy.parse("default") == RetryPolicy.default()
    policy = RetryPolicy.default(deadline=5)
    assert RetryPolicy.parse(policy) is policy
    five = RetryPolicy.parse(5)
    assert five is not None
    assert five.for_category("internal").max_retries == 5
    assert five.for_category("network").max_retries == 5
    assert five.for_category("auth").max_retries == 0
    assert RetryPolicy.parse("2") == RetryPolicy.default().with_retries(2)
    assert RetryPolicy.parse({"deadline": 9}) == RetryPolicy.default(deadline=9)
    for bad in ("sometimes", -1, 2.5, {"deadline": -1}, object()):
        with pytest.raises(ConfigError):
            RetryPolicy.parse(bad)


def test_policies_are_frozen_and_validated() -> None:
    policy = RetryPolicy.default()
    with pytest.raises(ValidationError):
        policy.resume = False
    with pytest.raises(ValidationError):
        CategoryPolicy(max_retries=-1)
    with pytest.raises(ValidationError):
        CategoryPolicy(base_delay=math.inf)
    with pytest.raises(ConfigError):
        policy.with_category("network", backoff="sometimes")
    with pytest.raises(ConfigError):
        CodingGenesisAgent("failer", retry="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CodingGenesisAgent("failer", circuit_breaker=3)  # type: ignore[arg-type]


# -- records and prompts -------------------------------------------------------


def _failed(**fields: Any) -> RunResult:
    base: dict[str, Any] = {
        "status": 124,
        "message": "claude timed out after 300s",
        "is_error": True,
        "error": "timeout",
    }
    return RunResult(**{**base, **fields})


def test_continuation_prompt_follows_spec_004() -> None:
    result = _failed(tool_usage={"Edit": 2, "Bash": 1}, files_modified=["src/auth.py"])
    prompt = continuation_prompt("Implement auth", result, "timeout")
    assert prompt == (
        "Continue from previous attempt:\n\n"
        "Already completed:\n✓ Used Edit 2 times\n✓ Used Bash 1 time\n✓ Modified src/auth.py\n\n"
        "Blocker encountered (timeout): claude timed out after 300s\n\n"
        "Please:\n1. Address the blocker\n2. Complete the remaining work\n"
        "3. Verify everything works\n\n"
        "Original request:\nImplement auth"
    )
    body = _failed(message='{"error_message": "x"}', data={"error_message": "cannot import bcrypt"})
    assert "Blocker encountered: cannot import bcrypt\n" in continuation_prompt("p", body)
    assert "(nothing yet)" in continuation_prompt("p", body)


def test_the_policy_never_retries_what_the_failure_says_is_not_retryable() -> None:
    # A policy that would retry auth failures still reads the failure's own
    # answer: the failure is decided once, by the analysis, and not again here.
    policy = RetryPolicy.default().with_category("auth", max_retries=3)
    decision = policy.decide(failure("auth"), retries_done=0)
    assert decision.action is Action.ESCALATE
    assert decision.reason.startswith("not retryable: auth")
    # ... and a policy may retry less than the failure allows.
    stingy = RetryPolicy.default().with_category("network", max_retries=0)
    assert stingy.decide(failure("network"), retries_done=0).action is Action.FAIL


def test_escalation_record_shape() -> None:
    history = [
        {"attempt": 1, "category": "auth", "error": "cli_error", "message": "401", "at": "t1"}
    ]
    auth = failure("auth")
    record = escalation_record(
        run_id="abcdef0123456789",
        failure=auth,
        reason="auth failures are not retried as-is",
        history=history,
        now=1_700_000_000.5,
    )
    assert record["id"] == "ESC-abcdef012345-1700000000500"
    assert record["created_at"] == "2023-11-14T22:13:20.500Z"
    assert record["attempts"] == 1
    assert record["error_history"] == history
    assert record["category"] == "auth" and record["message"] == "401"
    # The escalation's actions are the failure's own list, not a second one.
    assert record["suggested_actions"] == auth.suggested_actions


# -- virtual time ----------------------------------------------------------------


def test_testing_switch_is_scoped_and_records_sleeps() -> None:
    assert isinstance(current_clock(), SystemClock) and not is_testing()
    with retry_mod.testing() as clock:
        assert current_clock() is clock and is_testing()
        before = clock.monotonic()
        anyio.run(clock.sleep, 3600.0)
        assert clock.sleeps == [3600.0]
        assert clock.monotonic() - before >= 3600
        with retry_mod.testing(False) as inner:
            assert inner is None and not is_testing()
        assert current_clock() is clock
    assert not is_testing()
    on = set_testing(True)
    try:
        assert current_clock() is on
    finally:
        set_testing(False)
    assert not is_testing()


def test_the_environment_cannot_switch_the_library_to_virtual_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The switch is in code only; the old GENESIS_RETRY_TESTING is read by the
    # genesis CLI alone (its --retry-testing option), never by the library.
    monkeypatch.setenv("GENESIS_RETRY_TESTING", "1")
    assert not is_testing()
    assert isinstance(current_clock(), SystemClock)


def test_frozen_virtual_clock_moves_only_when_told() -> None:
    clock = VirtualClock(frozen=True)
    start, wall = clock.monotonic(), clock.time()
    clock.advance(10)
    assert (clock.monotonic() - start, clock.time() - wall) == (10, 10)
    with pytest.raises(ConfigError):
        clock.advance(-1)


# -- the agent with a retry policy ------------------------------------------------


def _failer(tmp_path: Path, **kwargs: Any) -> CodingGenesisAgent:
    return CodingGenesisAgent(
        "failer", grace=0.5, options={"state_dir": str(tmp_path / "state")}, **kwargs
    )


@pytest.mark.slow
def test_an_injected_clock_takes_the_backoffs(tmp_path: Path) -> None:
    clock = VirtualClock()
    agent = _failer(tmp_path, retry=2, clock=clock)
    result = agent.run_sync("/fail-then-succeed 2")
    assert result["status"] == 0 and result["retry_count"] == 2
    assert clock.sleeps == [1.0, 2.0]


@pytest.mark.slow
def test_retry_history_entries(tmp_path: Path) -> None:
    with retry_mod.testing():
        result = _failer(tmp_path, retry="default").run_sync("/fail-then-succeed 1")
    (entry,) = result["retry_history"]
    assert entry["attempt"] == 1 and entry["category"] == "network"
    assert entry["action"] == "retry" and entry["delay_s"] == 1.0
    assert entry["status"] == 1 and entry["error"] == "cli_error"
    assert entry["timeout_s"] == 300.0 and entry["next_timeout_s"] == 300.0
    assert entry["resume_session"] == entry["session_id"] == result["session_id"]
    assert entry["message"] == "Simulated transient failure 1 of 1 (connection reset)"
    assert "network: retry 1 of 3 after 1s" in entry["reason"]


@pytest.mark.slow
def test_request_key_is_stable_across_continuations(tmp_path: Path) -> None:
    """The failer counts /fail-then-succeed per request key: a continuation
    prompt must not start a new count (else it would never succeed)."""
    with retry_mod.testing() as clock:
        result = _failer(tmp_path, retry=5).run_sync("/fail-then-succeed 3")
    assert result["status"] == 0
    assert present(result["data"])["retry_count"] == 4
    assert result["retry_count"] == 3 and len(clock.sleeps) == 3


@pytest.mark.slow
def test_retry_fresh_starts_new_sessions(tmp_path: Path) -> None:
    agent = _failer(tmp_path, retry=RetryPolicy.default(resume=False))
    log = EventLog(agent)
    with retry_mod.testing():
        result = agent.run_sync("/fail-then-succeed 1")
    assert result["status"] == 0
    started = [e for e in log.of("attempt") if e["phase"] == "started"]
    assert [e["resume_session"] for e in started] == [None, None]
    assert [e["continuation"] for e in started] == [False, False]
    assert result["session_id"] != result["retry_history"][0]["session_id"]


@pytest.mark.slow
def test_deadline_sets_the_first_timeout(tmp_path: Path) -> None:
    agent = _failer(tmp_path, retry=RetryPolicy.default(deadline=4))
    log = EventLog(agent)
    assert agent.run_sync("hello")["status"] == 0
    assert [e["timeout"] for e in log.of("attempt") if e["phase"] == "started"] == [4]


@pytest.mark.slow
def test_codex_retries_resume_the_thread(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "codex")
    fake.script(
        [
            {"init": True},
            {"emit": {"type": "turn.started"}},
            {"result": "stream disconnected before completion", "is_error": True},
            {"exit": 1},
        ]
    )
    agent = fake.agent(retry=1, env={"FAKE_CLI_SESSION": "thread-42"})
    with retry_mod.testing():
        result = agent.run_sync("fix it")
    assert present(result["failure"])["category"] == "network"
    argvs = [r["argv"] for r in fake.records() if "argv" in r]
    assert len(argvs) == 2
    assert "resume" not in argvs[0]
    assert argvs[1][-3:] == ["resume", "thread-42", "-"]


@pytest.mark.slow
def test_a_rejected_resume_falls_back_to_a_fresh_session(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"stderr": "Error: connection reset"}, {"exit": 1}])
    agent = fake.agent(retry=1)
    scripts: dict[int, list[dict[str, Any]]] = {2: [{"exit": 1}], 3: [{"answer": "done afresh"}]}

    def rescript(event: Any) -> None:
        if (
            isinstance(event, AttemptEvent)
            and event.phase == "started"
            and event.attempt in scripts
        ):
            fake.script(scripts[event.attempt])

    agent.subscribe(rescript)
    with retry_mod.testing():
        result = agent.run_sync("fix it")
    assert result["status"] == 0 and result["message"] == "done afresh"
    argvs = [r["argv"] for r in fake.records() if "argv" in r]
    assert len(argvs) == 3
    assert any(a.startswith("--resume=") for a in argvs[1])
    assert not any(a.startswith("--resume=") for a in argvs[2])
    assert result["retry_count"] == 2
    assert "fresh session" in result["retry_history"][1]["reason"]


def test_a_bad_per_call_retry_is_a_usage_error(tmp_path: Path) -> None:
    result = _failer(tmp_path).run_sync("hello", retry="sometimes")  # type: ignore[arg-type]
    assert result["status"] == Status.USAGE and result["error"] == "invalid_request"


def test_invalid_request_is_not_retried(tmp_path: Path) -> None:
    with retry_mod.testing() as clock:
        result = _failer(tmp_path, retry=3).run_sync("   ")
    # An invalid request is answered before any attempt: nothing to retry.
    assert result["status"] == Status.USAGE and result["error"] == "invalid_request"
    assert result["retry_history"] == [] and result["retry_count"] == 0
    assert present(result["failure"])["retryable"] is False
    assert clock.sleeps == []


@pytest.mark.slow
def test_cancelling_during_a_backoff_leaves_the_agent_ready(tmp_path: Path) -> None:
    slow = RetryPolicy.default().with_category("network", base_delay=600, max_delay=None)
    agent = _failer(tmp_path, retry=slow)
    log = EventLog(agent)
    scopes: list[anyio.CancelScope] = []

    def cancel_while_waiting(event: Any) -> None:
        if isinstance(event, AttemptEvent) and event.phase == "finished":
            scopes[0].cancel()  # lands in the backoff sleep (real time here)

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await agent.run("/fail-then-succeed 3")
        assert scope.cancelled_caught

    agent.subscribe(cancel_while_waiting)
    anyio.run(main)
    finished = [e for e in log.of("attempt") if e["phase"] == "finished"]
    assert [(e["action"], e["delay_s"]) for e in finished] == [("retry", 600)]
    assert agent.state is AgentState.READY
    assert log.of("run_finished")[-1]["cancelled"] is True
    assert len([e for e in log.of("attempt") if e["phase"] == "started"]) == 1


# -- the circuit breaker -------------------------------------------------------


def test_circuit_counts_only_trip_categories() -> None:
    circuit = CircuitBreaker(threshold=2, cooldown=10)
    rec = circuit.record
    assert rec("not_found", "not_found", "claude CLI not found", 0, probe=False) == "trip"
    assert rec("invalid_request", "invalid_task", "empty prompt", 1, probe=False) == "neutral"
    assert circuit.consecutive == 1 and not circuit.open
    assert rec("cli_error", "auth", "401", 2, probe=False) == "trip"
    assert circuit.open and circuit.remaining(5) == 7
    assert circuit.reason == "2 consecutive auth failures (401); cooldown 10s"
    assert rec("timeout", "timeout", "timed out", 3, probe=False) == "other"
    assert circuit.consecutive == 0
    rec(None, None, "", 4, probe=False)
    assert not circuit.open and circuit.remaining(5) == 0


def test_one_breaker_shared_by_agents_degrades_them_together(tmp_path: Path) -> None:
    shared = CircuitBreaker(threshold=2, cooldown=60)
    missing = str(tmp_path / "missing")
    first = CodingGenesisAgent("claude", cli_path=missing, circuit_breaker=shared)
    second = CodingGenesisAgent("codex", cli_path=missing, circuit_breaker=shared)
    bystander = CodingGenesisAgent("claude", cli_path=missing)
    with retry_mod.testing():
        first.run_sync("hi")
        second.run_sync("hi")
        assert first.state is AgentState.DEGRADED and second.state is AgentState.DEGRADED
        assert bystander.state is AgentState.READY  # a breaker of its own
        answer = second.run_sync("hi")
        assert answer["status"] == Status.UNAVAILABLE and answer["error"] == "degraded"
        first.reset_circuit()  # a shared breaker: second's state changes too
        assert AgentState(second.state) is AgentState.READY


def test_breaker_off_never_degrades(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("claude", cli_path=str(tmp_path / "missing"), circuit_breaker=None)
    for _ in range(5):
        assert agent.run_sync("hi")["status"] == Status.NOT_FOUND
    assert agent.state is AgentState.READY and agent.circuit_breaker is None


def test_default_breaker_trips_after_three_and_can_be_reset(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("claude", cli_path=str(tmp_path / "missing"))
    with retry_mod.testing():
        for _ in range(3):
            agent.run_sync("hi")
        assert agent.state is AgentState.DEGRADED
        assert agent.cooldown_remaining == pytest.approx(60, abs=1)
        answer = agent.run_sync("hi", retry=3)
        assert answer["status"] == Status.UNAVAILABLE and answer["retry_history"] == []
        agent.reset_circuit()
        assert AgentState(agent.state) is AgentState.READY and agent.consecutive_failures == 0
        assert agent.run_sync("hi")["status"] == Status.NOT_FOUND


@pytest.mark.slow
def test_a_cancelled_probe_stays_degraded(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"stderr": "Error: authentication failed"}, {"exit": 1}])
    agent = fake.agent(circuit_breaker=CircuitBreaker(threshold=1, cooldown=0))
    agent.run_sync("hi")
    assert agent.state is AgentState.DEGRADED
    fake.script([{"init": True}, {"hang": True}])

    scopes: list[anyio.CancelScope] = []
    agent.subscribe(lambda event: scopes[0].cancel() if event.kind == "session" else None)

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await agent.run("hi")
        assert scope.cancelled_caught

    anyio.run(main)
    assert agent.state is AgentState.DEGRADED
    assert "probe cancelled" in agent.state_reason


# -- the CLI -----------------------------------------------------------------------


@pytest.mark.slow
def test_cli_retries_print_each_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GENESIS_FAILER_STATE_DIR", str(tmp_path))
    with retry_mod.testing() as clock:
        code = cli_main(["run", "--backend", "failer", "--retries", "3", "/fail-then-succeed 2"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["message"] == "Succeeded after 2 failures"
    lines = err.splitlines()
    assert lines[0].startswith("genesis run: attempt 1 failed: network: Simulated transient")
    assert "-> retry in 1.0s" in lines[0]
    assert lines[1].startswith("genesis run: attempt 2 (resuming session ")
    assert lines[-2] == "genesis run: attempt 3 succeeded"
    assert re.fullmatch(r"transcript: genesis show [0-9a-f]{12}", lines[-1])  # where it is recorded
    assert clock.sleeps == [1.0, 2.0]


@pytest.mark.slow
def test_cli_escalation_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GENESIS_FAILER_STATE_DIR", str(tmp_path))
    with retry_mod.testing():
        code = cli_main(["run", "-b", "failer", "--retry-policy", "default", "--json", "/fail"])
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 1
    assert result["retry_count"] == 1 and result["escalation"]["category"] == "agent_error"
    assert "-> escalate (agent_error: gave up after 1 retry)" in err
    # The CLI's "suggested:" line renders the failure's one list of actions.
    actions = result["failure"]["suggested_actions"]
    assert f"suggested: {'; '.join(actions)}" in err
    assert result["escalation"]["suggested_actions"] == actions


@pytest.mark.slow
def test_cli_without_retry_options_is_one_attempt(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GENESIS_FAILER_STATE_DIR", str(tmp_path))
    assert cli_main(["run", "-b", "failer", "--json", "/fail-then-succeed 1"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["retry_count"] == 0 and err == ""
    assert cli_main(["run", "-b", "failer", "--retry-policy", "none", "--retries", "2", "x"]) == 2
    assert "contradicts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["run", "-b", "failer", "--retries", "-1", "x"])
    assert "expected a whole number 0..1000" in capsys.readouterr().err


def test_cli_retry_options_build_the_policy(tmp_path: Path) -> None:
    from coding_genesis._cli.main import build_parser
    from coding_genesis._cli.retry_options import retry_policy

    args = build_parser().parse_args(
        ["run", "--retries", "4", "--retry-deadline", "90", "--retry-fresh", "x"]
    )
    policy = retry_policy(args)
    assert policy is not None
    assert policy.for_category("rate_limit").max_retries == 4
    assert policy.deadline == 90 and policy.resume is False
    assert retry_policy(build_parser().parse_args(["run", "x"])) is None
