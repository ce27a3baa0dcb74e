"""Figure 11: live sessions over the Agent Client Protocol, on the REAL gemini, qwen and
opencode against the fake model server (issues 39 and 40).

Per agent, each a ratio against a baseline measured in the same run, interleaved with it:

* a turn's wall time through us (``session.send_result()``) against a bare hand-written ACP
  loop (:class:`BareAcp`: ``initialize``, ``session/new``, ``session/set_mode``,
  ``session/prompt``, the updates read up to the prompt's answer) started with the same argv
  and environment as our session's (recorded from our launch), in the same mode;
* an approval round trip: the agent's ``session/request_permission`` read → the update that
  ends the call read (the command ran on the answer), our approver allowing against the
  bare loop answering ``allow_once`` at once;
* a host tool round trip over the MCP bridge (the agent's ``tool_call`` read → its
  completed ``tool_call_update`` read: the agent launched our stdio MCP server, which
  calls the caller's function in the session over its socket) against the same function on
  claude's in-process MCP path (our claude session's ``tools=``: the model's ``tool_use`` →
  the CLI's ``tool_result``);
* a warm :class:`~coding_genesis.SessionPool`'s first event against a fresh session's (the
  session opened, the prompt sent: its first event of the turn).

Both sides of a comparison are timed as each object leaves the client's decoder (ours:
the protocol's ``receive``; the bare loop: its ``json.loads``).  The fake model server runs
in a process of its own.  An agent whose CLI is not installed is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sessions import fake_server, hermetic
from .stats import median, paired_ratio, percentile

__all__ = ["BareAcp", "fig_acp"]

Params = dict[str, Any]
Result = dict[str, Any]

AGENTS = ("gemini", "qwen", "opencode")
#: gemini's model for the fake (no model-router call; as the real-CLI tests).
GEMINI_MODEL = "gemini-2.5-flash"
TEXT = "SCENARIO:text the same answer"
ANSWER = "the same answer"
BASH = "SCENARIO:bash touch made.txt"
TURN_AIM = 1.1
APPROVAL_AIM = 1.1
TOOL_AIM = 1.5
POOL_AIM = 0.15
#: Kinds of event decoded from the CLI's turn (not the run's own, nor the session's opening).
TURN_KINDS = frozenset({"text", "tool_call", "tool_result", "usage", "result", "error"})


# -- the bare loop -------------------------------------------------------------


@dataclass
class Stamps:
    """What one client saw, in s: the approval round trips (a ``session/request_permission``
    read → the update that ends that call read, ``completed`` or ``failed``: the agent acted
    on the answer; its next line will not do, opencode writes the call's ``in_progress``
    right after its request, before any answer) and the host tool round trips (the call's
    first news read, a ``tool_call`` or, on gemini, the permission request naming it → its
    completed update read)."""

    approvals: list[float] = field(default_factory=list)
    tools: list[float] = field(default_factory=list)
    #: Each host tool round trip's (start, end) perf_counter stamps.
    spans: list[tuple[float, float]] = field(default_factory=list)
    #: The client's share of each approval: the request read → its answer formed.
    shares: list[float] = field(default_factory=list)
    _asked: dict[str, float] = field(default_factory=dict)
    _calls: dict[str, float] = field(default_factory=dict)
    _request: float | None = None

    def answered(self, now: float) -> None:
        if self._request is not None:
            self.shares.append(now - self._request)
            self._request = None

    def seen(self, obj: Any, now: float) -> None:
        if not isinstance(obj, dict):
            return
        method = obj.get("method")
        if method == "session/request_permission":
            call = (obj.get("params") or {}).get("toolCall") or {}
            cid = call.get("toolCallId")
            self._request = now
            if cid:
                self._asked[cid] = now
                # gemini tells of an MCP call first (only) in the permission request
                self._calls.setdefault(cid, now)
        elif method == "session/update":
            update = (obj.get("params") or {}).get("update") or {}
            kind, cid = update.get("sessionUpdate"), update.get("toolCallId")
            if kind == "tool_call" and cid:
                self._calls.setdefault(cid, now)
            elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
                if cid in self._asked:
                    self.approvals.append(now - self._asked.pop(cid))
                if cid in self._calls:
                    start = self._calls.pop(cid)
                    self.tools.append(now - start)
                    self.spans.append((start, now))

    def clear(self) -> None:
        self.approvals.clear()
        self.tools.clear()
        self.spans.clear()
        self.shares.clear()
        self._request = None
        self._calls.clear()
        self._asked.clear()


class BareAcp:
    """A hand-written ACP client, the least a client must do: one JSON object a line
    each way, the agent's permission requests answered ``allow_once``, its other requests
    answered -32601, its notifications read (the message chunks kept for the answer)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.stamps = Stamps()
        self._id = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._text: list[str] = []
        self.session_id = ""

    async def start(self, mode: str | None) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
            limit=1 << 24,
            start_new_session=True,
        )
        await self.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
                "clientInfo": {"name": "bare", "version": "0"},
            },
        )
        opened = await self.call("session/new", {"cwd": self.cwd, "mcpServers": []})
        self.session_id = str(opened["sessionId"])
        if mode is not None:
            await self.call("session/set_mode", {"sessionId": self.session_id, "modeId": mode})

    async def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 2.0)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 3.0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the agent left (its tools)

    def _write(self, obj: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(obj).encode() + b"\n")

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request; read (and serve) lines until its answer."""
        assert self._proc is not None and self._proc.stdout is not None
        self._id += 1
        rid = self._id
        self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        stdout = self._proc.stdout
        while True:
            line = await stdout.readline()
            if not line:
                raise RuntimeError(f"the agent exited during {method}")
            obj = json.loads(line)
            self.stamps.seen(obj, time.perf_counter())
            if not isinstance(obj, dict):
                continue
            name = obj.get("method")
            if name is None:
                if obj.get("id") == rid:
                    if "error" in obj:
                        raise RuntimeError(f"{method} failed: {obj['error']}")
                    result: dict[str, Any] = obj.get("result") or {}
                    return result
                continue
            if "id" in obj:  # the agent's request
                if name == "session/request_permission":
                    options = (obj.get("params") or {}).get("options") or []
                    once = next(o["optionId"] for o in options if o.get("kind") == "allow_once")
                    answer = {"outcome": {"outcome": "selected", "optionId": once}}
                    self._write({"jsonrpc": "2.0", "id": obj["id"], "result": answer})
                    self.stamps.answered(time.perf_counter())
                else:
                    self._write(
                        {
                            "jsonrpc": "2.0",
                            "id": obj["id"],
                            "error": {"code": -32601, "message": "Method not found"},
                        }
                    )
            elif name == "session/update":
                update = (obj.get("params") or {}).get("update") or {}
                if update.get("sessionUpdate") == "agent_message_chunk":
                    content = update.get("content") or {}
                    if content.get("type") == "text":
                        self._text.append(str(content.get("text", "")))

    async def prompt(self, text: str) -> str:
        """One turn: the prompt sent, its answer read; the agent's message."""
        self._text = []
        answer = await self.call(
            "session/prompt",
            {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]},
        )
        if answer.get("stopReason") != "end_turn":
            raise RuntimeError(f"the bare turn ended {answer!r}")
        return "".join(self._text)


# -- our side --------------------------------------------------------------------


@dataclass
class Launches:
    """What our live sessions were started with (argv, environment), in order."""

    seen: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)


@contextlib.contextmanager
def _recording(launches: Launches) -> Any:
    """Record each live session's argv and environment (the bare loop starts the same)."""
    import importlib

    link: Any = importlib.import_module("coding_genesis._live.link")  # where the link calls it
    original = link.launch

    def recorded(*args: Any, **kwargs: Any) -> tuple[list[str], dict[str, str]]:
        argv, env = original(*args, **kwargs)
        launches.seen.append((list(argv), dict(env)))
        return argv, env

    link.launch = recorded
    try:
        yield
    finally:
        link.launch = original


def _stamped(name: str, stamps: Stamps, protocols: list[Any]) -> Any:
    """The agent's backend whose ACP protocol stamps each object it is handed (a plug-in,
    through the public Backend API) and is kept for its facts (mode, MCP server)."""
    from coding_genesis.backends import get_backend

    base: Any = type(get_backend(name))

    class Stamped(base):  # type: ignore[misc]
        def control(self) -> Any:
            protocol = super().control()
            receive, answer = protocol.receive, protocol.answer

            def stamped(obj: dict[str, Any]) -> Any:
                stamps.seen(obj, time.perf_counter())
                return receive(obj)

            def stamped_answer(ask: Any, decision: Any) -> Any:
                said = answer(ask, decision)
                stamps.answered(time.perf_counter())
                return said

            protocol.receive, protocol.answer = stamped, stamped_answer
            protocols.append(protocol)
            return protocol

    return Stamped()


@dataclass
class Rig:
    name: str
    cli: str
    env: dict[str, str]
    work: Path
    url: str

    def agent(self, backend: Any = None, **settings: Any) -> Any:
        from coding_genesis import CodingGenesisAgent

        if self.name == "gemini":
            settings.setdefault("model", GEMINI_MODEL)
        return CodingGenesisAgent(
            backend if backend is not None else self.name,
            cli_path=self.cli,
            cwd=self.work,
            env=self.env,
            timeout=90.0,
            ledger=False,
            **settings,
        )


def _allow(request: Any) -> Any:
    from coding_genesis import Decision

    return Decision.allow()


async def _turns(rig: Rig, n: int) -> dict[str, Any]:
    """``n`` interleaved pairs of text turns and of approved shell commands: our session
    (an approver allowing) against the bare loop in the same mode, same argv and env."""
    ours_stamps = Stamps()
    protocols: list[Any] = []
    launches = Launches()
    out: dict[str, Any] = {side: [] for side in ("ours", "bare", "twin")}
    out.update({f"{side}_{k}": [] for side in ("ours", "bare", "twin") for k in ("bash", "cpu")})
    async with contextlib.AsyncExitStack() as stack:
        with _recording(launches):
            agent = rig.agent(_stamped(rig.name, ours_stamps, protocols), approver=_allow)
            session = await stack.enter_async_context(agent.session())
        protocol = protocols[-1]
        argv, env = launches.seen[-1]
        bare = BareAcp(argv, env, str(rig.work))
        stack.push_async_callback(bare.close)
        await bare.start(protocol.mode(protocol.request))
        twin = BareAcp(argv, env, str(rig.work))  # the control: the bare loop against itself
        stack.push_async_callback(twin.close)
        await twin.start(protocol.mode(protocol.request))

        async def ours(prompt: str) -> str:
            result = await session.send_result(prompt)
            if result.status != 0:
                raise RuntimeError(f"our turn failed: {result.error} {result.message[:300]}")
            return str(result.message)

        sides: dict[str, Callable[[str], Any]] = {
            "ours": ours,
            "bare": bare.prompt,
            "twin": twin.prompt,
        }

        async def one(side: str, prompt: str, key: str) -> None:
            cpu, started = time.process_time(), time.perf_counter()
            said = await sides[side](prompt)
            out[key].append(time.perf_counter() - started)
            if prompt == TEXT:  # this process's CPU (the agent runs in its own)
                out[f"{side}_cpu"].append(time.process_time() - cpu)
            if prompt == TEXT and said != ANSWER:
                raise RuntimeError(f"{rig.name} {side}: the answer was {said!r}")

        for side in sides:  # warm-up
            await one(side, TEXT, side)
            await one(side, BASH, f"{side}_bash")
        first = {f"{side}_first": out[side][0] for side in sides}  # a session's first turn
        for values in out.values():
            values.clear()
        out.update(first)
        ours_stamps.clear()
        bare.stamps.clear()
        twin.stamps.clear()
        names = list(sides)
        for rep in range(n):  # each side first, second and last in turn, both ways round
            k = rep % len(names)
            order = names[k:] + names[:k]
            if (rep // len(names)) % 2:
                order = order[::-1]
            for side in order:
                await one(side, TEXT, side)
            for side in order[::-1]:
                await one(side, BASH, f"{side}_bash")
    for side, stamps in (("ours", ours_stamps), ("bare", bare.stamps), ("twin", twin.stamps)):
        if len(stamps.approvals) != n:
            raise RuntimeError(f"{rig.name} {side}: {len(stamps.approvals)} approvals, not {n}")
        out[f"{side}_approval"] = list(stamps.approvals)
        out[f"{side}_share"] = list(stamps.shares)
    return out


@contextlib.contextmanager
def _bridge_stamps(seen: list[tuple[float, float]]) -> Any:
    """Each connection to a session's MCP bridge: (accepted, answered) stamps (our
    share of a host tool call inside the agent's round trip)."""
    from coding_genesis._live.mcpbridge import McpBridge

    cls: Any = McpBridge
    answer, reply = cls._answer, cls._reply
    accepted: list[float] = []

    async def stamped_answer(self: Any, stream: Any) -> None:
        accepted.append(time.perf_counter())
        await answer(self, stream)

    async def stamped_reply(self: Any, ask: Any) -> Any:
        said = await reply(self, ask)
        if isinstance(ask, dict) and ask.get("op") == "call" and accepted:
            seen.append((accepted[-1], time.perf_counter()))
        return said

    cls._answer, cls._reply = stamped_answer, stamped_reply
    try:
        yield
    finally:
        cls._answer, cls._reply = answer, reply


async def _host_tools(rig: Rig, n: int) -> dict[str, list[float]]:
    """``n`` interleaved host tool calls: over the MCP bridge on this ACP agent against
    claude's in-process MCP path (our claude session's ``tools=``)."""
    from coding_genesis import tool
    from tests.fakes.real_cli import claude_env, find_claude

    from .hosttools import Trips, _stamped_claude

    claude = find_claude()
    if claude is None:
        raise LookupError("no claude CLI")

    @tool(name="add")
    async def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    stamps = Stamps()
    protocols: list[Any] = []
    trips = Trips()
    bridged: list[tuple[float, float]] = []
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(_bridge_stamps(bridged))
        acp = await stack.enter_async_context(
            rig.agent(_stamped(rig.name, stamps, protocols), tools=[add], approver=_allow).session()
        )
        server = protocols[-1].mcp_servers[0].name
        tool_name = f"mcp_{server}_add" if rig.name == "gemini" else f"{server}_add"
        from coding_genesis import CodingGenesisAgent

        work = rig.work.parent / "claude-tools"
        work.mkdir(parents=True, exist_ok=True)
        cagent = CodingGenesisAgent(
            _stamped_claude(trips),
            cli_path=claude,
            cwd=work,
            env=claude_env(rig.url, rig.work.parent / "claude-home", base_env={}),
            timeout=60.0,
            tools=[add],
        )
        csession = await stack.enter_async_context(cagent.session())

        async def on_acp(a: int) -> str:
            r = await acp.send_result(f'SCENARIO:tool {tool_name} {{"a": {a}, "b": 1}}')
            return f"{r.status} {r.message}"

        async def on_claude(a: int) -> str:
            r = await csession.send_result(f'SCENARIO:tool mcp__genesis__add {{"a": {a}, "b": 1}}')
            return f"{r.status} {r.message}"

        sides = {"acp": on_acp, "claude": on_claude}

        async def one(side: str, a: int) -> None:
            said = await sides[side](a)
            if not said.startswith("0 ") or str(a + 1) not in said:
                raise RuntimeError(f"{rig.name} host tool, {side}: {said[:300]!r}")

        for side in sides:
            await one(side, 100)
        stamps.clear()
        trips.clear()
        bridged.clear()
        for rep in range(n):
            for side in list(sides) if rep % 2 == 0 else list(sides)[::-1]:
                await one(side, rep + 1000)
    if len(stamps.tools) != n or len(trips.calls) != n or len(bridged) != n:
        raise RuntimeError(
            f"{rig.name}: {len(stamps.tools)} / {len(trips.calls)} / {len(bridged)} trips, not {n}"
        )
    spans = list(zip(stamps.spans, bridged, strict=True))
    return {
        "acp": stamps.tools,
        "claude": trips.calls,
        # the agent's call → our socket accepted; accepted → answered; answered → its update
        "to_us": [accepted - start for (start, _), (accepted, _) in spans],
        "ours": [answered - accepted for _, (accepted, answered) in spans],
        "from_us": [end - answered for (_, end), (_, answered) in spans],
    }


async def _stdio_share(n: int) -> list[float]:
    """Our stdio MCP server's own round trip (``tools/call`` written to its stdin → its
    answer read from its stdout), with a socket that answers at once: the bridge's share
    of a host tool call, without the agent."""
    import sys
    import tempfile

    import anyio
    from anyio.streams.buffered import BufferedByteReceiveStream

    directory = tempfile.mkdtemp(prefix="genesis-bench-mcp-")
    path = os.path.join(directory, "s")
    listener = await anyio.create_unix_listener(path)

    async def answer(stream: Any) -> None:
        async with stream:
            ask = json.loads(await BufferedByteReceiveStream(stream).receive_until(b"\n", 1 << 20))
            if ask["op"] == "list":
                tools = [{"name": "add", "inputSchema": {"type": "object"}, "timeout": 30}]
                said: dict[str, Any] = {"tools": tools}
            else:
                args = ask["arguments"]
                said = {"text": str(args["a"] + args["b"]), "is_error": False}
            await stream.send(json.dumps(said).encode() + b"\n")

    out: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer, tg)
        argv = [sys.executable, "-I", "-m", "coding_genesis._live.mcpstdio", path]
        async with await anyio.open_process(argv) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            stdin, lines = proc.stdin, BufferedByteReceiveStream(proc.stdout)

            async def rpc(obj: dict[str, Any]) -> Any:
                await stdin.send(json.dumps(obj).encode() + b"\n")
                if "id" in obj:
                    return json.loads(await lines.receive_until(b"\n", 1 << 20))
                return None

            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
            await rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
            for i in range(n + 1):
                call = {"name": "add", "arguments": {"a": i, "b": 1}}
                started = time.perf_counter()
                said = await rpc(
                    {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call}
                )
                if i:  # the first is a warm-up
                    out.append(time.perf_counter() - started)
                if str(i + 1) not in json.dumps(said):
                    raise RuntimeError(f"our stdio MCP server answered {said!r}")
            await stdin.aclose()
        tg.cancel_scope.cancel()
    with contextlib.suppress(OSError):
        os.unlink(path)
        os.rmdir(directory)
    return out


class FirstEvent:
    """A bus subscriber: when the first event of the CLI's turn arrived."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, event: Any) -> None:
        if self.at is None and event.kind.value in TURN_KINDS:
            self.at = time.perf_counter()


async def _pool(rig: Rig, n: int) -> dict[str, list[float]]:
    """``n`` interleaved pairs: a fresh session's first event of its first turn (from
    the call that opens it) against a prompt's from a warm pool of 2."""
    from coding_genesis import SessionPool

    fresh = rig.agent()
    stamp = FirstEvent()
    fresh.subscribe(stamp)
    settings: dict[str, Any] = {
        "cli_path": rig.cli,
        "cwd": rig.work,
        "env": rig.env,
        "timeout": 90.0,
    }
    if rig.name == "gemini":
        settings["model"] = GEMINI_MODEL
    out: dict[str, list[float]] = {"pool": [], "fresh": []}
    async with SessionPool(rig.name, size=2, max_idle=600, **settings) as pool:

        async def from_pool() -> Any:
            if not await pool.wait_warm(timeout=90):  # untimed: a warm pool is the premise
                raise RuntimeError(f"the pool did not warm up: {pool.stats()}")
            stamp.at = None
            started = time.perf_counter()
            return started, await pool.run_result(TEXT, on_event=stamp)

        async def from_fresh() -> Any:
            stamp.at = None
            started = time.perf_counter()
            async with fresh.session() as s:
                result = await s.send_result(TEXT)
            return started, result

        sides = {"pool": from_pool, "fresh": from_fresh}
        for call in sides.values():
            await call()
        for rep in range(n):
            for name in list(sides) if rep % 2 == 0 else list(sides)[::-1]:
                started, result = await sides[name]()
                if result.status != 0 or result.message != ANSWER:
                    raise RuntimeError(f"{rig.name} {name}: {result.message[:300]!r}")
                if stamp.at is None:
                    raise RuntimeError(f"{rig.name} {name}: no event from the CLI")
                out[name].append(stamp.at - started)
        if pool.stats().fresh:
            raise RuntimeError(f"a prompt was not served warm: {pool.stats()}")
    return out


# -- the figure ------------------------------------------------------------------


def _rigs(url: str, work: Path, only: tuple[str, ...]) -> tuple[list[Rig], list[str]]:
    from tests.fakes import real_cli

    rigs, missing = [], []
    for name in only:
        cli = getattr(real_cli, f"find_{name}")()
        if cli is None:
            missing.append(name)
            continue
        home = work / f"{name}-home"
        env = getattr(real_cli, f"{name}_env")(url, home, base_env={})
        rig = Rig(name, cli, env, work / name, url)
        rig.work.mkdir(parents=True, exist_ok=True)
        rigs.append(rig)
    return rigs, missing


def _ms(values: list[float]) -> float:
    return median(values) * 1000


def _p90(values: list[float]) -> float:
    return percentile(values, 90) * 1000


def fig_acp(p: Params) -> Result:
    from importlib.util import find_spec

    import anyio

    from .figures import aim_row, row

    aim = (
        f"a turn ≤ {TURN_AIM:g}× a bare ACP loop's, an approval round trip ≤ {APPROVAL_AIM:g}×; "
        f"a host tool over MCP ≤ {TOOL_AIM:g}× claude's in-process; a warm pool's first event "
        f"≤ {POOL_AIM:g}× a fresh session's"
    )
    hermetic()
    work = Path(p["workdir"]) / "acp"
    n_turns, n_tools, n_pool = int(p["acp_turns"]), int(p["acp_tools"]), int(p["acp_pool"])
    rows: list[dict[str, Any]] = []
    aims: list[dict[str, Any]] = []
    met: list[bool] = []
    summary: list[str] = []
    notes: list[str] = []
    with fake_server() as url:
        rigs, missing = _rigs(url, work, tuple(p.get("acp_agents", AGENTS)))
        if not rigs:
            return {"aim": aim, "aim_met": None, "skipped": "none of gemini, qwen, opencode"}
        if missing:
            notes.append(f"Not installed, skipped: {', '.join(missing)}.")
        for rig in rigs:
            t = anyio.run(_turns, rig, n_turns)
            turn = paired_ratio(t["ours"], t["bare"])
            bash = paired_ratio(t["ours_bash"], t["bare_bash"])
            approval = paired_ratio(t["ours_approval"], t["bare_approval"])
            control = paired_ratio(t["twin"], t["bare"])
            control_approval = paired_ratio(t["twin_approval"], t["bare_approval"])
            rows += [
                row(
                    f"{rig.name}: a bare ACP loop, a text turn (prompt sent → its answer read)",
                    _ms(t["bare"]),
                    "ms",
                    baseline=True,
                    note=f"p90 {_p90(t['bare']):.0f} ms; the session's first turn "
                    f"{t['bare_first'] * 1000:.0f} ms",
                ),
                row(
                    f"{rig.name}: coding-genesis `session.send_result()`, the same text turn",
                    _ms(t["ours"]),
                    "ms",
                    ratio=turn,
                    note=f"p90 {_p90(t['ours']):.0f} ms; the session's first turn "
                    f"{t['ours_first'] * 1000:.0f} ms; our process's CPU a turn "
                    f"{_ms(t['ours_cpu']):.1f} ms (the bare loop's {_ms(t['bare_cpu']):.1f} ms)",
                ),
                row(
                    f"{rig.name}: bare, `session/request_permission` read → the call's "
                    "`completed` update read (`allow_once` at once; the command is `touch`)",
                    _ms(t["bare_approval"]),
                    "ms",
                    baseline=True,
                    note=f"p90 {_p90(t['bare_approval']):.1f} ms; the whole approved turn "
                    f"{_ms(t['bare_bash']):.0f} ms",
                ),
                row(
                    f"{rig.name}: coding-genesis, an approver allowing: the same round trip",
                    _ms(t["ours_approval"]),
                    "ms",
                    ratio=approval,
                    note=f"p90 {_p90(t['ours_approval']):.1f} ms; the whole approved turn "
                    f"{_ms(t['ours_bash']):.0f} ms ({bash:.2f}×); our share (the request read "
                    f"→ our answer formed) {_ms(t['ours_share']):.2f} ms, the bare loop's "
                    f"{_ms(t['bare_share']):.2f} ms",
                ),
                row(
                    f"{rig.name}: control, a second bare loop alongside: the text turn",
                    _ms(t["twin"]),
                    "ms",
                    ratio=control,
                    note=f"its approval round trip {_ms(t['twin_approval']):.1f} ms "
                    f"({control_approval:.2f}×)",
                ),
            ]
            aims += [
                aim_row(
                    f"acp ({rig.name}): a turn vs a bare ACP loop's",
                    turn,
                    TURN_AIM,
                    note=f"median of {n_turns} interleaved turns; the control (a second "
                    f"bare loop) {control:.2f}×",
                ),
                aim_row(
                    f"acp ({rig.name}): an approval round trip vs the bare loop's",
                    approval,
                    APPROVAL_AIM,
                    note=f"median of {n_turns} interleaved turns; the approved turn {bash:.2f}×; "
                    f"the control {control_approval:.2f}×",
                ),
            ]
            met += [turn <= TURN_AIM, approval <= APPROVAL_AIM]
            summary.append(
                f"{rig.name}: turn {turn:.2f}× (control {control:.2f}×), approval {approval:.2f}×"
            )
        if find_spec("mcp") is None:
            notes.append("Host tools over MCP skipped: the `mcp` package is not installed.")
        for rig in rigs:
            if find_spec("mcp") is None or n_tools <= 0:
                break
            if rig.name == "qwen":
                notes.append(
                    "qwen's host tool is not measured: it offers MCP tools through its tool "
                    "search, which the fake model does not drive."
                )
                continue
            try:
                h = anyio.run(_host_tools, rig, n_tools)
            except LookupError as e:
                notes.append(f"Host tools skipped: {e}.")
                break
            ratio = paired_ratio(h["acp"], h["claude"])
            share = anyio.run(_stdio_share, n_tools)
            rows += [
                row(
                    f"{rig.name}'s twin: coding-genesis on claude, `tools=[async function]` "
                    "(in-process MCP): the model's call read → the tool result read",
                    _ms(h["claude"]),
                    "ms",
                    baseline=True,
                    note=f"p90 {_p90(h['claude']):.0f} ms",
                ),
                row(
                    f"{rig.name}: coding-genesis, the same function over the MCP bridge: "
                    "`tool_call` read → its completed `tool_call_update` read",
                    _ms(h["acp"]),
                    "ms",
                    ratio=ratio,
                    note=f"p90 {_p90(h['acp']):.0f} ms: the agent's call → our socket "
                    f"{_ms(h['to_us']):.1f} ms, our bridge's answer {_ms(h['ours']):.1f} ms, "
                    f"the answer → the agent's completed update {_ms(h['from_us']):.1f} ms; "
                    f"our stdio MCP server's own round trip, measured alone, {_ms(share):.1f} ms",
                ),
            ]
            aims.append(
                aim_row(
                    f"acp ({rig.name}): a host tool over the MCP bridge vs claude's in-process",
                    ratio,
                    TOOL_AIM,
                    note=f"median of {n_tools} interleaved pairs",
                )
            )
            met.append(ratio <= TOOL_AIM)
            summary.append(f"{rig.name}: host tool {ratio:.2f}×")
        for rig in rigs:
            if n_pool <= 0:
                break
            f = anyio.run(_pool, rig, n_pool)
            ratio = paired_ratio(f["pool"], f["fresh"])
            rows += [
                row(
                    f"{rig.name}: a fresh session: the call → its turn's first event",
                    _ms(f["fresh"]),
                    "ms",
                    baseline=True,
                    note=f"p90 {_p90(f['fresh']):.0f} ms",
                ),
                row(
                    f"{rig.name}: `pool.run_result()` from a warm pool: the call → its first event",
                    _ms(f["pool"]),
                    "ms",
                    ratio=ratio,
                    note=f"p90 {_p90(f['pool']):.0f} ms",
                ),
            ]
            aims.append(
                aim_row(
                    f"acp ({rig.name}): a warm pool's first event vs a fresh session's",
                    ratio,
                    POOL_AIM,
                    note=f"median of {n_pool} interleaved pairs",
                )
            )
            met.append(ratio <= POOL_AIM)
            summary.append(f"{rig.name}: pool {ratio:.2f}×")
    notes.insert(
        0,
        "Real gemini, qwen and opencode (`.tools`) against the fake model server "
        "(`tests/fakes/model_server.py`, in a process of its own). The bare loop "
        "(`benchmarks/acp.py`, `BareAcp`) is started with the argv and environment our "
        "session was started with (recorded from our launch) and set to the same mode (the "
        "asking mode: our session has an approver); both sessions stay open and their turns "
        f"alternate, {n_turns} text turns and {n_turns} approved `touch` commands each after "
        "one warm-up of each; every text answer is checked. Round trips are timed as each "
        "object leaves the client's decoder. Ratios are medians of per-pair ratios.",
    )
    return {
        "aim": aim,
        "aim_met": all(met) if met else None,
        "aims": aims,
        "summary": "; ".join(summary),
        "rows": rows,
        "ratio_label": "×",
        "notes": notes,
    }
