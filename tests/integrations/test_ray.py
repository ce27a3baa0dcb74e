"""run_many on a local Ray cluster (offline, started once for this module)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import ConfigError
from coding_genesis.batch import RunSpec, run_many
from tests.batch.test_run_many import check_events, check_mixed, mixed_specs, quick_retry_spec
from tests.support import RAY_MARK_ENV, FakeCLI, marked_processes, poll_until, wait_ended

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from coding_genesis.integrations.ray import RayRunner  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    mark = uuid.uuid4().hex
    os.environ[RAY_MARK_ENV] = mark  # inherited by every process of the cluster
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
        )
    finally:
        del os.environ[RAY_MARK_ENV]
    try:
        yield
    finally:
        processes = marked_processes([mark], env_names=(RAY_MARK_ENV,))
        ray.shutdown()
        left = wait_ended(processes)
        assert not left, f"ray processes still running after shutdown: {left}"


def sticky_tree_script(fake: FakeCLI) -> RunSpec:
    """A CLI that ignores SIGTERM and leaves a setsid grandchild that does too."""
    fake.script(
        [
            {"init": True},
            {"grandchild": {"setsid": True, "ignore_sigterm": True, "sleep": 600}},
            {"ignore_sigterm": True},
            {"hang": True},
        ]
    )
    return RunSpec(
        prompt="work",
        backend="claude",
        cli_path=fake.path,
        env=fake.env(),
        grace=0.3,
        timeout=60,
    )


async def test_hundred_failer_runs_through_ray(cluster: None, tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    runner = RayRunner(num_cpus=0.25)
    results = await runner.run_many(
        mixed_specs(100, tmp_path), concurrency=8, on_event=events.append
    )
    check_mixed(results, 100)
    check_events(events, 100)


async def test_ray_executor_by_name_without_events(cluster: None, tmp_path: Path) -> None:
    results = await run_many(mixed_specs(4, tmp_path), concurrency=4, executor="ray")
    check_mixed(results, 4)


async def test_cancelled_ray_batch_leaves_no_process(cluster: None, fake_claude: FakeCLI) -> None:
    spec = sticky_tree_script(fake_claude)
    started: list[int] = []
    with anyio.move_on_after(60) as outer:
        async with anyio.create_task_group() as tg:

            async def batch() -> None:
                await RayRunner().run_many(
                    [spec] * 3,
                    concurrency=3,
                    on_event=lambda e: (
                        started.append(e["index"]) if e["type"] == "run_started" else None
                    ),
                )
                pytest.fail("the batch should have been cancelled")

            tg.start_soon(batch)
            await poll_until(lambda: len(marked_processes([fake_claude.mark])) >= 6)
            tg.cancel_scope.cancel()
    assert not outer.cancelled_caught, "the trees never all started"
    assert sorted(started) == [0, 1, 2]
    # run_many returned only after every task had stopped its tree.
    assert marked_processes([fake_claude.mark]) == []


def test_ray_cancel_of_a_running_task_stops_its_tree(cluster: None, fake_claude: FakeCLI) -> None:
    spec = sticky_tree_script(fake_claude)
    generator = RayRunner().submit(spec, 7)
    kind, event = ray.get(next(generator))
    while event["type"] != "run_started":
        kind, event = ray.get(next(generator))
    assert (kind, event["index"]) == ("event", 7)
    deadline = time.monotonic() + 30
    while len(marked_processes([fake_claude.mark])) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(marked_processes([fake_claude.mark])) == 2
    ray.cancel(generator)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(generator._generator_ref, timeout=30)
    assert marked_processes([fake_claude.mark]) == []


async def test_bad_requests_never_reach_the_cluster(cluster: None) -> None:
    results = await RayRunner().run_many(
        [{"prompt": "hello"}, {"prompt": "hello", "backend": "failer", "timeout": 0}],
        concurrency=2,
    )
    assert [(r["index"], r["status"], r["error"]) for r in results] == [
        (0, 64, "invalid_request"),
        (1, 64, "invalid_request"),
    ]
    assert "backend" in results[0]["message"]
    assert "timeout" in results[1]["message"]


def test_ray_retries_stay_off_and_hints_apply() -> None:
    runner = RayRunner(num_cpus=0.5, resources={"coding": 1}, ray_options={"max_retries": 0})
    options = runner.task_options
    assert options["max_retries"] == 0
    assert options["retry_exceptions"] is False
    assert options["num_returns"] == "streaming"
    assert (options["num_cpus"], options["resources"]) == (0.5, {"coding": 1})
    with pytest.raises(ConfigError, match="max_retries"):
        RayRunner(ray_options={"max_retries": 3})
    with pytest.raises(ConfigError, match="num_cpus"):
        RayRunner(num_cpus=-1)


def test_cli_run_many_on_ray(
    cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI joins the running cluster (and leaves it running)."""
    from coding_genesis._cli.main import main

    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        "\n".join(
            [
                '{"prompt": "hello", "backend": "failer"}',
                '{"prompt": "/rate-limit", "backend": "failer"}',
                "not json",
            ]
        )
    )
    code = main(["run-many", str(batch), "--executor", "ray", "--num-cpus", "0.5"])
    out, err = capsys.readouterr()
    assert code == 1
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["index"], r["status"]) for r in results] == [(0, 0), (1, 1), (2, 64)]
    assert len([line for line in err.splitlines() if line.startswith("[")]) == 3
    assert ray.is_initialized()


async def test_our_retry_policy_runs_inside_the_ray_task(cluster: None, tmp_path: Path) -> None:
    """Ray's retries are off; the agent's policy retries within the task."""
    events: list[dict[str, Any]] = []
    results = await RayRunner().run_many(
        [quick_retry_spec(tmp_path, "ray-r0")], on_event=events.append
    )
    assert (results[0]["status"], results[0]["retry_count"]) == (0, 1)
    assert [e["phase"] for e in events if e["type"] == "attempt"].count("started") == 2


async def test_a_task_cancelled_by_someone_else_is_answered(
    cluster: None, fake_claude: FakeCLI, tmp_path: Path
) -> None:
    """ray.cancel from outside the batch: that request answers 130, the others go on."""
    submitted: dict[int, Any] = {}

    class Recording(RayRunner):
        def submit(self, spec: RunSpec, index: int = 0, *, events: bool = True) -> Any:
            submitted[index] = super().submit(spec, index, events=events)
            return submitted[index]

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "session" and event["index"] == 0:
            ray.cancel(submitted[0])

    results = await Recording().run_many(
        [sticky_tree_script(fake_claude), RunSpec(prompt="hello", backend="failer")],
        concurrency=2,
        on_event=on_event,
    )
    assert [(r["status"], r["error"]) for r in results] == [(130, "cancelled"), (0, None)]
    assert marked_processes([fake_claude.mark]) == []


async def test_shared_budget_stops_a_ray_batch_of_twenty(cluster: None, tmp_path: Path) -> None:
    """One $0.05 pot over 20 Ray tasks: it lives in a Ray actor; once spent,
    the runs in flight are stopped at their next usage event and the queued
    ones are not started.  Every result says which, and why."""
    from coding_genesis.budget import Budget
    from tests.observers.test_metering import spending_fakes

    fakes = spending_fakes(tmp_path, 20, messages=5)
    budget = Budget(max_cost_usd=0.05)
    specs = [
        RunSpec.model_validate(
            {
                "prompt": "work",
                "backend": "claude",
                "cli_path": fake.path,
                "env": fake.env(),
                "timeout": 30.0,
                "grace": 0.3,
            }
        )
        for fake in fakes
    ]
    results = await RayRunner(num_cpus=0.25).run_many(specs, concurrency=4, budget=budget)
    assert not budget.on_this_machine  # the pot moved into an actor
    outcomes = [r["budget"]["outcome"] for r in results]
    assert "stopped" in outcomes and "not_started" in outcomes, outcomes
    assert outcomes.count("ran") == 0
    for r in results:
        assert r["error"] == "budget_exceeded", r["message"]
        # Issue 28: a run the spent budget never started has its own name.
        never_started = r["budget"]["outcome"] == "not_started"
        assert r["failure"]["category"] == ("not_started" if never_started else "budget_exceeded")
        assert r["budget"]["shared"] is True and r["budget"]["reason"]
    assert all(r["pid"] is None for r in results if r["budget"]["outcome"] == "not_started")
    assert budget.spent["exceeded"]["limit"] == "max_cost_usd"
    # Each run charged the one pot: what they charged adds up to what it spent.
    charged = sum(r["budget"]["charged"]["cost_usd"] for r in results)
    assert charged == pytest.approx(budget.spent["cost_usd"])
    from tests.tree_support import assert_tree_gone

    for fake in fakes:
        assert_tree_gone(fake)
