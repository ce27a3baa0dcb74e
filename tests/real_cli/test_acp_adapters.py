"""claude and codex over the Agent Client Protocol, through their adapters
(``@agentclientprotocol/claude-agent-acp`` 0.101.0, ``@agentclientprotocol/codex-acp`` 2.6.0),
as the backends-file entries of ``docs/backends.md`` (read from that page, so the example is
what runs) through the generic ACP backend, against the fake model server.

Per adapter, one session holds: a text turn; a shell command refused, then allowed (the file
it makes appears only then); an "always" answer (the agent is answered with its allow-once
option, never its allow-always one); an interrupt in the middle of ``python3 -c 'import time;
time.sleep(600)'`` with no process left and a next turn that works (codex-acp leaves the tool
alive on its own cancel: the session's stray sweep stops it).  Then the caller's function
called over the MCP bridge (both adapters hide MCP tools behind their tool search, which the
fake model calls first), a 401 classified, codex's ``app-server`` child found inside the
supervised tree (and nothing left after close, interrupt and a turn's timeout), and which
claude and which codex each adapter runs.

The adapters are found under the tools directory, ``$GENESIS_TOOLS_DIR`` or
``<repo>/.tools`` (``.ci/run`` installs them there), run with its node
(``node_modules/node/bin/node``, else ``node`` on PATH); each test skips, saying why, when
they are absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psutil
import pytest

from coding_genesis import AgentUsageError, CodingGenesisAgent, Decision, load_backends_file, tool
from coding_genesis.approval import ApprovalRequest
from coding_genesis.backend import Backend
from coding_genesis.errors import RefusedError
from coding_genesis.session import Session
from tests.fakes.model_server import FakeModelServer, sleep_command
from tests.fakes.real_cli import claude_env, codex_env, repo_root, write_codex_home
from tests.real_cli.test_claude_codex import hermetic_env
from tests.real_cli.test_sessions import marked, sleepers
from tests.security.test_repository_programs import MCP_SERVER, writes
from tests.security.test_run_many_input import run_many
from tests.support import Scripted

__all__ = ["hermetic_env"]  # the autouse fixture of the real-CLI tests, active here too

pytestmark = [pytest.mark.timeout(240), pytest.mark.anyio]

ADAPTERS = ("claude-acp", "codex-acp")
PACKAGES = {
    "claude-acp": "@agentclientprotocol/claude-agent-acp",
    "codex-acp": "@agentclientprotocol/codex-acp",
}
#: Each adapter's allow-once and allow-always option ids (measured).
OPTION_IDS = {
    "claude-acp": ("allow-once", "allow-with-updates"),
    "codex-acp": ("allow_once", "accept_execpolicy_amendment"),
}
#: The claude that claude-agent-acp 0.101.0 runs: its claude-agent-sdk's (0.3.318) own.
CLAUDE_OF_THE_ADAPTER = "2.1.318"
#: The codex that codex-acp runs: ours, by the npm override of .ci/run.
CODEX_OF_THE_ADAPTER = "0.169.0"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tools_dir() -> Path:
    """``$GENESIS_TOOLS_DIR`` or ``<repo>/.tools``: where npm put the CLIs."""
    return Path(os.environ.get("GENESIS_TOOLS_DIR") or repo_root() / ".tools")


def node() -> str | None:
    own = tools_dir() / "node_modules" / "node" / "bin" / "node"
    return str(own) if own.is_file() else shutil.which("node")


def docs_entries() -> str:
    """The backends-file block of ``docs/backends.md`` naming both adapters."""
    page = (repo_root() / "docs" / "backends.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", page, re.S)
    (block,) = [b for b in blocks if "[backends.claude-acp]" in b and "[backends.codex-acp]" in b]
    return str(block)


def backends_from_docs(tmp: Path, env: dict[str, str]) -> Mapping[str, Backend]:
    """The docs' entries with this machine's node and tools directory, loaded from a file."""
    nodes = node()
    if nodes is None:
        pytest.skip("node not found (GENESIS_TOOLS_DIR/node_modules/node, PATH)")
    text = docs_entries().replace('"node"', json.dumps(nodes))
    text = text.replace("/path/to/tools", str(tools_dir()))
    if env:  # the entry's env (IS_SANDBOX as root), as a user adds it
        pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
        text = text.replace('format = "acp"\n', f'format = "acp"\nenv = {{ {pairs} }}\n', 1)
    path = tmp / "backends.toml"
    path.write_text(text)
    return load_backends_file(path)


class AdapterRig:
    """One adapter, one fake server, one working directory."""

    def __init__(self, name: str, server: FakeModelServer, tmp: Path) -> None:
        script = tools_dir() / "node_modules" / PACKAGES[name] / "dist" / "index.js"
        if not script.is_file():
            pytest.skip(f"{PACKAGES[name]} not installed ({script}; see .ci/run)")
        self.name, self.server, self.tmp = name, server, tmp
        self.work = tmp / "work"
        self.work.mkdir()
        root = {"IS_SANDBOX": "1"} if name == "claude-acp" and os.geteuid() == 0 else {}
        self.backend = backends_from_docs(tmp, root)[name]

    def env(self) -> dict[str, str]:
        if self.name == "claude-acp":
            return claude_env(self.server.url, self.tmp / "home", base_env={})
        return codex_env(write_codex_home(self.tmp / "codex_home", self.server.url), base_env={})

    def agent(self, **settings: Any) -> CodingGenesisAgent:
        settings.setdefault("timeout", 90.0)
        settings.setdefault("grace", 2.0)
        if self.name == "codex-acp" and "approver" in settings:
            # its project's settings cannot be turned off: read knowingly (see
            # test_codex_acp_refuses_an_approver_unless_the_project_is_read_knowingly)
            settings.setdefault("setting_sources", ("user", "project"))
        return CodingGenesisAgent(
            self.backend, cwd=self.work, env=self.env(), ledger=False, **settings
        )

    def shell(self, command: str) -> str:
        """The prompt that makes the model run ``command`` where the adapter asks first:
        claude in its ``default`` mode asks before any Bash; codex asks only when the model
        asks to leave its sandbox (as a real model does for a write in ``read-only``)."""
        if self.name == "claude-acp":
            return f"SCENARIO:bash {command}"
        call = {
            "cmd": command,
            "sandbox_permissions": "require_escalated",
            "justification": "the test asks for it",
        }
        return f"SCENARIO:tool exec_command {json.dumps(call)}"


@pytest.fixture(params=ADAPTERS)
def rig(
    request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> AdapterRig:
    return AdapterRig(request.param, model_server, tmp_path)


def tree(root_pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []


def descends(proc: psutil.Process, root_pid: int) -> bool:
    """Whether ``proc`` runs under ``root_pid`` (one that exited in between counts as
    inside: it can no longer be outside)."""
    try:
        return root_pid in {a.pid for a in proc.parents()}
    except psutil.NoSuchProcess:
        return True


def adapters(key: str) -> list[psutil.Process]:
    """The session ``key``'s adapter processes (node running an adapter's dist/index.js)."""
    found = []
    for proc in marked(key):
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "@agentclientprotocol" in line and "dist/index.js" in line:
            found.append(proc)
    return found


def app_servers(roots: list[psutil.Process]) -> list[psutil.Process]:
    """codex's ``app-server`` processes under ``roots``."""
    found = []
    for root in roots:
        for proc in tree(root.pid):
            try:
                if "app-server" in proc.cmdline():
                    found.append(proc)
            except psutil.Error:
                continue
    return found


async def sleeping(s: Session, tg: anyio.abc.TaskGroup, results: list[Any]) -> None:
    """Start a turn of ``SCENARIO:sleep 600`` in ``tg`` (its result into ``results``);
    return once the sleeping tool runs (or a minute went by)."""

    async def turn() -> None:
        results.append(await s.send_result("SCENARIO:sleep 600"))

    tg.start_soon(turn)
    for _ in range(600):
        await anyio.sleep(0.1)
        if sleepers(s.key):
            break


async def test_text_refused_then_allowed_always_and_interrupt(rig: AdapterRig) -> None:
    approver = Scripted(
        Decision.deny("not now"),
        Decision.allow(),
        Decision.allow(always=True),
        Decision.allow(always=True),
    )
    asked = approver.asked

    runs = rig.tmp / "runs"
    agent = rig.agent(approver=approver, transcripts=str(runs))
    async with agent.session() as s:
        text = await s.send_result("SCENARIO:text hello over acp")
        assert text.status == 0 and text.message.startswith("hello over acp"), text.message
        assert text.session_id == s.session_id and s.session_id

        refused = await s.send_result(rig.shell("touch made.txt"))
        assert refused.approvals and refused.approvals[0]["allowed"] is False, refused
        assert refused.status == 0, refused.message  # a refusal is no failure of the turn
        if rig.name == "codex-acp":  # the turn ends there, the model not asked again
            assert refused.message == "", refused.message
        assert not (rig.work / "made.txt").exists()
        allowed = await s.send_result(rig.shell("touch made.txt"))
        assert allowed.status == 0, allowed.message
        assert allowed.approvals[0]["allowed"] is True
        assert (rig.work / "made.txt").exists()
        assert asked[0].kind == "command" and asked[0].command == "touch made.txt", asked[0]

        always = await s.send_result(rig.shell("touch again.txt"))
        assert always.status == 0 and (rig.work / "again.txt").exists(), always.message

        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            await sleeping(s, tg, results)
            assert sleepers(s.key), "the long command never started"
            if rig.name == "codex-acp":
                # codex's app-server, the sleeping tool's parent, runs inside the session's tree
                (adapter,) = adapters(s.key)
                (server,) = app_servers([adapter])
                assert any(p.pid == server.pid for p in sleepers(s.key)[0].parents())
            assert await s.interrupt() is True
        interrupted = results[0]
        assert interrupted.status == 130 and interrupted.error == "interrupted", interrupted.message
        for _ in range(100):
            if not sleepers(s.key):
                break
            await anyio.sleep(0.1)
        assert sleepers(s.key) == []
        after = await s.send_result("SCENARIO:text after the interrupt")
        assert after.status == 0 and after.message.startswith("after the interrupt"), after.message
        key = s.key
    assert marked(key) == []
    if rig.name == "claude-acp":  # codex runs it in its sandbox, unasked
        assert sleep_command(600) in str([r.command for r in asked])
    # Answered by kind, once per call: the allow-once option, never the allow-always one.
    stdin = "".join(p.read_text() for p in runs.rglob("stdin.jsonl")).replace(" ", "")
    once, always_id = OPTION_IDS[rig.name]
    assert f'"optionId":"{once}"' in stdin
    assert f'"optionId":"{always_id}"' not in stdin


calls: list[dict[str, Any]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    calls.append({"a": a, "b": b})
    return a + b


async def test_a_host_tool_called_over_mcp_after_a_tool_search(rig: AdapterRig) -> None:
    calls.clear()
    asked: list[Any] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    # the approver decides the agent's own tools, never the caller's functions
    agent = rig.agent(tools=[add], approver=approver)
    async with agent.session() as s:
        assert (await s.send_result("SCENARIO:text ready")).status == 0
        if rig.name == "claude-acp":
            bodies = json.dumps([r.body for r in rig.server.model_requests()])
            (name,) = set(re.findall(r"mcp__genesis-[0-9a-f]{12}__add", bodies))
            found = await s.send_result(f'SCENARIO:tool ToolSearch {{"query": "select:{name}"}}')
            assert found.status == 0, found.message
        else:
            # codex's MCP server starts beside the session: search until it is there
            name = "add"
            for _ in range(20):
                found = await s.send_result('SCENARIO:tool tool_search {"query": "add"}')
                assert found.status == 0, found.message
                if "mcp__genesis_" in found.message:
                    break
                await anyio.sleep(0.5)
            assert '"name": "add"' in found.message, found.message
        called = await s.send_result(f'SCENARIO:tool {name} {{"a": 2, "b": 3}}')
    assert calls == [{"a": 2, "b": 3}], (calls, called.message)
    assert called.status == 0 and "5" in called.message, called.message
    assert called.tool_calls >= 1
    assert asked == [] and called.approvals == [], asked


async def test_which_claude_and_which_codex_the_adapters_run_and_a_401(rig: AdapterRig) -> None:
    """Which claude and which codex each adapter runs; then, in the same session, a 401 is
    auth and the session answers after (one start of the adapter for both)."""
    agent = rig.agent()
    async with agent.session() as s:
        assert (await s.send_result("SCENARIO:text which")).status == 0
        if rig.name == "codex-acp":
            (adapter,) = adapters(s.key)
            (server,) = app_servers([adapter])
            exe = server.exe()
        started = time.monotonic()
        r = await s.send_result("SCENARIO:401")
        took = time.monotonic() - started
        after = await s.send_result("SCENARIO:text still answering")
    assert r.status == 1 and r.failure is not None, r.message
    assert r.failure.category == "auth", (r.failure, r.message)
    assert after.status == 0 and after.message.startswith("still answering"), after.message
    assert took < 60, took
    agents = {r.headers.get("user-agent", "") for r in rig.server.model_requests()}
    if rig.name == "claude-acp":
        # not the claude of .tools (2.1.330): the SDK's own
        assert any(f"claude-cli/{CLAUDE_OF_THE_ADAPTER}" in a for a in agents), agents
    else:
        assert any(CODEX_OF_THE_ADAPTER in a for a in agents), agents
        # the override's codex: the one package beside the adapter, no second codex under it
        assert exe.startswith(str(tools_dir().resolve() / "node_modules" / "@openai")), exe
        nested = tools_dir() / "node_modules" / PACKAGES["codex-acp"] / "node_modules" / "@openai"
        assert not nested.exists(), nested
        package = tools_dir() / "node_modules" / "@openai" / "codex" / "package.json"
        assert json.loads(package.read_text())["version"] == CODEX_OF_THE_ADAPTER


@pytest.mark.parametrize("end", ["close", "timeout"])
async def test_codexs_app_server_is_inside_the_tree_and_stopped_with_it(
    end: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = AdapterRig("codex-acp", model_server, tmp_path)
    agent = rig.agent(timeout=90.0 if end == "close" else 8.0)
    async with agent.session() as s:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            await sleeping(s, tg, results)
            (adapter,) = adapters(s.key)
            servers = app_servers([adapter])
            assert servers and adapter.parent().pid == os.getpid()  # type: ignore[union-attr]
            assert sleepers(s.key), "the long command never started"
            # each sleeper's ancestry, read per process: a shell's child spawned after a
            # snapshot of the tree is no race for this
            outside = [p.pid for p in sleepers(s.key) if not descends(p, adapter.pid)]
            assert outside == [], (outside, [p.pid for p in tree(adapter.pid)])
            if end == "close":
                tg.cancel_scope.cancel()
        if end == "timeout":
            assert results[0].error == "timeout", results[0].message
        key = s.key
    for _ in range(50):
        if not marked(key) and not any(p.is_running() for p in [adapter, *servers]):
            break
        await anyio.sleep(0.1)
    assert marked(key) == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers)


# -- the repository's settings: read only when setting_sources= says so ----------------


def plant_claude_settings(work: Path, marks: Path) -> dict[str, Path]:
    """A repository's ``.claude/settings.json`` whose hooks, and whose ``.mcp.json``
    server it enables, each write a marker: the markers by what writes them."""
    markers = {e: marks / e for e in ("SessionStart", "UserPromptSubmit", "PreToolUse")}
    table = {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": writes(marker)}]}]
        for event, marker in markers.items()
    }
    (work / ".claude").mkdir()
    doc = {"hooks": table, "enableAllProjectMcpServers": True}
    (work / ".claude" / "settings.json").write_text(json.dumps(doc))
    markers["mcp"] = marks / "mcp"
    server = {
        "command": shutil.which("python3"),
        "args": [str(MCP_SERVER), "evil", str(marks / "mcp")],
    }
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"evil": server}}))
    return markers


@pytest.mark.parametrize("sources", [None, ("user", "project")], ids=["default", "project"])
async def test_claude_acp_reads_a_repositorys_settings_only_when_asked(
    sources: tuple[str, ...] | None, model_server: FakeModelServer, tmp_path: Path
) -> None:
    """Security: a cloned repository's hooks and MCP servers run nothing behind the
    approver (claude-agent-acp starts claude with every settings source unless
    ``session/new``'s ``_meta`` says otherwise); ``setting_sources=`` opts in."""
    rig = AdapterRig("claude-acp", model_server, tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    markers = plant_claude_settings(rig.work, marks)
    approver = Scripted()
    agent = rig.agent(approver=approver, setting_sources=sources)
    async with agent.session() as s:
        ran = await s.send_result(rig.shell("touch made.txt"))
        assert ran.status == 0, ran.message
        for _ in range(20):  # the MCP server starts beside the session
            if sources is None or markers["mcp"].exists():
                break
            await anyio.sleep(0.25)
    assert (rig.work / "made.txt").exists() and approver.asked, ran.message
    found = sorted(name for name, marker in markers.items() if marker.exists())
    if sources is None:
        assert found == [], f"the repository's {found} ran behind the approver"
    else:  # the test can fail: the planted programs do run when their settings are read
        assert found == sorted(markers), found


def plant_codex_project(work: Path, marker: Path) -> None:
    """A repository's ``.codex/config.toml`` whose MCP server writes ``marker``."""
    server = f"command = {json.dumps(shutil.which('python3'))}\n" + (
        f"args = {json.dumps([str(MCP_SERVER), 'evil', str(marker)])}\n"
    )
    (work / ".codex").mkdir()
    (work / ".codex" / "config.toml").write_text(f"[mcp_servers.evil]\n{server}")


async def test_codex_acp_refuses_an_approver_unless_the_project_is_read_knowingly(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    """Security: codex-acp marks the working directory trusted, so a repository's
    ``.codex/config.toml`` (its MCP servers, hooks) is read, and nothing turns that off:
    an approver is refused unless ``setting_sources=`` says the project is read
    knowingly.  Opted in, the planted MCP server does start (why it is refused)."""
    rig = AdapterRig("codex-acp", model_server, tmp_path)
    marker = tmp_path / "mcp"
    plant_codex_project(rig.work, marker)
    with pytest.raises(RefusedError) as refused:
        CodingGenesisAgent(rig.backend, cwd=rig.work, ledger=False, approver=Scripted())
    words = str(refused.value)
    assert "codex-acp" in words and "working directory's own settings" in words, words
    assert "setting_sources=('user', 'project')" in words, words
    agent = rig.agent(approver=Scripted(), setting_sources=("user", "project"))
    async with agent.session() as s:
        assert (await s.send_result("SCENARIO:text hi")).status == 0
        for _ in range(40):  # codex starts its MCP servers beside the session
            if marker.exists():
                break
            await anyio.sleep(0.25)
    assert marker.exists(), "the project's MCP server did not start: is the refusal still needed?"


# -- the repository's settings choose no permission mode ------------------------------


@pytest.mark.parametrize(
    ("where", "mode", "sources"),
    [
        ("settings.local.json", "acceptEdits", None),
        ("settings.local.json", "bypassPermissions", None),
        ("settings.json", "acceptEdits", None),
        ("settings.json", "bypassPermissions", None),
        # the project's settings read knowingly: still not its mode
        ("settings.local.json", "acceptEdits", ("user", "project", "local")),
    ],
)
async def test_claude_acp_runs_in_our_mode_whatever_the_repository_says(
    where: str,
    mode: str,
    sources: tuple[str, ...] | None,
    model_server: FakeModelServer,
    tmp_path: Path,
) -> None:
    """Security: claude-agent-acp picks a session's starting mode from every settings
    file of the working directory (its own reading, whatever ``setting_sources=`` says),
    and its SDK's filter drops only some escalations (``acceptEdits`` in
    ``.claude/settings.local.json`` passes): so the session is always put in our mode
    after ``session/new``, the asking one when no level is given.  A write and a command
    then reach the approver, or, without one, are refused (recorded, nothing made).
    (The adapter's own default, ``auto``, wrote the file unasked too.)"""
    rig = AdapterRig("claude-acp", model_server, tmp_path)
    (rig.work / ".claude").mkdir()
    doc = {"permissions": {"defaultMode": mode}}
    (rig.work / ".claude" / where).write_text(json.dumps(doc))
    scenarios = {"write": "SCENARIO:write made.txt hi", "bash": rig.shell("touch ran.txt")}
    asking = Scripted(Decision.deny("no"), Decision.deny("no"))
    for approver in (None, asking):
        given = {} if approver is None else {"approver": approver}
        agent = rig.agent(setting_sources=sources, **given)
        async with agent.session() as s:
            for name, prompt in scenarios.items():
                r = await s.send_result(prompt)
                assert r.status == 0, r.message
                assert [a["allowed"] for a in r.approvals] == [False], (name, approver, r)
                source = "permissions" if approver is None else "approver"
                assert r.approvals[0]["source"] == source, r.approvals
        made = sorted(p.name for p in rig.work.iterdir() if p.suffix == ".txt")
        assert made == [], f"{made}: the repository's {mode} acted behind {approver or 'us'}"
    assert [r.kind for r in asking.asked] == ["write", "command"], asking.asked


def batch_result(rig: AdapterRig, line: dict[str, Any], *flags: str) -> dict[str, Any]:
    """``genesis run-many`` of one line, the adapters' entries in ``$GENESIS_BACKENDS_FILE``."""
    env = {
        **rig.env(),
        "GENESIS_BACKENDS_FILE": str(rig.tmp / "backends.toml"),
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
    }
    done = run_many(rig.tmp, [line], *flags, env=env)
    (result,) = [json.loads(out) for out in done.stdout.splitlines()]
    return dict(result)


def test_an_untrusted_batch_line_never_starts_codex_acp_in_a_repository(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    """Security: codex-acp reads the working directory's ``.codex`` whatever it is told,
    and a batch line chooses its cwd: a line (without ``--trusted-input``) that would run
    codex-acp is refused, named by the line or by ``--backend``, and the repository's MCP
    server never starts.  With ``--trusted-input`` the line runs, and the server does
    start (what the refusal prevents)."""
    rig = AdapterRig("codex-acp", model_server, tmp_path)
    marker = tmp_path / "mcp"
    plant_codex_project(rig.work, marker)
    line = {"prompt": "SCENARIO:text hi", "cwd": str(rig.work)}
    for named, flags in (({"backend": "codex-acp"}, ()), ({}, ("--backend", "codex-acp"))):
        refused = batch_result(rig, {**line, **named}, *flags)
        assert refused["status"] == 64, refused
        assert "codex-acp" in refused["message"] and "--trusted-input" in refused["message"]
        assert "working directory's own settings" in refused["message"], refused["message"]
    assert not marker.exists(), "the repository's MCP server started for an untrusted line"
    trusted = batch_result(rig, {**line, "backend": "codex-acp"}, "--trusted-input")
    assert trusted["status"] == 0, trusted
    for _ in range(40):  # codex starts its MCP servers beside the thread
        if marker.exists():
            break
        time.sleep(0.25)
    assert marker.exists(), "the project's MCP server did not start: is the refusal needed?"


async def test_claude_acp_says_its_context_use_from_its_usage_update(rig: AdapterRig) -> None:
    """claude-agent-acp sends ``usage_update {used, size}`` after a turn (its entry in
    docs/backends.md says ``context_usage = true``); codex-acp's entry does not say so and
    is refused in the capability check's words."""
    async with rig.agent().session() as session:
        turn = await session.send_result("SCENARIO:text alpha")
        assert turn.status == 0, turn.message
        if rig.name != "claude-acp":
            with pytest.raises(AgentUsageError, match="cannot say its context's use now"):
                await session.context_usage()
            return
        usage = await session.context_usage()
    assert usage.source == "acp usage_update" and usage.used > 0 and usage.size, usage
