"""Issue 35 (medium): roots are absolute at the door.

``genesis run-many --writes-under .`` used to join the relative root to each request's
cwd, and a batch line (untrusted data) sets its cwd: a line with ``"cwd": "<victim>"``
was allowed to write ``<victim>/.ssh/authorized_keys``.  Every path flag of ``genesis
run``, ``genesis chat`` and ``genesis run-many`` is now made absolute against the
shell's working directory when it is parsed.  The attack below runs the REAL claude
against the fake model server; on the commit before the fix the key was written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from coding_genesis._cli.main import build_parser
from tests.real_cli.test_claude_codex import Rig, claude_rig, explain, hermetic_env
from tests.security.test_repository_programs import genesis

__all__ = ["claude_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytestmark = pytest.mark.timeout(180)

GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]


def test_a_batch_lines_cwd_does_not_move_a_relative_root(claude_rig: Rig) -> None:
    rig = claude_rig
    shell, victim = rig.tmp / "shell", rig.tmp / "victim"
    (victim / ".ssh").mkdir(parents=True)
    shell.mkdir()
    key = victim / ".ssh" / "authorized_keys"
    batch = shell / "batch.jsonl"
    line = {
        "prompt": f"SCENARIO:write {key} ssh-ed25519 AAAA attacker",
        "backend": "claude",
        "cwd": str(victim),
    }
    ok = {"prompt": f"SCENARIO:write {shell / 'notes.txt'} fine", "backend": "claude"}
    batch.write_text(json.dumps(line) + "\n" + json.dumps(ok) + "\n")
    done = genesis(rig, shell, "run-many", str(batch), "-q", "--writes-under", ".")
    results = [json.loads(text) for text in done.stdout.splitlines()]
    assert len(results) == 2, done.stderr
    assert not key.exists(), f"a batch line wrote {key}: " + explain(results[0])
    refusal = results[0]["last_tool_error"] or ""
    assert f"is not allowed, only under {shell}" in refusal, explain(results[0])
    # The root itself still holds: a write under the shell's directory is allowed.
    assert (shell / "notes.txt").read_text() == "fine\n", explain(results[1])


def test_genesis_run_takes_the_root_from_the_shell_not_from_cwd(claude_rig: Rig) -> None:
    rig = claude_rig
    shell, victim = rig.tmp / "shell", rig.tmp / "victim"
    shell.mkdir()
    victim.mkdir()
    target = victim / "planted.txt"
    done = genesis(
        rig,
        shell,
        "run",
        "--json",
        "--cwd",
        str(victim),
        "--writes-under",
        ".",
        f"SCENARIO:write {target} planted",
    )
    result = json.loads(done.stdout)
    assert not target.exists(), explain(result)
    assert result["status"] == 0, explain(result)


@pytest.mark.parametrize("command", ["run", "chat", "run-many"])
def test_every_path_flag_is_absolute_when_parsed(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [command, "--writes-under", "sub", "--writes-under", "../up", "--cwd", "here"]
    argv += {"run": ["prompt"], "chat": [], "run-many": ["batch.jsonl"]}[command]
    args = build_parser([command]).parse_args(argv)
    assert args.writes_under == [str(tmp_path / "sub"), str(tmp_path.parent / "up")]
    assert args.cwd == str(tmp_path / "here")
