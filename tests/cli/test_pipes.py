"""`genesis run` in pipes: JSON and JSON-lines output that parses, exit codes
that are the status codes, signals, and a runner crash that loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from coding_genesis._cli.main import main
from tests.support import FakeCLI, marked_processes, recorded_events
from tests.terminal import GENESIS, genesis

TOOL = {
    "type": "assistant",
    "message": {
        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
    },
}
TOOL_DONE = {
    "type": "user",
    "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
}


def run_args(fake: FakeCLI, *args: str) -> list[str]:
    return ["run", "--backend", "claude", "--cli-path", fake.path, "--grace", "0.3", *args]


@pytest.mark.slow
def test_json_prints_one_parseable_dict_and_exits_with_its_status(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"stderr": "fatal: no luck"}, {"exit": 3}])
    done = genesis([*run_args(fake, "--json"), "do it"], env=fake.env())
    result = json.loads(done.stdout)
    # The CLI's own exit code 3 is in exit_code; status keeps to our codes (1).
    assert done.returncode == 1 == result["status"]
    assert result["exit_code"] == 3
    assert result["error"] == "cli_error"
    assert "fatal: no luck" in result["message"]
    assert done.stderr == b""  # no panel (not a terminal), no lines for people with --json

    done = genesis([*run_args(fake), "do it"], env=fake.env())
    assert done.returncode == 1 and done.stdout == b""
    assert b"\x1b[" not in done.stderr
    assert b"[status 1: cli_error]" in done.stderr and b"failure: " in done.stderr


@pytest.mark.slow
def test_events_stream_json_lines_and_end_with_the_response(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"emit": TOOL}, {"emit": TOOL_DONE}, {"answer": "listed"}])
    done = genesis([*run_args(fake, "--events"), "list files"], env=fake.env())
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[:3] == ["state", "run_started", "session"]
    assert "tool_call" in types and "tool_result" in types and "text" in types
    assert types[-2:] == ["run_finished", "response"]
    seqs = [e["seq"] for e in events[:-1]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {e["run_id"] for e in events[:-1]} == {events[-1]["run_id"]}
    response = events[-1]
    assert response["status"] == 0 and response["message"] == "listed"
    assert response["tool_calls"] == 1 and response["tool_usage"] == {"Bash": 1}


@pytest.mark.slow
def test_events_arrive_while_the_run_is_still_going(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"emit": TOOL}, {"hang": True}])
    with subprocess.Popen(
        [*GENESIS, *run_args(fake, "--events"), "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **fake.env()},
    ) as proc:
        assert proc.stdout is not None
        seen = []
        while "tool_call" not in seen:
            line = proc.stdout.readline()
            assert line, "stream ended before the tool call"
            seen.append(json.loads(line)["type"])
        if proc.poll() is not None:
            pytest.fail("genesis had finished: the events were batched, not streamed")
        proc.send_signal(signal.SIGTERM)
        rest = [json.loads(line) for line in proc.stdout.read().splitlines()]
        assert proc.wait(timeout=30) == 143
    assert rest[-1]["type"] == "response"
    assert rest[-1]["status"] == 143 and rest[-1]["error"] == "cancelled"
    assert rest[-1]["tool_calls"] == 1
    assert marked_processes([fake.mark]) == []


@pytest.mark.slow
def test_a_reader_that_goes_away_does_not_break_the_run(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"sleep": 0.3}, {"emit": TOOL}, {"answer": "done"}])
    with subprocess.Popen(
        [*GENESIS, *run_args(fake, "--events"), "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **fake.env()},
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        json.loads(proc.stdout.readline())  # like `| head -1`
        proc.stdout.close()
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == 0
    assert b"Traceback" not in stderr
    assert b"BrokenPipe" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "steps", "status", "error"),
    [
        (["--timeout", "0.5"], [{"init": True}, {"hang": True}], 124, "timeout"),
        (["--idle-timeout", "0.3"], [{"init": True}, {"hang": True}], 124, "idle_timeout"),
        ([], [{"init": True}, {"kill_self": "SIGKILL"}], 137, "killed"),
        ([], [{"answer": "fine"}], 0, None),
    ],
)
def test_exit_codes_are_the_documented_status_codes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    steps: list[dict[str, Any]],
    status: int,
    error: str | None,
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(steps)
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    code = main([*run_args(fake, "--json", *args), "go"])
    result = json.loads(capsys.readouterr().out)
    assert code == status == result["status"]
    assert result["error"] == error


def test_request_and_setup_errors_exit_with_their_status(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", "--cli-path", str(tmp_path / "nope"), "-b", "claude", "x"]) == 127
    assert "not found" in capsys.readouterr().err
    assert main(["run", "-b", "failer", "   "]) == 64
    assert "prompt is empty" in capsys.readouterr().err
    # A command-line mistake is a usage error (2, as argparse); a request that
    # reached the agent and was refused is its status (64).
    assert main(["run", "-b", "nosuch", "x"]) == 2
    assert (
        "unknown backend 'nosuch'; available: claude, codex, failer, gemini, opencode, qwen"
        in capsys.readouterr().err
    )
    assert main(["run", "-b", "failer", "--cwd", str(tmp_path / "nowhere"), "x"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_a_crashed_runner_loses_at_most_the_last_line(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"emit": TOOL}, {"raw": "not json, kept anyway"}, {"hang": True}])
    runs = tmp_path / "runs"
    with subprocess.Popen(
        [*GENESIS, *run_args(fake, "--events"), "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        # its own ledger: a sweep by any other runner on the machine would mark the dead
        # run "ended by the runner's death" before `show` reads it
        env={
            **os.environ,
            **fake.env(),
            "GENESIS_TRANSCRIPTS": str(runs),
            "GENESIS_LEDGER": str(tmp_path / "ledger"),
        },
    ) as proc:
        assert proc.stdout is not None
        while b'"tool_call"' not in proc.stdout.readline():
            pass
        (run_dir,) = runs.iterdir()
        deadline = time.monotonic() + 10
        # Both files are written as the run goes: stdout chunk by chunk, the
        # runner's own events as they happen (the CLI's are decoded from stdout).
        while (
            b"kept anyway" not in (run_dir / "stdout.jsonl").read_bytes()
            or b'"run_started"' not in (run_dir / "events.jsonl").read_bytes()
        ):
            if time.monotonic() > deadline:
                proc.terminate()
                pytest.fail("the last complete line never reached the transcript")
            time.sleep(0.01)
        proc.kill()  # the runner dies without any cleanup
        proc.wait()
    # Its CLI, in its own session, dies with its runner (parent-death signal).
    deadline = time.monotonic() + 1.0
    while marked_processes([fake.mark]) and time.monotonic() < deadline:
        time.sleep(0.02)
    leftovers = marked_processes([fake.mark])
    for leftover in leftovers:
        leftover.kill()
    psutil.wait_procs(leftovers, timeout=5)
    assert not leftovers, "the CLI outlived its runner by more than 1 s"

    raw = (run_dir / "stdout.jsonl").read_bytes().splitlines()
    assert len(raw) == 3 and raw[2] == b"not json, kept anyway"
    types = [
        json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_bytes().splitlines()
    ]
    assert types == ["state", "run_started"]
    types = [e["type"] for e in recorded_events(run_dir)]
    assert types == ["state", "run_started", "session", "tool_call"]
    assert not (run_dir / "result.json").exists()

    listed = genesis(["runs", "--json"], env={"GENESIS_TRANSCRIPTS": str(runs)})
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["finished"] is False and row["status"] is None
    shown = genesis(["show", "last"], env={"GENESIS_TRANSCRIPTS": str(runs)})
    assert b"unfinished" in shown.stdout
    assert b"1. Bash: ls -> (no result)" in shown.stdout


@pytest.mark.slow
def test_a_reader_that_stops_early_ends_show_quietly(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"stdout_flood": 2_000_000, "line": 500}, {"answer": "ok"}])
    runs = tmp_path / "runs"
    assert fake.agent(transcripts=runs).run_sync("flood")["status"] == 0
    with subprocess.Popen(
        [*GENESIS, "show", "last", "--raw"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "GENESIS_TRANSCRIPTS": str(runs)},
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.read(100)  # like `| head -c 100`
        proc.stdout.close()
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == 141
    assert stderr == b""
