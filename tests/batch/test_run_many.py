"""run_many on this machine: order, isolation, bad requests, cancellation."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import AgentUsageError, CodingGenesisAgent, ConfigError
from coding_genesis.batch import InvalidRequest, RunSpec, run_many, run_many_sync
from coding_genesis.retry import RetryPolicy
from tests.support import FakeCLI, marked_processes, poll_until

pytestmark = pytest.mark.anyio

#: Prompt kinds cycled through a batch, with what each must come back as:
#: (status, error, failure category).
MIX: list[tuple[str, int, str | None, str | None]] = [
    ("hello", 0, None, None),
    ("/fail", 1, "cli_error", "agent_error"),
    ("/rate-limit", 1, "cli_error", "rate_limit"),
    ("/partial", 1, "incomplete", "partial"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def mixed_specs(count: int, tmp_path: Path) -> list[RunSpec]:
    """``count`` failer requests cycling through MIX, each named after its index."""
    return [
        RunSpec(
            prompt=MIX[i % len(MIX)][0],
            backend="failer",
            name=f"run-{i}",
            timeout=30,
            cwd=str(tmp_path),
        )
        for i in range(count)
    ]


def check_mixed(results: list[dict[str, Any]], count: int) -> None:
    assert len(results) == count
    for i, result in enumerate(results):
        _prompt, status, error, category = MIX[i % len(MIX)]
        assert result["index"] == i
        assert result["agent"] == f"run-{i}", "each result comes from its own request"
        assert (result["status"], result["error"]) == (status, error), result
        assert (result["failure"] or {}).get("category") == category


def check_events(events: list[dict[str, Any]], count: int) -> None:
    """Every event carries the index of the request whose agent emitted it."""
    assert events
    for event in events:
        assert event["node"] == f"run-{event['index']}"
    finished = sorted(e["index"] for e in events if e["type"] == "run_finished")
    assert finished == list(range(count))


@pytest.mark.slow
async def test_hundred_failer_runs_come_back_in_order(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    finished_order: list[int] = []
    results = await run_many(
        mixed_specs(100, tmp_path),
        concurrency=8,
        on_event=events.append,
        on_result=lambda r: finished_order.append(r["index"]),
    )
    check_mixed(results, 100)
    check_events(events, 100)
    assert sorted(finished_order) == list(range(100))
    assert [r["status"] for r in results].count(0) == 25


@pytest.mark.slow
def test_run_many_sync(tmp_path: Path) -> None:
    results = run_many_sync(mixed_specs(8, tmp_path), concurrency=4)
    check_mixed(results, 8)


@pytest.mark.slow
async def test_collect_false_keeps_nothing_and_on_result_sees_all(tmp_path: Path) -> None:
    seen: dict[int, dict[str, Any]] = {}
    returned = await run_many(
        [*mixed_specs(12, tmp_path), InvalidRequest(reason="not JSON")],
        concurrency=4,
        on_result=lambda r: seen.__setitem__(r["index"], r),
        collect=False,
    )
    assert returned == []
    assert sorted(seen) == list(range(13))
    check_mixed([seen[i] for i in range(12)], 12)
    assert (seen[12]["status"], seen[12]["error"]) == (64, "invalid_request")


@pytest.mark.slow
def test_run_many_sync_collect_false(tmp_path: Path) -> None:
    seen: list[int] = []
    returned = run_many_sync(
        mixed_specs(6, tmp_path),
        concurrency=3,
        on_result=lambda r: seen.append(r["index"]),
        collect=False,
    )
    assert returned == []
    assert sorted(seen) == list(range(6))


async def test_run_many_sync_refuses_a_running_loop(tmp_path: Path) -> None:
    with pytest.raises(AgentUsageError, match="await run_many"):
        run_many_sync(mixed_specs(1, tmp_path))


@pytest.mark.slow
async def test_bad_requests_are_answered_at_their_index(tmp_path: Path) -> None:
    requests: list[Any] = [
        RunSpec(prompt="hello", backend="failer", name="ok-0"),
        {"backend": "failer"},  # no prompt
        RunSpec(prompt="hello", backend="no-such-backend"),
        {"prompt": "hello", "backend": "failer", "timeout": -1},
        {"prompt": "hello", "backend": "failer", "cwd": str(tmp_path / "missing")},
        InvalidRequest(reason="line 6: invalid JSON"),
        "hello",  # not a mapping
        {"prompt": "hello", "backend": "failer", "color": "blue"},  # unknown option
        {"prompt": "   ", "backend": "failer"},  # empty prompt: the agent answers
        {"prompt": "hello", "backend": "failer", "name": "ok-9"},
    ]
    results = await run_many(requests, concurrency=3)
    assert [r["index"] for r in results] == list(range(len(requests)))
    assert (results[0]["status"], results[0]["agent"]) == (0, "ok-0")
    assert (results[9]["status"], results[9]["agent"]) == (0, "ok-9")
    for i in range(1, 9):
        result = results[i]
        assert result["status"] == 64, result
        assert result["error"] == "invalid_request"
        assert result["is_error"] is True
        assert result["failure"]["category"] == "invalid_task"
    assert "prompt" in results[1]["message"]
    assert "no-such-backend" in results[2]["message"]
    assert "timeout" in results[3]["message"]
    assert "does not exist" in results[4]["message"]
    assert results[5]["message"] == "line 6: invalid JSON"
    assert "got str" in results[6]["message"]
    assert "color" in results[7]["message"]
    assert "empty" in results[8]["message"]
    assert results[1]["backend"] == "failer"


@pytest.mark.slow
async def test_a_crashing_run_does_not_touch_the_others(tmp_path: Path) -> None:
    requests = [
        RunSpec(prompt="hello", backend="failer", name="a"),
        RunSpec(prompt="hello", backend="claude", cli_path=str(tmp_path / "nope"), name="b"),
        RunSpec(prompt="/timeout 0.2", backend="failer", name="c"),
    ]

    def boom(_event: dict[str, Any]) -> None:
        raise RuntimeError("a broken subscriber")

    results = await run_many(requests, concurrency=3, on_event=boom, on_result=boom)
    assert [(r["agent"], r["status"], r["error"]) for r in results] == [
        ("a", 0, None),
        ("b", 127, "not_found"),
        ("c", 0, None),
    ]


@pytest.mark.slow
async def test_concurrency_bounds_runs_in_flight(tmp_path: Path) -> None:
    in_flight = 0
    peak = 0

    def track(event: dict[str, Any]) -> None:
        nonlocal in_flight, peak
        if event["type"] == "run_started":
            in_flight += 1
            peak = max(peak, in_flight)
        elif event["type"] == "run_finished":
            in_flight -= 1

    specs = [RunSpec(prompt="/timeout 1", backend="failer", timeout=30) for _ in range(6)]
    results = await run_many(specs, concurrency=3, on_event=track)
    assert [r["status"] for r in results] == [0] * 6
    assert peak == 3


@pytest.mark.slow
async def test_cancelling_the_batch_stops_every_tree(fake_claude: FakeCLI) -> None:
    """Each CLI ignores SIGTERM and leaves a setsid grandchild that does too."""
    fake_claude.script(
        [
            {"init": True},
            {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
            {"ignore_sigterm": True},
            {"hang": True},
        ]
    )
    spec = RunSpec(
        prompt="work",
        backend="claude",
        cli_path=fake_claude.path,
        env=fake_claude.env(),
        grace=0.3,
        timeout=60,
    )
    started: list[int] = []
    with anyio.move_on_after(30) as outer:
        async with anyio.create_task_group() as tg:

            async def batch() -> None:
                await run_many(
                    [spec] * 4,
                    concurrency=4,
                    on_event=lambda e: (
                        started.append(e["index"]) if e["type"] == "run_started" else None
                    ),
                )
                pytest.fail("the batch should have been cancelled")

            tg.start_soon(batch)
            # Wait until all four CLIs and their grandchildren are running.
            await poll_until(lambda: len(marked_processes([fake_claude.mark])) >= 8)
            tg.cancel_scope.cancel()
    assert not outer.cancelled_caught, "the trees never all started"
    assert sorted(started) == [0, 1, 2, 3]
    assert marked_processes([fake_claude.mark]) == []


async def test_configuration_errors_raise_at_once() -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        await run_many([], concurrency=0)
    with pytest.raises(ConfigError, match="executor"):
        await run_many([], executor="threads")  # type: ignore[arg-type]
    assert await run_many([]) == []


def test_run_spec_is_frozen_and_picklable() -> None:
    spec = RunSpec(prompt="hello", backend="failer", options={"max_turns": 3}, extra_args=("-x",))
    assert pickle.loads(pickle.dumps(spec)) == spec
    with pytest.raises(ValueError, match="frozen"):
        spec.prompt = "other"
    # Every field beyond the request's own is an agent setting (AgentConfig's
    # names, checked when the run's agent is built): no second list of them.
    assert spec.agent_kwargs() == {"options": {"max_turns": 3}, "extra_args": ("-x",)}
    assert spec.run_kwargs() == {"resume": None, "request_key": None}


def quick_retry_spec(tmp_path: Path, name: str) -> RunSpec:
    """Fails once (a network-like failure), then succeeds; retried after 0.05 s."""
    policy = RetryPolicy.default().with_category("network", base_delay=0.05)
    return RunSpec(
        prompt="/fail-then-succeed 1",
        backend="failer",
        name=name,
        grace=0.5,
        options={"state_dir": str(tmp_path / name)},
        retry=policy,
    )


@pytest.mark.slow
async def test_the_agent_retry_policy_runs_inside_each_run(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    specs = [
        quick_retry_spec(tmp_path, "r0"),
        RunSpec(
            prompt="/fail-then-succeed 1",
            backend="failer",
            name="r1",
            options={"state_dir": str(tmp_path / "r1")},
        ),
    ]
    results = await run_many(specs, concurrency=2, on_event=events.append)
    assert (results[0]["status"], results[0]["retry_count"]) == (0, 1)
    assert results[0]["retry_history"][0]["category"] == "network"
    assert (results[1]["status"], results[1]["retry_count"]) == (1, 0), "no policy: one attempt"
    attempts = [e for e in events if e["type"] == "attempt"]
    assert attempts and {e["index"] for e in attempts} == {0}


def test_retry_policies_validate_from_json() -> None:
    spec = RunSpec.model_validate({"prompt": "x", "backend": "failer", "retry": 2})
    assert spec.agent_kwargs() == {"retry": 2}
    spec = RunSpec.model_validate(
        {"prompt": "x", "backend": "failer", "retry": {"deadline": 60, "resume": False}}
    )
    policy = CodingGenesisAgent("failer", **spec.agent_kwargs()).retry_policy
    assert isinstance(policy, RetryPolicy)
    assert (policy.deadline, policy.resume) == (60, False)


def test_a_shared_circuit_breaker_degrades_a_whole_batch(tmp_path: Path) -> None:
    from coding_genesis import CircuitBreaker

    shared = CircuitBreaker(threshold=2, cooldown=60)
    requests = [
        {"prompt": "hi", "backend": "claude", "cli_path": str(tmp_path / "missing")}
        for _ in range(5)
    ]
    results = run_many_sync(requests, concurrency=1, defaults={"circuit_breaker": shared})
    assert [r["status"] for r in results] == [127, 127, 69, 69, 69]
    assert {r["error"] for r in results[2:]} == {"degraded"}
    assert shared.open


@pytest.mark.slow
async def test_an_executor_registers_itself_by_name(tmp_path: Path) -> None:
    """The core knows no integration: an executor registers under a name, and
    ``run_many(executor=name)`` builds a fresh one per batch."""
    from coding_genesis.batch import BatchItem, LocalExecutor, register_executor

    built: list[object] = []

    class Counting(LocalExecutor):
        async def run_one(self, index: int, request: BatchItem, emit: Any) -> dict[str, Any]:
            built.append(self)
            return await super().run_one(index, request, emit)

    register_executor("counting-test", Counting)
    specs = [RunSpec(prompt="hello", backend="failer", cwd=str(tmp_path))] * 2
    # A name registered at run time is not one of the built-in ExecutorName literals.
    results = await run_many(specs, executor="counting-test")  # type: ignore[arg-type]
    assert [r["status"] for r in results] == [0, 0]
    assert len(built) == 2 and built[0] is built[1]
    with pytest.raises(ConfigError, match="unknown executor 'nope'"):
        await run_many(specs, executor="nope")  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_ray_executor_without_ray_is_one_clear_usage_error(tmp_path: Path) -> None:
    """Without Ray installed, ``--executor ray`` says so once, before any run,
    with the fix: no traceback, no failure result per request."""
    import subprocess
    import sys

    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"prompt": "hello", "backend": "failer"}\n')
    code = (
        "import sys; sys.modules['ray'] = None; "  # as if the ray extra were not installed
        "from coding_genesis._cli.main import main; "
        f"sys.exit(main(['run-many', {str(lines)!r}, '--executor', 'ray']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert 'the ray executor needs Ray: pip install "coding-genesis[ray]"' in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.slow
def test_the_core_imports_no_integration_and_config_nothing_above_it() -> None:
    """``coding_genesis.batch`` loads without any integration (the Ray executor is
    imported by name only when ``executor="ray"`` is asked for); the
    configuration loads nothing of the layers above it."""
    import json
    import subprocess
    import sys

    def loaded(module: str, prefixes: tuple[str, ...]) -> list[str]:
        code = (
            f"import json, sys, {module}; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        return list(json.loads(out.stdout))

    assert loaded("coding_genesis.batch", ("coding_genesis.integrations",)) == []
    above = (
        "coding_genesis._failures",
        "coding_genesis._live",
        "coding_genesis._observers",
        "coding_genesis._pipeline",
    )
    assert loaded("coding_genesis.config", above) == []
