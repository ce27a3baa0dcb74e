"""``genesis mcp`` on stdio, through the ``mcp`` package's own client: the
tools listed with their schemas, the failer run through them with progress,
every refused argument refused in words, a session, the approval inbox,
cancel, and no process left when the client goes away."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.mcp.support import TOOLS, Progress, over_stdio, structured, text
from tests.serve.test_security import assert_safe_start, safe_start_env


def _server_tree(root: Path) -> list[int]:
    """The ``genesis mcp`` serving ``root`` and every process under it."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "mcp" in cmdline and str(root) in cmdline:
            try:
                return [proc.pid, *(p.pid for p in proc.children(recursive=True))]
            except psutil.NoSuchProcess:
                return []
    return []


def test_lists_the_tools_and_runs_the_failer_with_progress(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            listed = (await session.list_tools()).tools
            assert [t.name for t in listed] == TOOLS
            run_tool = next(t for t in listed if t.name == "run")
            assert "prompt" in run_tool.input_schema["properties"]
            assert run_tool.output_schema is not None
            assert "result" in run_tool.output_schema["properties"]

            progress = Progress()
            failed = structured(
                await session.call_tool(
                    "run", {"prompt": "/fail", "backend": "failer"}, progress_callback=progress
                )
            )
            assert failed["state"] == "finished" and failed["backend"] == "failer"
            assert failed["result"]["status"] == 1 and failed["result"]["error"] == "cli_error"
            assert failed["result"]["failure"]["category"]
            assert progress.messages[0].endswith("queued")
            assert "run_started" in progress.messages and "result" in progress.messages
            assert [p for p, _ in progress.reports] == sorted(p for p, _ in progress.reports)

            ok = structured(await session.call_tool("run", {"prompt": "hello"}))
            assert ok["result"]["status"] == 0 and ok["prompt"] == "hello"
            again = structured(await session.call_tool("get_run", {"run": ok["run_id"]}))
            assert again["id"] == ok["id"] and again["result"]["status"] == 0
            listing = structured(await session.call_tool("list_runs", {"limit": 10}))
            assert {r["id"] for r in listing["runs"]} >= {ok["id"], failed["id"]}

    anyio.run(scenario)


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"cli_path": "/bin/sh"}, "refused field(s) cli_path"),
    ({"env": {"PATH": "/tmp"}}, "refused field(s) env"),
    ({"extra_args": ["--dangerously-skip-permissions"]}, "refused field(s) extra_args"),
    ({"verify": "rm -rf ~"}, "refused field(s) verify"),
    ({"permissions": "full"}, "refused field(s) permissions"),
    ({"options": {"permission_mode": "bypassPermissions"}}, "options.permission_mode"),
    ({"approver": "x"}, "an approver comes only from the command line"),
    ({"approve_tools": ["Bash"]}, "approve_tools"),
    ({"cwd": "/etc"}, "lies outside the server's root"),
    ({"cwd": "../.."}, "lies outside the server's root"),
    ({"model": "--dangerously-skip-permissions"}, "would read as a command-line option"),
    ({"approvals": "all"}, 'approvals must be "inbox" or "none"'),
    ({"backend": "no-such-backend"}, "no-such-backend"),
]


def test_every_untrusted_argument_is_refused_in_words(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            for fields, words in REFUSED:
                result = await session.call_tool("run", {"prompt": "hi", **fields})
                assert result.is_error and words in text(result), (fields, text(result))
                assert "Traceback" not in text(result)
            session_refused: list[tuple[dict[str, Any], str]] = [
                ({"env": {"A": "1"}}, "refused field(s) env"),
                ({"cwd": "/"}, "outside the server's root"),
            ]
            for fields, words in session_refused:
                opened = await session.call_tool("open_session", fields)
                assert opened.is_error and words in text(opened), text(opened)
            nothing_ran = structured(await session.call_tool("list_runs", {}))
            assert nothing_ran["runs"] == []

    anyio.run(scenario)


def test_bad_arguments_are_a_tool_error_in_words(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("run", {}, "prompt"),
                ("run", {"prompt": 5}, "prompt"),
                ("run", {"prompt": "hi", "wait": "yes"}, "wait must be true or false"),
                ("get_run", {}, "run: Field required"),
                ("get_run", {"run": "nope"}, "not_found: no run 'nope'"),
                ("get_run", {"run": "x", "surprise": 1}, "surprise: Extra inputs"),
                ("cancel_run", {"run": "nope"}, "not_found"),
                ("send_turn", {"session": "nope", "prompt": "hi"}, "not_found: no session"),
                ("send_turn", {"session": "s"}, "prompt: Field required"),
                ("close_session", {"session": 7}, "session"),
                ("answer_approval", {"approval": "nope", "decision": "allow"}, "not_found"),
                ("answer_approval", {"approval": "a", "decision": "maybe"}, "decision"),
                ("list_approvals", {"limit": 0}, "limit"),
                ("no_such_tool", {}, "no tool 'no_such_tool'"),
            ]
            for name, arguments, words in cases:
                result = await session.call_tool(name, arguments)
                assert result.is_error and words in text(result), (name, text(result))
                assert "Traceback" not in text(result)
            assert structured(await session.call_tool("list_runs", {}))["runs"] == []

    anyio.run(scenario)


def test_with_trusted_input_the_trusted_fields_are_taken(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path, "--trusted-input") as session:
            done = structured(
                await session.call_tool("run", {"prompt": "hi", "env": {"GENESIS_X": "1"}})
            )
            assert done["result"]["status"] == 0
            refused = await session.call_tool("run", {"prompt": "hi", "approver": "x"})
            assert refused.is_error and "an approver comes only" in text(refused)

    anyio.run(scenario)


def test_a_session_opened_a_turn_sent_and_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            opened = structured(
                await session.call_tool("open_session", {"backend": "failer", "approvals": "none"})
            )
            assert opened["state"] == "open" and opened["backend"] == "failer"
            progress = Progress()
            turn = structured(
                await session.call_tool(
                    "send_turn",
                    {"session": opened["id"], "prompt": "hello"},
                    progress_callback=progress,
                )
            )
            assert turn["turn"] == 1 and turn["state"] == "finished" and turn["status"] == 0
            assert turn["result"]["status"] == 0
            assert progress.messages and "turn 1 running" in progress.messages[0]
            assert "result" in progress.messages[1:], progress.messages  # its events
            closed = structured(await session.call_tool("close_session", {"session": opened["id"]}))
            assert closed["state"] == "closed" and closed["turn_count"] == 1
            late = await session.call_tool("send_turn", {"session": opened["id"], "prompt": "x"})
            assert late.is_error and "busy:" in text(late) and "closed" in text(late)

    anyio.run(scenario)


SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}


def test_a_turn_s_own_options_through_send_turn(tmp_path: Path) -> None:
    """send_turn lists and takes send()'s options: model is data and holds for
    the next turns; permissions and output_schema need --trusted-input; a
    switch the backend cannot make answers the turn 64, the session lives on."""

    async def turn(client: Any, sid: str, **arguments: Any) -> dict[str, Any]:
        return structured(await client.call_tool("send_turn", {"session": sid, **arguments}))

    async def scenario() -> None:
        async with over_stdio(tmp_path / "untrusted") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            listed = tools["send_turn"].input_schema["properties"]
            assert {"prompt", "timeout", "model", "permissions", "output_schema"} <= set(listed)
            opened = structured(await client.call_tool("open_session", {"approvals": "none"}))
            sid = opened["id"]
            first = await turn(client, sid, prompt="hello", model="m-b")
            assert first["status"] == 0 and first["result"]["model"] == "m-b"
            assert (await turn(client, sid, prompt="again"))["result"]["model"] == "m-b"
            for field, value in (("permissions", "full"), ("output_schema", SCHEMA)):
                refused = await client.call_tool(
                    "send_turn", {"session": sid, "prompt": "x", field: value}
                )
                assert refused.is_error, text(refused)
                assert text(refused).startswith(
                    f"invalid_request: refused field(s) {field}: a run-many file may set only"
                )
            named = await client.call_tool(
                "send_turn",
                {"session": sid, "prompt": ["x", {"type": "file", "path": "/etc/hostname"}]},
            )
            assert named.is_error and "naming a path" in text(named)
            await client.call_tool("close_session", {"session": sid})
        async with over_stdio(tmp_path / "trusted", "--trusted-input") as client:
            opened = structured(
                await client.call_tool(
                    "open_session", {"approvals": "none", "permissions": "read-only"}
                )
            )
            sid = opened["id"]
            widened = await turn(client, sid, prompt="/write w.txt x", permissions="edit")
            assert widened["status"] == 64
            assert "opened with permissions='read-only' to 'edit'" in widened["message"]
            shaped = await turn(client, sid, prompt='/json {"verdict": "ok"}', output_schema=SCHEMA)
            assert shaped["status"] == 0 and shaped["result"]["output"] == {"verdict": "ok"}
            await client.call_tool("close_session", {"session": sid})

    anyio.run(scenario)


async def _pending(client: Any, **where: str) -> dict[str, Any]:
    """The first pending approval (of ``where``), once one waits."""
    deadline = time.monotonic() + 30
    while True:
        listed = structured(await client.call_tool("list_approvals", where))["approvals"]
        if listed or time.monotonic() > deadline:
            assert listed, "no approval was asked"
            return dict(listed[0])
        await anyio.sleep(0.05)


def test_approvals_are_listed_and_answered_through_the_tools(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            started = structured(
                await session.call_tool(
                    "run",
                    {"prompt": "/bash echo mcp-allowed", "approvals": "inbox", "wait": False},
                )
            )
            assert started["state"] in ("queued", "running")
            asked = await _pending(session, run=started["id"])
            assert asked["call"]["tool"] == "Bash" and asked["state"] == "pending"
            assert asked["call"]["command"] == "echo mcp-allowed"
            answered = structured(
                await session.call_tool(
                    "answer_approval", {"approval": asked["id"], "decision": "allow", "by": "t"}
                )
            )
            assert answered["state"] == "answered" and answered["answer"]["channel"] == "mcp"
            done = structured(
                await session.call_tool("get_run", {"run": started["id"], "wait": 30})
            )
            assert done["state"] == "finished" and done["result"]["status"] == 0
            twice = await session.call_tool(
                "answer_approval", {"approval": asked["id"], "decision": "deny"}
            )
            assert twice.is_error and "answered" in text(twice)

            # A session's calls wait in the inbox by default; a deny reaches its turn.
            opened = structured(await session.call_tool("open_session", {"backend": "failer"}))
            assert opened["approvals"] == "inbox"
            async with anyio.create_task_group() as tg:
                turns: list[dict[str, Any]] = []

                async def send() -> None:
                    turns.append(
                        structured(
                            await session.call_tool(
                                "send_turn", {"session": opened["id"], "prompt": "/bash echo no"}
                            )
                        )
                    )

                tg.start_soon(send)
                asked = await _pending(session, session=opened["id"])
                denied = structured(
                    await session.call_tool(
                        "answer_approval",
                        {"approval": asked["id"], "decision": "deny", "message": "not today"},
                    )
                )
                assert denied["answer"]["allowed"] is False
            assert turns[0]["state"] == "finished"
            assert "not today" in str(turns[0]["result"])
            await session.call_tool("close_session", {"session": opened["id"]})

    anyio.run(scenario)


async def _long_run_running(session: Any) -> dict[str, Any]:
    """A run of the failer that waits a minute, once its CLI runs."""
    started = structured(await session.call_tool("run", {"prompt": "/timeout 60", "wait": False}))
    view = started
    while view["state"] != "running":
        await anyio.sleep(0.05)
        view = structured(await session.call_tool("get_run", {"run": started["id"]}))
    await anyio.sleep(0.3)  # its CLI spawned
    return started


@pytest.mark.slow
def test_cancel_and_a_client_gone_leave_no_process(tmp_path: Path) -> None:
    root = tmp_path / "root"
    seen: list[int] = []

    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            started = await _long_run_running(session)
            cli = _server_tree(root)[1:]
            assert cli, "the failer runs under genesis mcp"
            cancelled = structured(await session.call_tool("cancel_run", {"run": started["id"]}))
            assert cancelled["result"]["status"] == 130
            assert cancelled["result"]["error"] == "cancelled"
            assert not [p for p in cli if psutil.pid_exists(p)]
            again = await session.call_tool("cancel_run", {"run": started["id"]})
            assert again.is_error and "not_cancellable" in text(again)

            # The client goes away while a run works: the server stops it and exits.
            await session.call_tool("run", {"prompt": "/timeout 60", "wait": False})
            deadline = time.monotonic() + 30
            # ASYNC110 allowed below: the process table signals nothing, so it is polled
            while len(_server_tree(root)) < 2 and time.monotonic() < deadline:  # noqa: ASYNC110
                await anyio.sleep(0.05)
            await anyio.sleep(0.3)
            seen.extend(_server_tree(root))
            assert len(seen) >= 2

    anyio.run(scenario)
    deadline = time.monotonic() + 30
    while [p for p in seen if psutil.pid_exists(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in seen if psutil.pid_exists(p)]


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted-input"])
def test_a_run_and_a_session_through_mcp_get_the_safe_start(tmp_path: Path, trusted: bool) -> None:
    """Untrusted, the CLI of a run and of a session started through MCP reads
    the user's settings alone (qwen in its safe mode, claude told
    ``--setting-sources user``); with ``--trusted-input`` the arguments choose."""
    record = tmp_path / "argv.jsonl"
    env = safe_start_env(record)
    flags = ("--trusted-input",) if trusted else ()
    asked: dict[str, Any] = {"setting_sources": ["user", "project"]} if trusted else {}

    async def scenario() -> None:
        async with over_stdio(tmp_path, *flags, env=env) as session:
            for backend in ("qwen", "claude"):
                done = structured(
                    await session.call_tool("run", {"prompt": "hi", "backend": backend, **asked})
                )
                assert done["result"]["status"] == 0, done
            opened = structured(
                await session.call_tool(
                    "open_session", {"backend": "claude", "approvals": "none", **asked}
                )
            )
            await session.call_tool("close_session", {"session": opened["id"]})

    anyio.run(scenario)
    assert_safe_start(record, trusted)


def test_secrets_are_masked_in_every_answer(tmp_path: Path) -> None:
    """A secret of the server's environment never comes back: not in a run's
    answer (structured or text), a listing, nor a refusal's words."""
    secret = "sk-test-0123456789abcdef"

    async def scenario() -> None:
        async with over_stdio(tmp_path, env={"GENESIS_TEST_API_KEY": secret}) as session:
            answers = [
                await session.call_tool("run", {"prompt": f"say {secret}"}),
                await session.call_tool("list_runs", {}),
                await session.call_tool("run", {"prompt": "hi", "cwd": f"/nowhere/{secret}"}),
                await session.call_tool("get_run", {"run": secret}),
            ]
            assert structured(answers[0])["result"]["status"] == 0
            assert answers[2].is_error and answers[3].is_error
            for answer in answers:
                shown = text(answer) + repr(answer.structured_content)
                assert secret not in shown, shown
            assert "[REDACTED]" in repr(answers[0].structured_content)

    anyio.run(scenario)


def test_a_call_the_client_cancels_cancels_its_run(tmp_path: Path) -> None:
    """The client gives up on a ``run`` call (``notifications/cancelled``): the
    run is cancelled, its process tree stopped, its answer status 130."""

    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "run", {"prompt": "/timeout 60"})
                deadline = time.monotonic() + 30
                while True:
                    runs = structured(await session.call_tool("list_runs", {}))["runs"]
                    if (runs and runs[0]["state"] == "running") or time.monotonic() > deadline:
                        break
                    await anyio.sleep(0.05)
                assert runs and runs[0]["state"] == "running", runs
                await anyio.sleep(0.3)
                cli = _server_tree(tmp_path / "root")[1:]
                assert cli, "the failer runs"
                tg.cancel_scope.cancel()
            done = structured(
                await session.call_tool("get_run", {"run": runs[0]["id"], "wait": 30})
            )
            assert done["state"] == "finished", done
            assert done["result"]["status"] == 130 and done["result"]["error"] == "cancelled"
            assert not [p for p in cli if psutil.pid_exists(p)]

    anyio.run(scenario)


@pytest.mark.slow
def test_sigint_then_sigterm_stop_every_run_and_leave_nothing(tmp_path: Path) -> None:
    """What claude does to the MCP servers it started when it ends: SIGINT,
    then SIGTERM 100 ms later.  The second signal does not kill the server
    mid-stop: every run is cancelled, its tree stopped, and the server's own
    state directory removed before it exits."""
    root = tmp_path / "root"
    tree: list[int] = []
    state_dirs: list[Path] = []

    async def scenario() -> None:
        async with over_stdio(tmp_path) as session:
            await _long_run_running(session)
            tree.extend(_server_tree(root))
            assert len(tree) >= 2, "genesis mcp and the failer"
            server = psutil.Process(tree[0])
            state_dirs.extend(
                Path(f.path).parent for f in server.open_files() if f.path.endswith("lock")
            )
            server.send_signal(signal.SIGINT)
            await anyio.sleep(0.1)
            server.send_signal(signal.SIGTERM)
            server.wait(30)  # (not our child: its exit code is not ours to read)

    anyio.run(scenario)
    assert not [p for p in tree if psutil.pid_exists(p)]
    assert state_dirs and not [d for d in state_dirs if d.exists()], state_dirs


@pytest.mark.parametrize(
    ("script", "says"),
    [
        (
            "raise SystemExit(main(['mcp', '--root', '/nonexistent/dir']))",
            "--root /nonexistent/dir is not a directory",
        ),
        (  # the mcp extra left out
            "import sys\nsys.modules['mcp'] = None\nraise SystemExit(main(['mcp']))",
            "needs the mcp extra (mcp.server): pip install 'coding-genesis[mcp]'",
        ),
    ],
    ids=["no-root", "no-mcp-package"],
)
def test_genesis_mcp_says_why_it_cannot_start(script: str, says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"from coding_genesis._cli.main import main\n{script}"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
