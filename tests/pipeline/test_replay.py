"""`genesis replay`: a recorded stream, re-parsed offline, answers what the live
run of the same stream answered."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._cli.main import main
from coding_genesis._cli.replay import detect_backend
from tests.support import RECORDINGS, FakeCLI

RECORDED = sorted(RECORDINGS.glob("*.jsonl"))
#: Facts of one process, not of the stream: they differ between any two runs.
PER_PROCESS = {"run_id", "duration_s", "pid", "transcript", "signals_sent", "leftovers_stopped"}


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in result.items() if k not in PER_PROCESS}
    # The failure record and its report repeat the duration.
    if isinstance(out.get("failure"), dict):
        out["failure"] = {k: v for k, v in out["failure"].items() if k != "duration"}
    # Metering's latency figures are timings of the process too.
    if isinstance(out.get("metering"), dict):
        out["metering"] = {k: v for k, v in out["metering"].items() if k != "latency"}
    if isinstance(out.get("failure_report"), str):
        out["failure_report"] = re.sub(r"Duration: [0-9.]+s", "Duration: -", out["failure_report"])
    return out


def recording(path: Path) -> tuple[str, int, str]:
    flavour = path.name.split("_", 1)[0]
    rc = int(path.with_suffix(".rc").read_text().strip())
    return flavour, rc, path.with_suffix(".stderr").read_text()


def test_every_shared_recording_is_in_the_fixtures() -> None:
    assert len(RECORDED) == 40
    for path in RECORDED:
        assert path.with_suffix(".rc").exists() and path.with_suffix(".stderr").exists()


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_replay_gives_what_the_live_run_of_the_same_stream_gave(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flavour, rc, stderr = recording(path)
    fake = FakeCLI(tmp_path, flavour)
    steps: list[dict[str, Any]] = [{"recording": str(path)}]
    if stderr:
        steps.append({"stderr": stderr.removesuffix("\n")})
    # A negative code: killed by that signal (the fake kills itself the same way).
    end = {"kill_self": signal.Signals(-rc).name} if rc < 0 else {"exit": rc}
    fake.script([*steps, end])
    live = fake.agent(cwd=tmp_path, timeout=10.0).run_sync("replay me")
    assert live["completed"] or live["status"] != 0

    # The library call...
    offline = CodingGenesisAgent(flavour, transcripts=False, timeout=10.0).replay(
        path.read_bytes(), returncode=rc, stderr=stderr, cwd=tmp_path
    )
    assert comparable(offline) == comparable(live)

    # ...and the command (backend guessed, exit code and stderr from the sidecar files).
    code = main(["replay", str(path), "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert code == live["status"]
    assert printed["status"] == live["status"]
    assert printed["message"] == live["message"]
    assert printed["tool_calls"] == live["tool_calls"]
    assert printed["session_id"] == live["session_id"]
    assert comparable(printed)["failure"] == comparable(live)["failure"]


def test_replay_of_a_recorded_run_directory_matches_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"recording": str(RECORDINGS / "claude_bash_denied.jsonl")}, {"raw": "garbage"}])
    base = tmp_path / "runs"
    live = fake.agent(transcripts=base, cwd=tmp_path).run_sync("touch a file")
    assert live["skipped_lines"] == 1

    code = main(["replay", str(base / live["run_id"]), "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert comparable(printed) == comparable(live)

    code = main(["replay", live["run_id"][:8], "--transcript-dir", str(base), "--json"])
    assert comparable(json.loads(capsys.readouterr().out)) == comparable(live)


def test_replay_prints_the_answer_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(RECORDINGS / "claude_429.jsonl")])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert "429" in err and "[status 1: cli_error]" in err
    assert "failure: rate_limit (retryable: yes)" in err
    assert "10 CLI API retries" in err


def test_detect_backend() -> None:
    assert detect_backend((RECORDINGS / "codex_text.jsonl").read_bytes()) == "codex"
    assert detect_backend((RECORDINGS / "claude_text.jsonl").read_bytes()) == "claude"
    assert detect_backend(b"garbage\n[1]\n") is None
    assert detect_backend(b'{"id": "0", "msg": {"type": "task_started"}}\n') == "codex"


def test_replay_errors_say_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--transcript-dir", "off"]) == 2
    assert "no file" in capsys.readouterr().err

    unknown = tmp_path / "unknown.jsonl"
    unknown.write_bytes(b'{"hello": 1}\n')
    assert main(["replay", str(unknown)]) == 2
    assert "--backend claude|codex|gemini|opencode|qwen|failer" in capsys.readouterr().err

    (tmp_path / "bad.jsonl").write_bytes(b"")
    (tmp_path / "bad.rc").write_text("not a number")
    assert main(["replay", str(tmp_path / "bad.jsonl"), "--backend", "claude"]) == 2
    assert "should hold an exit code" in capsys.readouterr().err

    with pytest.raises(SystemExit) as exc:
        main(["replay", str(unknown), "--backend", "gemini"])
    assert exc.value.code == 2
    assert "invalid choice: 'gemini' (choose from 'claude', 'codex', 'failer')" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
def test_a_retried_run_keeps_every_attempt_and_replays_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coding_genesis import retry as retry_mod

    monkeypatch.setenv("GENESIS_FAILER_STATE_DIR", str(tmp_path / "failer"))
    base = tmp_path / "runs"
    agent = CodingGenesisAgent("failer", retry=3, transcripts=base, cwd=tmp_path)
    with retry_mod.testing():
        live = agent.run_sync("/fail-then-succeed 1")
    assert live["status"] == 0 and live["attempts"] == 2
    run_dir = base / live["run_id"]
    assert sorted(p.name for p in run_dir.glob("stdout*")) == ["stdout-2.jsonl", "stdout.jsonl"]

    # The last attempt is the one the response came from...
    assert main(["replay", str(run_dir), "--json"]) == 0
    last = json.loads(capsys.readouterr().out)
    assert last["message"] == live["message"] and last["session_id"] == live["session_id"]
    # ...and the first one failed the way the retry history says.
    assert main(["replay", str(run_dir), "--attempt", "1", "--json"]) == 1
    first = json.loads(capsys.readouterr().out)
    assert first["failure"]["category"] == live["retry_history"][0]["category"] == "network"
    assert main(["replay", str(run_dir), "--attempt", "3"]) == 2
    assert "--attempt must be 1..2" in capsys.readouterr().err

    assert main(["show", "last", "--transcript-dir", str(base)]) == 0
    shown = capsys.readouterr().out
    assert "  --- attempt 2 ---" in shown
    assert "  attempts  2" in shown
    assert "    1. network: " in shown and "-> retry" in shown
