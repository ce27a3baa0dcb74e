"""The public API as a type checker sees it: mypy checks this file (pyproject's
``[tool.mypy] files``), pytest never runs it (no ``test_`` name).

Each public entry point is called once with ``assert_type`` on what it gives
back; each closed vocabulary is misused once, and the ``type: ignore`` on that
line must be needed (``warn_unused_ignores``): if a vocabulary widened to
``str``, mypy would report the ignore as unused.
"""

from __future__ import annotations

from typing import Any, Literal, assert_type

from coding_genesis import (
    AGENT_DEFAULT,
    AcpBackend,
    AgentConfig,
    AgentSettings,
    ApprovalRequest,
    Approver,
    Backend,
    Budget,
    ChildFailure,
    CircuitBreaker,
    CodingGenesisAgent,
    CostSource,
    Decision,
    ErrorCode,
    Event,
    EventStream,
    FailureCategory,
    GenericBackend,
    JsonLinesParser,
    Permissions,
    RetryPolicy,
    RunEvent,
    RunLogObserver,
    RunOptions,
    RunResponse,
    RunResult,
    RunSpec,
    Status,
    Subscription,
    TranscriptObserver,
    Translator,
    Verdict,
    VirtualClock,
    allow_tools,
    available_backends,
    chain,
    deny_commands,
    event_from_dict,
    format_failure_report,
    get_backend,
    load_backends_file,
    parse_failure_report,
    register_backend,
    run_many,
    run_many_sync,
    writes_under,
)
from coding_genesis.approval import Decided, decide
from coding_genesis.options import AgentDefault
from coding_genesis.request import Request


def on_event(event: RunEvent) -> None:
    """A typed subscriber: it hears any concrete event."""


async def entry_points(policy: RetryPolicy, breaker: CircuitBreaker, budget: Budget) -> None:
    agent = CodingGenesisAgent(
        "failer",
        timeout=60,
        permissions="edit",
        retry=policy,
        circuit_breaker=breaker,
        budget=budget,
        isolation="worktree",
        keep="on_failure",
        transcripts="/tmp/runs",
    )
    assert_type(agent, CodingGenesisAgent)
    assert_type(CodingGenesisAgent(config=AgentConfig(backend="failer")), CodingGenesisAgent)
    assert_type(
        CodingGenesisAgent("failer", retry="default", circuit_breaker=None), CodingGenesisAgent
    )

    response = await agent.run("hello", timeout=10, model="m", retry=None, max_turns=3)
    assert_type(response, RunResponse)
    assert_type(response["status"], int)
    assert_type(response["message"], str)
    assert_type(response["cost_source"], CostSource | None)
    assert_type(response["failure"], "dict[str, Any] | None")
    assert_type(await agent.run_result("hello", resume="s-1", request_key="k"), RunResult)
    assert_type(agent.run_sync("hello", cwd="/tmp", permissions="read-only"), RunResponse)
    assert_type(agent.replay(b"{}\n", returncode=0), RunResponse)

    options: RunOptions = {"timeout": 5.0, "retry": 2}
    assert_type(await agent.run("hello", **options), RunResponse)
    settings: AgentSettings = {"timeout": 5.0, "keep": "always"}
    assert_type(CodingGenesisAgent("failer", **settings), CodingGenesisAgent)
    assert_type(AGENT_DEFAULT, AgentDefault)

    assert_type(agent.subscribe(on_event), Subscription)
    assert_type(agent.events(), EventStream)
    assert_type(agent.retry_policy, RetryPolicy | None)

    config = AgentConfig("failer", retry="default", cli_path=["node", "cli.js"])
    assert_type(config.replace(timeout=30, keep="never"), AgentConfig)
    assert_type(config.retry, RetryPolicy | None)

    spec = RunSpec(prompt="hello", backend="failer", timeout=60, resume=None)
    assert_type(spec, RunSpec)
    assert_type(await run_many([spec], concurrency=2, executor="local"), list[dict[str, Any]])
    assert_type(run_many_sync([spec], repeat=2, collect=False), list[dict[str, Any]])

    assert_type(get_backend("claude"), Backend)
    assert_type(get_backend("claude").translator(), Translator)
    assert_type(available_backends(), list[str])
    assert_type(event_from_dict({"type": "text", "text": "hi"}), Event)
    result = RunResult(status=0, message="ok")
    assert_type(result.to_dict(), RunResponse)
    assert_type(load_backends_file("backends.toml"), dict[str, GenericBackend | AcpBackend])
    register_backend("mine", lambda: get_backend("failer"))
    observers = [TranscriptObserver("/tmp/runs"), RunLogObserver("/tmp/runs.jsonl")]
    assert_type(CodingGenesisAgent("failer", observers=observers), CodingGenesisAgent)
    assert_type(JsonLinesParser(1024).feed(b"{}\n"), list[dict[str, Any]])
    assert_type(VirtualClock().time(), float)
    assert_type(Status.OK, Literal[Status.OK])
    assert_type(ErrorCode("timeout"), ErrorCode)
    assert_type(Request(prompt="p", cwd="/tmp").permissions, Permissions | None)
    failure = parse_failure_report(
        format_failure_report(ChildFailure(category=FailureCategory.TIMEOUT, message="x"))
    )
    assert_type(failure, ChildFailure)


def mine(request: ApprovalRequest) -> Verdict:
    """A sync approver: a decision, a bool, or None (not settled here)."""
    return Decision.deny("no", end_turn=True) if request.kind == "write" else None


async def theirs(request: ApprovalRequest) -> Verdict:
    """An async approver."""
    return True


async def approvers() -> None:
    policy = chain(mine, theirs, allow_tools("Read"), deny_commands("rm *"), writes_under("/tmp"))
    assert_type(policy, Approver)
    request = ApprovalRequest("Bash", {"command": "ls"}, kind="command", command="ls")
    assert_type(await decide(policy, request, timeout=30), Decided)
    assert_type(Decision.allow(always=True).allowed, bool)


async def misuses(agent: CodingGenesisAgent, translator: Translator, response: RunResponse) -> None:
    """One misuse per closed vocabulary; each ignore must be needed."""
    CodingGenesisAgent("failer", permissions="admin")  # type: ignore[arg-type]
    await agent.run("hello", permissions="root")  # type: ignore[arg-type]
    CodingGenesisAgent("failer", isolation="container")  # type: ignore[arg-type]
    CodingGenesisAgent("failer", keep="sometimes")  # type: ignore[arg-type]
    CodingGenesisAgent("failer", retry="sometimes")  # type: ignore[arg-type]
    CodingGenesisAgent("failer", circuit_breaker="yes")  # type: ignore[arg-type]
    await run_many([], executor="threads")  # type: ignore[arg-type]
    translator.message_usage = "loud"  # type: ignore[assignment]
    response["cost_source"] = "guessed"  # type: ignore[typeddict-item]
    RunSpec(prompt="p", backend="failer", keep="forever")  # type: ignore[arg-type]
    # A name that is not an option at all.
    await agent.run("hello", tiemout=3)  # type: ignore[call-arg]
    CodingGenesisAgent("failer", timout=3)  # type: ignore[call-arg]
    RunSpec(prompt="p", backend="failer", unknown=1)  # type: ignore[call-arg]
    response["no_such_key"]  # type: ignore[typeddict-item]
    ApprovalRequest("Bash", {}, kind="shell")  # type: ignore[arg-type]
