"""Every failure mode of the fakes and the failer, each a short run with its
expected answer checked.  Clocks are short (0.3-0.5 s) so hundreds of runs fit
in a CI minute."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from coding_genesis import AgentState, CodingGenesisAgent, Event, RunStartedEvent
from tests.support import FakeCLI
from tests.tree_support import describe

__all__ = ["MODES", "Soak"]

HOLDER = {"setsid": True, "ignore_sigterm": True, "hold_stdout": True, "sleep": 600}
INVALID_UTF8 = "fffe7b22610a"


@dataclass
class Soak:
    """Makes the fakes and agents of a soak and keeps every agent it made."""

    tmp: Path
    agents: list[CodingGenesisAgent] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def fake(self, steps: list[dict[str, Any]], flavour: str = "claude") -> FakeCLI:
        fake = FakeCLI(self.tmp, flavour)
        fake.script(steps)
        return fake

    def agent(self, fake: FakeCLI | None = None, **kwargs: Any) -> CodingGenesisAgent:
        kwargs.setdefault("timeout", 10.0)
        kwargs.setdefault("grace", 0.1)
        kwargs.setdefault("eof_grace", 0.1)
        if fake is None:
            agent = CodingGenesisAgent("failer", options={"state_dir": str(self.tmp)}, **kwargs)
        else:
            agent = fake.agent(**kwargs)
        self.agents.append(agent)
        return agent

    async def expect(
        self,
        agent: CodingGenesisAgent,
        prompt: str,
        status: int,
        error: str | None,
        **run: Any,
    ) -> dict[str, Any]:
        result = dict(await agent.run(prompt, **run))
        assert (result["status"], result["error"]) == (status, error), describe(result)
        return result


Mode = Callable[[Soak], Awaitable[None]]


async def ok_claude(s: Soak) -> None:
    await s.expect(s.agent(s.fake([{"answer": "fine"}])), "go", 0, None)


async def ok_codex(s: Soak) -> None:
    await s.expect(s.agent(s.fake([{"answer": "fine"}], "codex")), "go", 0, None)


async def exit_code(s: Soak) -> None:
    result = await s.expect(
        s.agent(s.fake([{"init": True}, {"stderr": "boom"}, {"exit": 3}])), "go", 1, "cli_error"
    )
    assert "boom" in result["message"] and result["exit_code"] == 3  # status keeps our codes


async def killed_by_itself(s: Soak) -> None:
    fake = s.fake([{"init": True}, {"kill_self": "SIGSEGV"}])
    await s.expect(s.agent(fake), "go", 128 + signal.SIGSEGV, "killed")


async def timeout_trap(s: Soak) -> None:
    fake = s.fake([{"init": True}, {"trap_sigterm": 143}, {"hang": True}])
    result = await s.expect(s.agent(fake, timeout=0.4, grace=0.5), "go", 124, "timeout")
    assert result["signals_sent"] == ["SIGTERM"], describe(result)


async def timeout_stubborn_tree(s: Soak) -> None:
    fake = s.fake(
        [
            {"init": True},
            {"ignore_sigterm": True},
            {"grandchild": HOLDER},
            {"grandchild": {**HOLDER, "double_fork": True}},
            {"hang": True},
        ]
    )
    result = await s.expect(s.agent(fake, timeout=0.5), "go", 124, "timeout")
    # On a loaded machine the clock can fire before the fake ignores SIGTERM:
    # then SIGTERM ends it (maybe only after the grace, if it was still being
    # exec'd) before it spawned anything.
    early = result["exit_code"] == -signal.SIGTERM
    if not early:
        assert result["signals_sent"] == ["SIGTERM", "SIGKILL"], describe(result)
    else:
        assert result["signals_sent"][0] == "SIGTERM", describe(result)
        assert not any("child" in r for r in fake.records()), describe(result)


async def idle(s: Soak) -> None:
    fake = s.fake([{"init": True}, {"grandchild": HOLDER}, {"hang": True}])
    await s.expect(s.agent(fake, idle_timeout=0.4), "go", 124, "idle_timeout")


async def linger(s: Soak) -> None:
    fake = s.fake([{"answer": "done"}, {"ignore_sigterm": True}, {"hang": True}])
    result = await s.expect(s.agent(fake, linger=0.2), "go", 0, None)
    assert result["stop_reason"] == "linger"


async def garbage(s: Soak) -> None:
    fake = s.fake(
        [{"init": True}, {"raw": "not json"}, {"raw_hex": INVALID_UTF8}, {"answer": "ok"}]
    )
    result = await s.expect(s.agent(fake), "go", 0, None)
    assert result["skipped_lines"] == 2


async def empty(s: Soak) -> None:
    await s.expect(s.agent(s.fake([{"exit": 0}])), "go", 0, "empty_output")


async def closed_stdout(s: Soak) -> None:
    fake = s.fake([{"init": True}, {"close_stdout": True}, {"hang": True}])
    await s.expect(s.agent(fake, timeout=0.4), "go", 124, "timeout")


async def leftover_holder(s: Soak) -> None:
    fake = s.fake([{"grandchild": {"setsid": True, "sleep": 600}}, {"answer": "done"}])
    result = await s.expect(s.agent(fake), "go", 0, None)
    assert result["leftovers_stopped"] == 1


async def orphans_die(s: Soak) -> None:
    orphan = {"double_fork": True, "hold_stdout": False, "sleep": 0.05}
    fake = s.fake(
        [{"grandchild": orphan}, {"grandchild": orphan}, {"sleep": 0.3}, {"answer": "ok"}]
    )
    await s.expect(s.agent(fake), "go", 0, None)


async def fork_bomb(s: Soak) -> None:
    fake = s.fake(
        [
            {"init": True},
            {"fork_bomb": {"count": 10, "interval": 0.01, "setsid": True}},
            {"hang": True},
        ]
    )
    await s.expect(s.agent(fake, timeout=0.4), "go", 124, "timeout")


async def cancelled(s: Soak) -> None:
    fake = s.fake(
        [{"init": True}, {"ignore_sigterm": True}, {"grandchild": HOLDER}, {"hang": True}]
    )
    agent = s.agent(fake)
    with anyio.move_on_after(0.4) as scope:
        await agent.run("go")
    assert scope.cancelled_caught


async def external_kill(s: Soak) -> None:
    fake = s.fake([{"grandchild": HOLDER}, {"init": True}, {"hang": True}])
    agent = s.agent(fake)
    pid: dict[str, int] = {}

    def killer(event: Event) -> None:
        if isinstance(event, RunStartedEvent):
            pid["cli"] = event.pid
        elif event.kind == "session":
            os.kill(pid["cli"], signal.SIGKILL)

    agent.subscribe(killer)
    await s.expect(agent, "go", 128 + signal.SIGKILL, "killed")


async def codex_turn_failed(s: Soak) -> None:
    fake = s.fake([{"init": True}, {"result": "quota", "is_error": True}, {"exit": 1}], "codex")
    await s.expect(s.agent(fake), "go", 1, "cli_error")


async def busy(s: Soak) -> None:
    agent = s.agent(s.fake([{"init": True}, {"sleep": 0.3}, {"answer": "first"}]))
    started = anyio.Event()
    agent.subscribe(lambda e: started.set() if e.kind == "run_started" else None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(s.expect, agent, "go", 0, None)
        with anyio.fail_after(10):
            await started.wait()
        assert agent.state is AgentState.BUSY
        await s.expect(agent, "again", 75, "busy")


async def failer_ok(s: Soak) -> None:
    await s.expect(s.agent(), "hello", 0, None)


async def failer_fail(s: Soak) -> None:
    await s.expect(s.agent(), "/fail", 1, "cli_error")


async def failer_partial(s: Soak) -> None:
    await s.expect(s.agent(), "/partial", 1, "incomplete")


async def failer_rate_limit(s: Soak) -> None:
    result = await s.expect(s.agent(), "/rate-limit", 1, "cli_error")
    assert result["failure"]["category"] == "rate_limit", describe(result)


async def failer_timeout(s: Soak) -> None:
    await s.expect(s.agent(timeout=0.4), "/timeout 5", 124, "timeout")


async def failer_fail_then_succeed(s: Soak) -> None:
    agent = s.agent()
    key = os.urandom(8).hex()
    await s.expect(agent, "/fail-then-succeed 1", 1, "cli_error", request_key=key)
    await s.expect(agent, "/fail-then-succeed 1", 0, None, request_key=key)


MODES: list[Mode] = [
    ok_claude,
    timeout_stubborn_tree,
    failer_ok,
    exit_code,
    idle,
    failer_fail,
    killed_by_itself,
    linger,
    failer_partial,
    timeout_trap,
    garbage,
    failer_rate_limit,
    ok_codex,
    empty,
    failer_timeout,
    closed_stdout,
    leftover_holder,
    failer_fail_then_succeed,
    orphans_die,
    fork_bomb,
    cancelled,
    external_kill,
    codex_turn_failed,
    busy,
]
