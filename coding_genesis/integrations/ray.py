"""Run a batch on Ray: one Ray task per request, supervised inside the task.

Install with ``pip install "coding-genesis[ray]"``.  Ray is imported lazily.

Each request runs as a Ray *streaming generator* task: the worker runs our
agent (so the worker supervises the CLI's process tree: process group,
subreaper, marker scan), yields the run's events as they happen and the result
dict last.  Ray-level retries are off (``max_retries=0``,
``retry_exceptions=False``): only coding-genesis decides what is retried.

Cancellation: Ray's ``ray.cancel`` raises ``KeyboardInterrupt`` in the task
and knows nothing of process groups or ``setsid`` children.  The task body
catches it, cancels the agent's run and waits for the whole tree to be stopped
and reaped before it ends.  ``ray.cancel(..., force=True)`` kills the worker
outright: no cleanup can run then, so :class:`RayRunner` never uses it.

Pointing it at a real cluster::

    ray.init(
        address="ray://head-node:10001",  # or "auto" on a cluster node
        runtime_env={"pip": ["coding-genesis[ray]"]},  # or a container image with it
    )
    results = await RayRunner(num_cpus=0.5).run_many(specs, concurrency=64)

Every node that may run a task needs the CLIs (``claude``, ``codex``) on its
``PATH`` (or ``cli_path`` in each :class:`~coding_genesis.batch.RunSpec`), their
credentials in the worker environment, and the ``cwd`` of each request.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import anyio

from coding_genesis._util.loops import running_event_loop
from coding_genesis.batch import (
    BatchItem,
    EventCallback,
    ResultCallback,
    RunSpec,
    coerce_request,
    execute,
    failure_result,
    register_executor,
    run_many,
)
from coding_genesis.budget import Budget
from coding_genesis.errors import ConfigError
from coding_genesis.integrations.ray_budget import on_ray
from coding_genesis.status import Status

__all__ = ["DEFAULT_NUM_CPUS", "RayRunner", "ray_task_body"]

log = logging.getLogger("coding_genesis.integrations.ray")

#: CPUs Ray reserves per run: a run mostly waits on its CLI.
DEFAULT_NUM_CPUS = 0.25
#: Ray options that would take the retry decision away from us.
_FORBIDDEN = {"max_retries": 0, "retry_exceptions": False, "num_returns": "streaming"}
_DONE = object()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the install
        raise ConfigError('the ray executor needs Ray: pip install "coding-genesis[ray]"') from None
    return ray


def ray_task_body(
    spec: RunSpec, index: int, want_events: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """What each Ray task runs: our agent on a private event loop in a thread,
    while this (main) thread yields ``("event", dict)`` items, then
    ``("result", dict)``.

    On ``KeyboardInterrupt`` (``ray.cancel``) leaving the portal cancels the
    run and joins the loop thread, i.e. waits for the tree to be stopped.
    """
    from anyio.from_thread import start_blocking_portal

    events: queue.SimpleQueue[object] = queue.SimpleQueue()
    emit = events.put if want_events else None
    with start_blocking_portal("asyncio", name=f"genesis-run-{index}") as portal:
        future = portal.start_task_soon(execute, spec, index, emit)
        future.add_done_callback(lambda _f: events.put(_DONE))
        while True:
            try:
                # A timeout keeps this thread responsive to Ray's interrupt.
                item = events.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _DONE:
                break
            assert isinstance(item, dict)
            yield ("event", item)
        result = future.result()
    yield ("result", result)


@functools.cache
def _remote() -> Any:
    ray = _import_ray()
    return ray.remote(**_FORBIDDEN)(ray_task_body)


class RayRunner:
    """An :class:`~coding_genesis.batch.Executor` that runs each request as a Ray task.

    ``num_cpus`` (default 0.25) and ``resources`` / ``memory`` are the Ray
    resource hints of one run; ``ray_options`` passes any other
    ``.options(...)`` (``scheduling_strategy``, ``runtime_env``, ...).  Ray
    is initialized on first use if it is not already: with ``address`` and
    ``init_kwargs`` when given, else a local cluster (``close()`` shuts down
    only a cluster this runner started).  ``cancel_wait`` bounds how long a
    cancelled batch waits for its tasks to report their trees stopped.
    """

    def __init__(
        self,
        *,
        num_cpus: float = DEFAULT_NUM_CPUS,
        resources: Mapping[str, float] | None = None,
        memory: int | None = None,
        ray_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        init_kwargs: Mapping[str, Any] | None = None,
        cancel_wait: float = 30.0,
    ) -> None:
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float) or num_cpus < 0:
            raise ConfigError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
        options: dict[str, Any] = dict(ray_options or {})
        for key, required in _FORBIDDEN.items():
            if key in options and options[key] != required:
                raise ConfigError(
                    f"ray option {key}={options[key]!r} is not allowed: coding-genesis "
                    "alone decides retries, and each run streams its events"
                )
        options.update(_FORBIDDEN)
        options["num_cpus"] = num_cpus
        if resources:
            options["resources"] = dict(resources)
        if memory is not None:
            options["memory"] = memory
        self._options = options
        self._address = address
        self._init_kwargs = dict(init_kwargs or {})
        self._cancel_wait = cancel_wait
        self._started_ray = False
        _import_ray()  # a missing Ray is said once, here, not as each request's failure

    @property
    def task_options(self) -> dict[str, Any]:
        """The ``.options(...)`` of every task (a copy)."""
        return dict(self._options)

    def _ensure_ray(self) -> Any:
        ray = _import_ray()
        if not ray.is_initialized():
            ray.init(address=self._address, **self._init_kwargs)
            self._started_ray = True
        return ray

    def close(self) -> None:
        """Shut Ray down if this runner started it."""
        if self._started_ray:
            self._started_ray = False
            _import_ray().shutdown()

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, spec: RunSpec, index: int = 0, *, events: bool = True) -> Any:
        """Start one run as a Ray task; returns its ``ObjectRefGenerator``, whose
        items are ``("event", dict)`` (when ``events``) then ``("result", dict)``.
        ``ray.cancel()`` on it stops the run's process tree before the task ends."""
        if not isinstance(spec, RunSpec):
            raise ConfigError(f"submit() takes a RunSpec, got {type(spec).__name__}")
        self._ensure_ray()
        _budget_on_ray(spec)
        return _remote().options(**self._options).remote(spec, index, events)

    async def run_one(
        self, index: int, request: BatchItem, emit: EventCallback | None
    ) -> dict[str, Any]:
        spec = coerce_request(index, request)
        if isinstance(spec, dict):
            return spec  # a bad request never reaches the cluster
        if running_event_loop() != "asyncio":
            raise ConfigError("the ray executor runs on asyncio (Ray's awaitables are asyncio's)")
        ray = self._ensure_ray()
        generator = self.submit(spec, index, events=emit is not None)
        result: dict[str, Any] | None = None
        try:
            async for ref in generator:
                kind, payload = await ref
                if kind == "event":
                    if emit is not None:
                        emit(payload)
                else:
                    result = payload
        except anyio.get_cancelled_exc_class():
            await self._cancel(ray, generator)
            raise
        except ray.exceptions.TaskCancelledError:
            return failure_result(
                index,
                "the ray task was cancelled outside this batch; its process tree was stopped",
                status=Status.CANCELLED,
                error="cancelled",
                backend=spec.backend,
            )
        except ray.exceptions.RayError as exc:
            log.warning("ray task of request %d failed: %s", index, exc)
            return failure_result(
                index,
                f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0][:500]}",
                status=Status.INTERNAL,
                error="internal",
                backend=spec.backend,
            )
        if result is None:
            return failure_result(
                index,
                "ray task ended without a result",
                status=Status.INTERNAL,
                error="internal",
                backend=spec.backend,
            )
        return result

    async def _cancel(self, ray: Any, generator: Any) -> None:
        """Cancel the task (KeyboardInterrupt in the worker) and wait until it
        has ended, i.e. until its agent has stopped the process tree."""
        with anyio.CancelScope(shield=True):
            ray.cancel(generator, force=False)
            with anyio.move_on_after(self._cancel_wait) as scope:
                with contextlib.suppress(ray.exceptions.RayError):
                    # The generator's own ref resolves when the task has ended.
                    await generator._generator_ref
            if scope.cancelled_caught:
                log.warning("a cancelled ray task did not end within %gs", self._cancel_wait)

    async def run_many(
        self,
        requests: Iterable[BatchItem],
        *,
        concurrency: int = 4,
        on_event: EventCallback | None = None,
        on_result: ResultCallback | None = None,
        collect: bool = True,
        budget: Budget | None = None,
        deadline: float | None = None,
        **old: Any,
    ) -> list[dict[str, Any]]:
        """:func:`coding_genesis.batch.run_many` on this runner.  A shared
        ``budget`` (or one in a request) moves its pot into a Ray actor
        (:func:`~coding_genesis.integrations.ray_budget.on_ray`), so that every worker
        charges the same one."""
        return await run_many(
            requests,
            concurrency=concurrency,
            executor=self,
            on_event=on_event,
            on_result=on_result,
            collect=collect,
            budget=budget,
            deadline=deadline,
            **old,  # deadline_s=, deprecated: run_many warns
        )


register_executor("ray", RayRunner)


def _budget_on_ray(spec: RunSpec) -> None:
    """A shared budget sent to a worker must keep one pot: move it into a Ray actor."""
    budget = (spec.model_extra or {}).get("budget")
    if isinstance(budget, Budget) and budget.on_this_machine:
        on_ray(budget)
