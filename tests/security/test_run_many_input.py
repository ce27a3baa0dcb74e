"""Finding 2: a ``run-many`` file is data, not code.  A line may set only an
allow-list of data fields; what would choose an executable, an argument, an
environment variable or a permission is refused at that line's index, unless
the user passes ``--trusted-input``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coding_genesis._lines import read_requests
from coding_genesis.batch import InvalidRequest, RunSpec
from coding_genesis.capabilities import UNTRUSTED, untrusted_problem

GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]


def run_many(
    tmp_path: Path, lines: list[object], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return subprocess.run(
        [*GENESIS, "run-many", str(batch), "-q", *args],
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_a_line_cannot_choose_an_executable_env_or_arguments(tmp_path: Path) -> None:
    proof = tmp_path / "pwned"
    hostile = [
        {"prompt": "x", "backend": "failer", "cli_path": ["/bin/sh", "-c", f"touch {proof}"]},
        {"prompt": "x", "backend": "failer", "env": {"PYTHONPATH": str(tmp_path)}},
        {"prompt": "x", "backend": "claude", "extra_args": ["--dangerously-skip-permissions"]},
        {"prompt": "x", "backend": "claude", "options": {"permission_mode": "bypassPermissions"}},
        {"prompt": "x", "backend": "claude", "options": {"max_turns": 2, "mcp_config": "/x"}},
        {"prompt": "x", "backend": "codex", "resume": "--dangerously-bypass-approvals"},
        {"prompt": "x", "backend": "failer", "transcripts": "/tmp/elsewhere"},
        {"prompt": "hello", "backend": "failer", "model": "m", "timeout": 30, "name": "ok"},
    ]
    done = run_many(tmp_path, hostile)
    assert done.returncode == 1, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["index"] for r in results] == list(range(len(hostile)))
    assert [r["status"] for r in results] == [64] * 7 + [0]
    assert all(r["error"] == "invalid_request" for r in results[:7])
    assert "refused field(s) cli_path" in results[0]["message"]
    assert "--trusted-input" in results[0]["message"]
    assert "refused field(s) env" in results[1]["message"]
    assert "refused field(s) extra_args" in results[2]["message"]
    assert "options.permission_mode" in results[3]["message"]
    assert "options.mcp_config" in results[4]["message"]
    assert "max_turns" not in results[4]["message"].split("refused field(s)")[1].split(":")[0]
    assert "refused resume" in results[5]["message"]
    assert "refused field(s) transcripts" in results[6]["message"]
    assert not proof.exists()


@pytest.mark.slow
def test_trusted_input_accepts_every_setting(tmp_path: Path) -> None:
    proof = tmp_path / "ran"
    line = {"prompt": "x", "backend": "failer", "cli_path": ["/bin/sh", "-c", f"touch {proof}"]}
    done = run_many(tmp_path, [line], "--trusted-input")
    assert proof.exists(), done.stdout + done.stderr
    help_text = subprocess.run(
        [*GENESIS, "run-many", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--trusted-input" in help_text and "CODE EXECUTION" in help_text


def test_the_allow_list_is_data_only() -> None:
    data = {name for name, trust in UNTRUSTED.items() if trust == "data"}
    assert {"cli_path", "env", "extra_args", "transcripts", "run_log", "observers"}.isdisjoint(data)
    ok = {
        "prompt": "p",
        "backend": "claude",
        "model": "sonnet",
        "timeout": 5,
        "cwd": "/tmp",
        "resume": "abc",
        "request_key": "k",
        "options": {"max_turns": 3},
    }
    assert untrusted_problem(ok) is None
    assert untrusted_problem({**ok, "options": "--x"}) is not None
    assert untrusted_problem({**ok, "model": "-x"}) is not None
    (request,) = read_requests([json.dumps({**ok, "grace": 0}).encode()])
    assert (
        isinstance(request, InvalidRequest) and "line 1: refused field(s) grace" in request.reason
    )
    (trusted,) = read_requests([json.dumps({**ok, "grace": 0}).encode()], trusted=True)
    assert trusted["grace"] == 0


@pytest.mark.parametrize("field", ["cli_path", "env", "extra_args"])
def test_the_library_api_still_accepts_every_setting(field: str) -> None:
    value = {"cli_path": ["/bin/true"], "env": {"A": "b"}, "extra_args": ["--x"]}[field]
    spec = RunSpec.model_validate({"prompt": "p", "backend": "failer", field: value})
    assert spec.agent_kwargs() == {field: value}


def test_a_line_never_runs_a_backend_that_always_reads_the_project(tmp_path: Path) -> None:
    """A backend that cannot be told not to read the working directory's settings
    (codex-acp's entry; its real test: ``test_an_untrusted_batch_line_never_starts_
    codex_acp_in_a_repository``), and a line chooses its cwd: refused before it starts,
    whether the line or ``--backend`` names it; ``--trusted-input`` starts it."""
    started = tmp_path / "started"
    start = f"open({str(started)!r}, 'a').write('ran')"
    entries = "\n".join(
        [
            "[backends.reads-project]",
            'format = "acp"',
            f"command = {json.dumps([sys.executable, '-c', start])}",
            'setting_sources = [["user", "project"]]',
            'default_setting_sources = ["user", "project"]',
        ]
    )
    (tmp_path / "backends.toml").write_text(entries + "\n")
    env = {"GENESIS_BACKENDS_FILE": str(tmp_path / "backends.toml")}
    line = {"prompt": "x", "cwd": str(tmp_path)}
    for named, args in (({"backend": "reads-project"}, ()), ({}, ("--backend", "reads-project"))):
        done = run_many(tmp_path, [{**line, **named}], *args, env=env)
        (result,) = [json.loads(out) for out in done.stdout.splitlines()]
        assert result["status"] == 64 and result["error"] == "invalid_request", result
        assert "always reads the working directory's own settings" in result["message"]
        assert "--trusted-input" in result["message"]
    assert not started.exists()
    done = run_many(tmp_path, [{**line, "backend": "reads-project"}], "--trusted-input", env=env)
    assert started.exists(), done.stdout  # not an ACP agent: it fails, after it started
