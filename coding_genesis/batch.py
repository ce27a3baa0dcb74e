"""Run many requests at once: a bounded pool on this machine (or on Ray), results
in input order.

Each request is a :class:`RunSpec` (frozen, picklable, validated) or a plain
mapping of the same fields.  Every run gets its own :class:`CodingGenesisAgent`
inside one anyio task group; a :class:`anyio.CapacityLimiter` bounds how many
run at once.  A bad request (unknown backend, bad timeout, missing cwd, a
mapping that does not validate) is answered with a failure dict at its index;
it never aborts the batch.  Cancelling :func:`run_many` cancels every run, and
each run stops its whole process tree before the cancellation propagates.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from coding_genesis._batch.gate import LimitGate
from coding_genesis._batch.trials import TrialTally, check_repeat
from coding_genesis._failures.analysis import failed_result
from coding_genesis._util.clock import Clock, current_clock
from coding_genesis._util.loops import running_event_loop
from coding_genesis._util.renamed import warn_renamed
from coding_genesis._util.signatures import blocking_twin
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.config import AgentSettings, seconds
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.request import CallOptions
from coding_genesis.status import ErrorCode, Status

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis.budget import Budget

__all__ = [
    "BatchItem",
    "BatchSettings",
    "EventCallback",
    "Executor",
    "ExecutorName",
    "InvalidRequest",
    "LocalExecutor",
    "PoolSource",
    "ResultCallback",
    "RunSpec",
    "coerce_request",
    "execute",
    "failure_result",
    "register_executor",
    "run_many",
    "run_many_sync",
]

log = logging.getLogger("coding_genesis.batch")

#: The executors the core knows by name (others register: :func:`register_executor`).
ExecutorName: TypeAlias = Literal["local", "ray"]


class BatchSettings(AgentSettings, CallOptions, total=False):
    """A :class:`RunSpec`'s fields besides ``prompt`` and ``backend``: the
    agent's settings (:class:`~coding_genesis.config.AgentSettings`) and the
    request's session options (``resume``, ``request_key``); ``tools`` is
    refused (a batch never names host code)."""


#: The settings a batch never takes: a batch line never names host code.
_NOT_IN_A_BATCH = frozenset({"tools"})
#: Every field a RunSpec accepts, derived from the two definitions.
_SPEC_FIELDS = (
    frozenset({"prompt", "backend"}) | BatchSettings.__optional_keys__
) - _NOT_IN_A_BATCH


def _unknown_fields(names: Iterable[object]) -> str | None:
    unknown = sorted(str(name) for name in names if name not in _SPEC_FIELDS)
    if not unknown:
        return None
    if _NOT_IN_A_BATCH.intersection(unknown):
        return (
            "tools cannot be set in a batch: a batch never names host code "
            "(pass tools= to an agent's run() or session())"
        )
    return (
        f"unknown field(s) {', '.join(map(repr, unknown))}; valid: prompt, backend, "
        f"{', '.join(sorted(_SPEC_FIELDS - {'prompt', 'backend'}))}"
    )


class RunSpec(BaseModel):
    """One request of a batch: the prompt, the backend, and the agent's settings.

    Only ``prompt`` and ``backend`` are required.  Every other field is an
    :class:`~coding_genesis.config.AgentConfig` setting (``timeout``, ``cwd``,
    ``model``, ``retry``, ``options``, ...), checked when the run's agent is
    built: an invalid one answers that request with a failure; an unknown name
    is a :class:`~coding_genesis.errors.ConfigError` at once.  A setting given
    as ``None`` keeps the default.  ``resume`` and ``request_key`` go to
    :meth:`CodingGenesisAgent.run`.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    #: Text, or text with images and files (:mod:`coding_genesis.prompts`: a
    #: JSON line writes an image or file as an object; one naming a path needs
    #: ``--trusted-input``).
    prompt: str | list[Any]
    backend: str
    resume: str | None = None
    request_key: str | None = None

    if TYPE_CHECKING:

        def __init__(
            self, *, prompt: str | list[Any], backend: str, **fields: Unpack[BatchSettings]
        ) -> None: ...

    else:

        def __init__(self, **fields: Any) -> None:
            problem = _unknown_fields(fields)
            if problem is not None:
                raise ConfigError(f"RunSpec: {problem}")
            super().__init__(**fields)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """``model_validate`` refuses an unknown name too (a ValidationError)."""
        if isinstance(data, Mapping):
            problem = _unknown_fields(data)
            if problem is not None:
                raise ValueError(problem)
        return data

    def agent_kwargs(self) -> dict[str, Any]:
        """The agent settings of this request (defaults left out)."""
        return {k: v for k, v in (self.model_extra or {}).items() if v is not None}

    def run_kwargs(self) -> CallOptions:
        """Keyword arguments for :meth:`CodingGenesisAgent.run`."""
        return {"resume": self.resume, "request_key": self.request_key}


class InvalidRequest(BaseModel):
    """A request that could not even be read (e.g. a line that is not JSON);
    it is answered with a failure at its index like any other bad request."""

    model_config = ConfigDict(frozen=True)

    reason: str


#: One item of a batch: a RunSpec, a mapping of its fields, or a line that
#: could not be read.
BatchItem: TypeAlias = RunSpec | Mapping[str, Any] | InvalidRequest
#: Receives each event as a dict (``Event.to_dict()``) tagged with ``index``.
EventCallback: TypeAlias = Callable[[dict[str, Any]], object]
#: Receives each result dict (with its ``index``) as soon as its run finishes.
ResultCallback: TypeAlias = Callable[[dict[str, Any]], object]


def failure_result(
    index: int,
    message: str,
    *,
    status: int = Status.USAGE,
    error: str = "invalid_request",
    backend: str = "",
) -> dict[str, Any]:
    """A failure answered without running anything, shaped like every result."""
    result: dict[str, Any] = dict(failed_result(status, error, message, backend=backend).to_dict())
    result["index"] = index
    return result


def coerce_request(index: int, request: object) -> RunSpec | dict[str, Any]:
    """The :class:`RunSpec` of a request, or the failure dict that answers it."""
    if isinstance(request, RunSpec):
        return request
    if isinstance(request, InvalidRequest):
        return failure_result(index, request.reason)
    if isinstance(request, Mapping):
        backend = request.get("backend")
        problem = _unknown_fields(request)
        if problem is not None:
            return failure_result(
                index,
                f"invalid request: {problem}",
                backend=backend if isinstance(backend, str) else "",
            )
        try:
            return RunSpec.model_validate(request)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'request'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            return failure_result(
                index,
                f"invalid request: {problems}",
                backend=backend if isinstance(backend, str) else "",
            )
    return failure_result(
        index, f"invalid request: expected a RunSpec or a mapping, got {type(request).__name__}"
    )


async def execute(
    request: object, index: int = 0, emit: EventCallback | None = None
) -> dict[str, Any]:
    """Run one request with a fresh agent and return its result dict (with ``index``).

    Never raises for a bad request or a runtime failure; re-raises cancellation
    once the run's process tree is gone.  This is also what a Ray task runs.
    """
    spec = coerce_request(index, request)
    if isinstance(spec, dict):
        return spec
    try:
        agent = CodingGenesisAgent(spec.backend, **spec.agent_kwargs())
    except ConfigError as exc:
        return failure_result(index, str(exc), backend=spec.backend)
    except Exception as exc:  # a constructor bug or an odd value: still answer
        log.exception("could not build the agent of request %d", index)
        return failure_result(
            index,
            f"could not build the agent: {exc!r}",
            status=Status.INTERNAL,
            error="internal",
            backend=spec.backend,
        )
    if emit is not None:

        def tagged(event: Any) -> None:
            emit({**event.to_dict(), "index": index})

        agent.subscribe(tagged)
    try:
        result: dict[str, Any] = dict(await agent.run(spec.prompt, **spec.run_kwargs()))
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # run() answers every runtime failure; this is a bug of ours
        log.exception("run of request %d raised", index)
        return failure_result(
            index,
            f"internal error in coding-genesis: {exc!r}",
            status=Status.INTERNAL,
            error="internal",
            backend=spec.backend,
        )
    result["index"] = index
    return result


class Executor(Protocol):
    """Runs one request of a batch; :func:`run_many` bounds and orders them."""

    async def run_one(
        self, index: int, request: BatchItem, emit: EventCallback | None
    ) -> dict[str, Any]: ...


class LocalExecutor:
    """Runs each request in this process (each run supervises its own tree)."""

    async def run_one(
        self, index: int, request: BatchItem, emit: EventCallback | None
    ) -> dict[str, Any]:
        return await execute(request, index, emit)


class PoolSource(Protocol):
    """What ``run_many(pool=...)`` draws from: an entered
    :class:`~coding_genesis.pool.SessionPool` (the pool is above the batch: it
    brings the executor that runs each request as one turn of its sessions)."""

    @property
    def serving(self) -> bool: ...

    def executor(self) -> Executor: ...


#: Executors by name.  An integration registers its own when it is imported
#: (:func:`register_executor`): the core never imports an integration, they
#: depend on it.
_EXECUTORS: dict[str, Callable[[], Executor]] = {"local": LocalExecutor}
#: The module that registers a named executor the core knows of, imported by
#: name (``importlib``) only when that executor is asked for: ``"ray"`` works
#: without the caller importing the integration, and without Ray otherwise.
_REGISTERED_BY = {"ray": "coding_genesis.integrations.ray"}


def register_executor(name: str, factory: Callable[[], Executor]) -> None:
    """Make ``run_many(executor=name)`` run on ``factory()`` (a new executor per batch)."""
    _EXECUTORS[name] = factory


def _executor(executor: str | Executor) -> Executor:
    if not isinstance(executor, str):
        return executor
    if executor not in _EXECUTORS and executor in _REGISTERED_BY:
        importlib.import_module(_REGISTERED_BY[executor])  # registers it
    factory = _EXECUTORS.get(executor)
    if factory is None:
        raise ConfigError(f"unknown executor {executor!r}: use 'local', 'ray' or an Executor")
    return factory()


def _call_safely(callback: Callable[[dict[str, Any]], object], value: dict[str, Any]) -> None:
    try:
        callback(value)
    except Exception:
        log.exception("callback %r failed; the batch goes on", callback)


def with_defaults(request: BatchItem, defaults: Mapping[str, Any] | None) -> BatchItem:
    """``request`` with agent settings it does not set itself taken from ``defaults``."""
    if not defaults:
        return request
    if isinstance(request, RunSpec):
        missing = {k: v for k, v in defaults.items() if (request.model_extra or {}).get(k) is None}
        return RunSpec.model_validate({**request.model_dump(), **missing})
    if isinstance(request, Mapping):
        return {**defaults, **{k: v for k, v in request.items() if v is not None}}
    return request


async def run_many(
    requests: Iterable[BatchItem],
    *,
    concurrency: int = 4,
    executor: ExecutorName | Executor = "local",
    on_event: EventCallback | None = None,
    on_result: ResultCallback | None = None,
    defaults: Mapping[str, Any] | None = None,
    collect: bool = True,
    budget: Budget | None = None,
    deadline: float | None = None,
    clock: Clock | None = None,
    repeat: int = 1,
    pool: PoolSource | None = None,
    deadline_s: float | None = None,
) -> list[dict[str, Any]]:
    """Run every request, at most ``concurrency`` at a time; one result dict per
    request, in input order, each with its ``index``.

    ``budget``: a :class:`~coding_genesis.budget.Budget` for every request
    that does not set its own; one shared pot caps the batch (runs in flight
    are stopped once it is spent, queued ones are not started; each result's
    ``budget`` says which).  A usage limit (a failure with ``retry_at``)
    pauses the batch until the reset if ``deadline`` (seconds from now;
    None: no deadline) allows, else the queued requests are answered, not
    started, with status 69, ``error: usage_limit`` and when to retry.
    ``clock``: time source of those waits (a :class:`~coding_genesis.VirtualClock` in tests).

    ``repeat=N`` (trials): each request runs N times (each in its own worktree
    with ``isolation="worktree"``); one result per trial, with its ``index``
    and ``repeat`` (1..N), then one summary per request (``"type": "summary"``:
    pass rate by status and by verify, cost and duration spread), in that
    order in the list and to ``on_result`` once its last trial is in.

    ``collect=False`` keeps no result: the call returns an empty list and the
    results reach the caller only through ``on_result`` (a big batch then does
    not hold one dict per request in memory).

    ``executor`` is ``"local"`` (this machine), ``"ray"`` (a default
    :class:`~coding_genesis.integrations.ray.RayRunner`: the Ray already
    initialized, else a local cluster left running) or any :class:`Executor`.
    ``on_event`` gets every run event tagged with ``index``; ``on_result`` gets
    each result as its run finishes.  A failing callback is logged and ignored.
    ``defaults``: agent settings for every request that does not set them
    (``genesis run-many`` records each run this way: ``transcripts``, ``run_log``).

    ``pool``: a :class:`~coding_genesis.pool.SessionPool` (entered) each
    request takes a warm session from, for one turn (the pool's executor);
    on this machine, with the pool's settings (its budget too).

    ``deadline_s``: deprecated, the old name of ``deadline`` (it warns).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
    repeat = check_repeat(repeat)
    runner = _runner_of(executor, budget, pool)
    if budget is not None:
        budget.hold()  # a batch's budget is shared by its requests
        defaults = {**(defaults or {}), "budget": budget}
    if deadline_s is not None:
        warn_renamed("run_many", "deadline_s", "deadline")
        deadline = deadline_s
    gate = LimitGate(clock or current_clock(), seconds("deadline", deadline, allow_none=True))
    items = [with_defaults(request, defaults) for request in requests]
    if repeat > 1:
        return await _trials(items, repeat, runner, concurrency, on_event, on_result, collect)
    results: list[dict[str, Any] | None] = [None] * len(items) if collect else []
    answered = 0
    limiter = anyio.CapacityLimiter(concurrency)
    emit = None
    if on_event is not None:
        emit = functools.partial(_call_safely, on_event)

    async def one(index: int, request: BatchItem, slot: object) -> None:
        nonlocal answered
        try:
            refusal = await gate.admit()
            try:
                if refusal is not None:
                    result = _not_started(index, refusal)
                else:
                    result = await runner.run_one(index, request, emit)
                    gate.note(result)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # an executor bug must not take the batch down
                log.exception("executor failed on request %d", index)
                result = failure_result(
                    index,
                    f"executor failed: {exc!r}",
                    status=Status.INTERNAL,
                    error="internal",
                )
        finally:
            limiter.release_on_behalf_of(slot)
        result["index"] = index
        answered += 1
        if collect:
            results[index] = result
        if on_result is not None:
            _call_safely(on_result, result)

    async with anyio.create_task_group() as tg:
        # Requests start in input order (a slot is taken before the task
        # exists), whatever the event loop's scheduling order.
        for index, request in enumerate(items):
            slot = object()
            await limiter.acquire_on_behalf_of(slot)
            tg.start_soon(one, index, request, slot)
    assert answered == len(items), "every request is answered"
    return [r for r in results if r is not None]


def _runner_of(
    executor: ExecutorName | Executor, budget: Budget | None, pool: PoolSource | None
) -> Executor:
    """What runs each request: the executor named or given, or the pool's own
    (on this machine, with the pool's settings: no executor= or budget=)."""
    if pool is None:
        return _executor(executor)
    if executor != "local" or budget is not None:
        raise ConfigError(
            "pool= runs on this machine with the pool's settings: no executor= "
            "or budget= (give the pool its budget)"
        )
    if not pool.serving:
        raise AgentUsageError("pool= needs an entered pool (`async with SessionPool(...)`)")
    return pool.executor()


def _not_started(index: int, refusal: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to a request a usage limit kept from starting."""
    return failure_result(
        index,
        str(refusal["message"]),
        status=Status.UNAVAILABLE,
        error=ErrorCode.USAGE_LIMIT,
        backend=str(refusal.get("backend") or ""),
    )


async def _trials(
    items: list[BatchItem],
    repeat: int,
    runner: Executor,
    concurrency: int,
    on_event: EventCallback | None,
    on_result: ResultCallback | None,
    collect: bool,
) -> list[dict[str, Any]]:
    per_input = repeat + 1  # the trials, then the summary
    results: list[dict[str, Any] | None] = [None] * (len(items) * per_input) if collect else []
    tallies = [TrialTally(index, repeat) for index in range(len(items))]
    limiter = anyio.CapacityLimiter(concurrency)
    emit = functools.partial(_call_safely, on_event) if on_event is not None else None

    def deliver(position: int, value: dict[str, Any]) -> None:
        if collect:
            results[position] = value
        if on_result is not None:
            _call_safely(on_result, value)

    async def one(index: int, trial: int, request: BatchItem) -> None:
        async with limiter:
            try:
                result = await runner.run_one(index, request, emit)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                log.exception("executor failed on request %d (trial %d)", index, trial)
                result = failure_result(
                    index, f"executor failed: {exc!r}", status=Status.INTERNAL, error="internal"
                )
        result["index"] = index
        result["repeat"] = trial
        deliver(index * per_input + trial - 1, result)
        if tallies[index].add(result):
            deliver(index * per_input + repeat, tallies[index].summary())

    async with anyio.create_task_group() as tg:
        for index, request in enumerate(items):
            for trial in range(1, repeat + 1):
                tg.start_soon(one, index, trial, request)
    return [r for r in results if r is not None]


@blocking_twin(run_many)
def run_many_sync(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Blocking :func:`run_many` (the same parameters) for code without an
    event loop (``collect=False``: an empty list, results only through
    ``on_result``).  Ctrl-C stops every process tree, then raises
    ``KeyboardInterrupt``."""
    library = running_event_loop()
    if library is not None:
        raise AgentUsageError(
            f"run_many_sync() cannot be called from a running {library} event loop; "
            "use `await run_many(...)`"
        )
    if kwargs.get("pool") is not None:
        raise AgentUsageError(
            "a pool's sessions live on its own event loop: use `await run_many(..., pool=pool)` "
            "or SyncSessionPool.run_many()"
        )
    return anyio.run(functools.partial(run_many, *args, **kwargs))
