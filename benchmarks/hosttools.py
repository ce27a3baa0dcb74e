"""Figure 9: a host tool round trip, on the REAL claude CLI against the fake model server.

The caller's function called by the model, through the CLI: the model's ``tool_use`` line
read → our function run → the CLI's ``tool_result`` line read (it carried on with our
answer).  coding-genesis (``tools=[...]``: an SDK MCP server over claude's control protocol)
against ``claude-agent-sdk``'s in-process tool (``create_sdk_mcp_server``) on the same CLI,
environment and fake; both tools async functions answering the same text, each allowed
(``--allowedTools``), each side's session open throughout and their turns interleaved.  Our
sync function (run in a worker thread) is a third variant.

Both sides are timed at the same point: each object as it leaves the client's decoder (ours:
the control protocol's ``receive``; the SDK: its transport's ``read_messages``).  The inner
round trip (the ``tools/call`` request read → the CLI's next line) is reported beside it.
The fake model server runs in a process of its own, so its threads never compete with the
measured event loop for the GIL.  Skipped without a claude CLI or claude-agent-sdk.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .stats import median, paired_ratio, percentile

__all__ = ["fig_hosttools"]

Params = dict[str, Any]
Result = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("ours", "ours_sync", "sdk")
AIM = 1.1


@contextlib.contextmanager
def _fake_server() -> Iterator[str]:
    """The fake model server in a process of its own; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.model_server"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the fake model server did not start (said {url!r})")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _hermetic() -> None:
    """No parent Claude Code session's or user's endpoint reaches either client."""
    from tests.fakes.real_cli import clean_env

    keep = set(clean_env(os.environ)) | {"ANTHROPIC_API_KEY"}
    for name in list(os.environ):
        if name not in keep:
            del os.environ[name]


# -- stamps -------------------------------------------------------------------


def _is_call(obj: Any) -> bool:
    """The model's ``tool_use`` of a host tool (an ``assistant`` line)."""
    if not isinstance(obj, dict) or obj.get("type") != "assistant":
        return False
    content = (obj.get("message") or {}).get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict)
        and b.get("type") == "tool_use"
        and str(b.get("name", "")).startswith("mcp__genesis__")
        for b in content
    )


def _is_result(obj: Any) -> bool:
    if not isinstance(obj, dict) or obj.get("type") != "user":
        return False
    content = (obj.get("message") or {}).get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _is_tools_call(obj: Any) -> bool:
    if not isinstance(obj, dict) or obj.get("type") != "control_request":
        return False
    request = obj.get("request") or {}
    message = request.get("message") if isinstance(request, dict) else None
    return (
        isinstance(request, dict)
        and request.get("subtype") == "mcp_message"
        and isinstance(message, dict)
        and message.get("method") == "tools/call"
    )


@dataclass
class Trips:
    """Per host tool call: the model's call read → the CLI's result line read;
    the ``tools/call`` request read → the CLI's next line; and the client's
    share (the request read → the answer formed), in seconds."""

    calls: list[float] = field(default_factory=list)
    inner: list[float] = field(default_factory=list)
    share: list[float] = field(default_factory=list)
    _call: float | None = None
    _asked: float | None = None
    _answered: float | None = None

    def seen(self, obj: Any, now: float) -> None:
        if self._asked is not None and self._answered is not None:
            self.inner.append(now - self._asked)
            self.share.append(self._answered - self._asked)
            self._asked = self._answered = None
        if _is_call(obj):
            self._call = now
        elif _is_result(obj) and self._call is not None:
            self.calls.append(now - self._call)
            self._call = None
        elif _is_tools_call(obj):
            self._asked, self._answered = now, None

    def answered(self, now: float) -> None:
        if self._asked is not None and self._answered is None:
            self._answered = now

    def clear(self) -> None:
        self.calls.clear()
        self.inner.clear()
        self.share.clear()


def _stamped_claude(trips: Trips) -> Any:
    """claude's backend whose protocol stamps each object it is handed and each
    tool answer it forms (a plug-in, through the public Backend API)."""
    from coding_genesis.backends import get_backend

    base: Any = type(get_backend("claude"))

    class StampedClaude(base):  # type: ignore[misc]
        def control(self) -> Any:
            protocol = super().control()
            receive, answer_tool = protocol.receive, protocol.answer_tool

            def stamped_receive(obj: dict[str, Any]) -> Any:
                trips.seen(obj, time.perf_counter())
                return receive(obj)

            def stamped_answer(call: Any, result: Any) -> Any:
                trips.answered(time.perf_counter())
                return answer_tool(call, result)

            protocol.receive = stamped_receive
            protocol.answer_tool = stamped_answer
            return protocol

    return StampedClaude()


@contextlib.contextmanager
def _sdk_stamps(trips: Trips) -> Iterator[None]:
    """The SDK's transport, stamped the same way: each object its reader
    yields and each MCP answer it writes."""
    from claude_agent_sdk._internal.transport import subprocess_cli

    cls: Any = subprocess_cli.SubprocessCLITransport
    read, write = cls.read_messages, cls.write

    async def read_messages(self: Any) -> AsyncIterator[dict[str, Any]]:
        async for obj in read(self):
            trips.seen(obj, time.perf_counter())
            yield obj

    async def stamped_write(self: Any, data: str) -> None:
        if '"mcp_response"' in data:
            trips.answered(time.perf_counter())
        await write(self, data)

    cls.read_messages, cls.write = read_messages, stamped_write
    try:
        yield
    finally:
        cls.read_messages, cls.write = read, write


# -- the measurement ------------------------------------------------------------


async def _measure(cli: str, env: dict[str, str], work: Path, n: int) -> dict[str, Trips]:
    from claude_agent_sdk import (
        ClaudeAgentOptions,
        ClaudeSDKClient,
        create_sdk_mcp_server,
        tool as sdk_tool,
    )
    from claude_agent_sdk.types import ResultMessage

    from coding_genesis import CodingGenesisAgent, tool

    @tool(name="add")
    async def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    @tool(name="add")
    def add_sync(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    async def _sdk_add(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    # Called, not a decorator: typed the same with the SDK installed or not.
    sdk_add: Any = sdk_tool("add", "Add two numbers.", {"a": int, "b": int})(_sdk_add)

    trips = {name: Trips() for name in VARIANTS}
    turns: dict[str, Callable[[str], Any]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, host in (("ours", add), ("ours_sync", add_sync)):
            cwd = work / name
            cwd.mkdir(parents=True, exist_ok=True)
            agent = CodingGenesisAgent(
                _stamped_claude(trips[name]),
                cli_path=cli,
                cwd=cwd,
                env=env,
                timeout=60.0,
                tools=[host],
            )
            session = await stack.enter_async_context(agent.session())

            async def ours(prompt: str, session: Any = session) -> str:
                result = await session.send_result(prompt)
                if result.status != 0:
                    raise RuntimeError(f"our turn failed: {result.error} {result.message[:300]}")
                return str(result.message)

            turns[name] = ours
        cwd = work / "sdk"
        cwd.mkdir(parents=True, exist_ok=True)
        stack.enter_context(_sdk_stamps(trips["sdk"]))
        options = ClaudeAgentOptions(
            cli_path=cli,
            env=env,
            cwd=str(cwd),
            system_prompt={"type": "preset", "preset": "claude_code"},
            mcp_servers={"genesis": create_sdk_mcp_server("genesis", tools=[sdk_add])},
            allowed_tools=["mcp__genesis__add"],
        )
        client = await stack.enter_async_context(ClaudeSDKClient(options))

        async def sdk(prompt: str) -> str:
            await client.query(prompt)
            result = None
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    result = message
            if result is None or result.is_error:
                raise RuntimeError(f"claude-agent-sdk's turn failed: {result!r}")
            return str(result.result)

        turns["sdk"] = sdk

        async def one(name: str, a: int) -> None:
            answer = await turns[name](f'SCENARIO:tool mcp__genesis__add {{"a": {a}, "b": 1}}')
            if answer != f"The tool finished. Output: {a + 1}":
                raise RuntimeError(f"{name}: the tool's answer was {answer!r}")

        for name in VARIANTS:  # warm-up
            await one(name, 0)
            trips[name].clear()
        for rep in range(n):
            k = rep % len(VARIANTS)
            for name in VARIANTS[k:] + VARIANTS[:k]:
                await one(name, rep)
    for name in VARIANTS:
        if len(trips[name].calls) != n or len(trips[name].inner) != n:
            raise RuntimeError(
                f"{name}: {len(trips[name].calls)} calls, {len(trips[name].inner)} inner trips, "
                f"not {n}"
            )
    return trips


def _ms(values: list[float]) -> float:
    return median(values) * 1000


def _p90(values: list[float]) -> float:
    return percentile(values, 90) * 1000


def fig_hosttools(p: Params) -> Result:
    import logging

    import anyio

    from tests.fakes.real_cli import claude_env, find_claude

    from .figures import aim_row, row

    aim = f"a host tool round trip ≤ {AIM:g}× claude-agent-sdk's in-process tool"
    cli = find_claude()
    if cli is None:
        return {"aim": aim, "aim_met": None, "skipped": "no claude CLI"}
    try:
        from importlib import metadata

        version = metadata.version("claude-agent-sdk")
    except metadata.PackageNotFoundError:
        return {"aim": aim, "aim_met": None, "skipped": "claude-agent-sdk is not installed"}
    logging.getLogger("claude_agent_sdk").setLevel(logging.CRITICAL)
    _hermetic()
    n = int(p["hosttools_trips"])
    work = Path(p["workdir"]) / "hosttools"
    with _fake_server() as url:
        env = claude_env(url, work / "home", base_env={})
        trips = anyio.run(_measure, cli, env, work / "work", n)
    sdk, ours, sync = trips["sdk"], trips["ours"], trips["ours_sync"]
    ratio = paired_ratio(ours.calls, sdk.calls)
    sync_ratio = paired_ratio(sync.calls, sdk.calls)
    inner_ratio = paired_ratio(ours.inner, sdk.inner)
    labels = {
        "sdk": f"claude-agent-sdk {version}, an in-process tool (`create_sdk_mcp_server`)",
        "ours": "coding-genesis, `tools=[async function]`",
        "ours_sync": "coding-genesis, `tools=[sync function]` (a worker thread)",
    }
    rows = [
        row(
            f"{label}: the model's call read → the CLI's tool result read",
            _ms(trips[name].calls),
            "ms",
            baseline=name == "sdk",
            ratio=None if name == "sdk" else paired_ratio(trips[name].calls, sdk.calls),
            note=f"p90 {_p90(trips[name].calls):.1f} ms; `tools/call` read → the CLI's next "
            f"line {_ms(trips[name].inner):.2f} ms (the client's share "
            f"{_ms(trips[name].share):.2f} ms)",
        )
        for name, label in labels.items()
    ]
    return {
        "aim": aim,
        "aim_met": ratio <= AIM,
        "aims": [
            aim_row(
                "host tools: a round trip vs claude-agent-sdk's in-process tool",
                ratio,
                AIM,
                note=f"median of {n} interleaved round trips; a sync function {sync_ratio:.2f}×; "
                f"the inner round trip {inner_ratio:.2f}×",
            )
        ],
        "summary": f"a host tool round trip {ratio:.2f}× the SDK's in-process tool "
        f"(a sync function {sync_ratio:.2f}×)",
        "rows": rows,
        "ratio_label": "×",
        "notes": [
            f"Real claude ({cli}) against the fake model server (`tests/fakes/model_server.py`, "
            "in a process of its own); each turn's prompt makes the fake model call "
            "`mcp__genesis__add`, and each answer is checked. Three sessions stay open and "
            f"their {n} turns each are interleaved, after one warm-up turn each. Both sides are "
            "timed as objects leave the client's decoder (ours: the control protocol's "
            "`receive`; the SDK: its transport's `read_messages`), from the model's `tool_use` "
            "line to the CLI's `tool_result` line; the ratio is the median of the per-trip "
            "ratios. The SDK is given claude's own system prompt preset (as we run it)."
        ],
    }
