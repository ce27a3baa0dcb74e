"""The real ``claude`` and ``codex`` kept running across turns under the
supervisor (``LiveStdin`` + ``TurnClocks``), against the fake model server:
several turns over one process, a hung turn stopped by its own clock, EOF on
stdin ending the CLI by itself.  The protocols are spoken by hand here; the
session layer speaks them through a backend's ``ControlProtocol``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis._supervision.childenv import RUN_MARKER_ENV
from coding_genesis._supervision.live import LiveStdin, LiveStdinClosed
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.values import ProcessOutcome, StopReason, SupervisorConfig
from coding_genesis._supervision.watchdog import TurnClocks
from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import claude_env, codex_env, write_codex_home
from tests.support import marked_processes, present

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the real CLIs are slow to start: one loop is enough


class Live:
    """A real CLI run in the background; the JSON objects it wrote."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv, self.cwd = argv, str(cwd)
        self.marker = uuid.uuid4().hex
        self.env = {**env, RUN_MARKER_ENV: self.marker}
        self.stdin, self.clocks = LiveStdin(), TurnClocks()
        self.objects: list[dict[str, Any]] = []
        self.outcome: ProcessOutcome | None = None
        self._buf = b""
        self._new = anyio.Event()

    def sink(self, chunk: bytes) -> bool:
        *whole, self._buf = (self._buf + chunk).split(b"\n")
        self.objects += [json.loads(line) for line in whole if line.strip()]
        self._new.set()
        return False

    async def run(self) -> None:
        self.outcome = await run_process(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=self.stdin,
            config=SupervisorConfig(grace=1.0),
            on_stdout=self.sink,
            marker=self.marker,
            clocks=self.clocks,
        )

    async def send(self, obj: dict[str, Any]) -> None:
        await self.stdin.write(json.dumps(obj).encode() + b"\n")

    async def first(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first object (not yet taken) that matches, taken (waits up to 30 s)."""
        with anyio.fail_after(30):
            while True:
                for i, obj in enumerate(self.objects):
                    if match(obj):
                        return self.objects.pop(i)
                self._new = anyio.Event()
                await self._new.wait()


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


async def test_claude_answers_turns_in_one_process_and_a_hung_turn_times_out(
    real_claude: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    argv = [real_claude, "-p", "--input-format", "stream-json"]
    argv += ["--output-format", "stream-json", "--verbose"]
    live = Live(argv, claude_env(model_server.url, tmp_path / "home"), tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.run)
        for words in ("first answer", "second answer"):
            live.clocks.arm(timeout=30)
            await live.send(user(f"SCENARIO:text {words}"))
            result = await live.first(lambda o: o.get("type") == "result")
            live.clocks.disarm()
            assert result["result"] == words and not result["is_error"]
        await anyio.sleep(0.5)  # a pause between turns: nothing times out
        live.clocks.arm(timeout=1.5)
        armed = time.monotonic()
        await live.send(user("SCENARIO:hang"))
    took = time.monotonic() - armed
    outcome = present(live.outcome)
    assert outcome.stop_reason is StopReason.TIMEOUT and 1.5 <= took < 6, took
    assert len({o["session_id"] for o in live.objects if "session_id" in o}) == 1
    assert marked_processes([live.marker]) == []
    with pytest.raises(LiveStdinClosed):
        await live.send(user("too late"))


async def test_codex_app_server_holds_a_thread_and_ends_on_eof(
    real_codex: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    home = write_codex_home(tmp_path / "codex", model_server.url)
    live = Live([real_codex, "app-server"], codex_env(home), tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.run)
        info = {"clientInfo": {"name": "genesis-test", "version": "0"}}
        await live.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": info})
        await live.first(lambda o: o.get("id") == 1)
        await live.send({"jsonrpc": "2.0", "method": "initialized"})
        start = {"cwd": str(tmp_path), "approvalPolicy": "never"}
        await live.send({"jsonrpc": "2.0", "id": 2, "method": "thread/start", "params": start})
        thread = (await live.first(lambda o: o.get("id") == 2))["result"]["thread"]["id"]
        for turn, words in enumerate(("first", "second"), start=3):
            live.clocks.arm(timeout=30)
            text = [{"type": "text", "text": f"SCENARIO:text {words}"}]
            params = {"threadId": thread, "input": text}
            await live.send(
                {"jsonrpc": "2.0", "id": turn, "method": "turn/start", "params": params}
            )
            said = await live.first(
                lambda o: (
                    o.get("method") == "item/completed"
                    and o["params"]["item"].get("type") == "agentMessage"
                )
            )
            await live.first(lambda o: o.get("method") == "turn/completed")
            live.clocks.disarm()
            assert said["params"]["item"]["text"] == words
        live.stdin.close()
    outcome = present(live.outcome)
    assert outcome.returncode == 0 and outcome.stop_reason is None
    assert outcome.signals_sent == [] and outcome.leftovers_stopped == 0
    assert marked_processes([live.marker]) == []
