"""One option vocabulary across backends: model, permissions, max_turns, resume,
cwd, cli_max_retries; checked once, carried to the backend, mapped to each CLI's
flags, environment or a private overlay, or reported as not honored."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.backend import CommandSpec
from coding_genesis.backends import ClaudeBackend, CodexBackend, FailerBackend
from coding_genesis.batch import run_many_sync
from coding_genesis.config import DEFAULT_CLI_MAX_RETRIES, PERMISSION_LEVELS, AgentConfig
from coding_genesis.errors import ConfigError
from coding_genesis.request import Request
from tests.support import FakeCLI, cli_request


def request(**fields: Any) -> Request:
    return cli_request(prompt="p", cwd="/tmp", **fields)


# -- validated once ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("permissions", "write", "permissions must be one of 'read-only', 'edit', 'full'"),
        ("permissions", 3, "permissions must be one of"),
        ("max_turns", 0, "max_turns must be an integer >= 1"),
        ("max_turns", True, "max_turns must be an integer >= 1"),
        ("max_turns", "5", "max_turns must be an integer >= 1"),
        ("cli_max_retries", -1, "cli_max_retries must be an integer >= 0"),
        ("cli_max_retries", 1.5, "cli_max_retries must be an integer >= 0"),
    ],
)
def test_a_bad_value_is_a_config_error_at_construction(setting: str, value: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        AgentConfig(backend="failer", **{setting: value})
    with pytest.raises(ConfigError, match=says):
        CodingGenesisAgent("failer", **{setting: value})


def test_a_bad_value_per_call_is_status_64_and_starts_nothing(fake_claude: FakeCLI) -> None:
    agent = fake_claude.agent()
    for bad in ({"permissions": "root"}, {"max_turns": -2}, {"cli_max_retries": "many"}):
        result = agent.run_sync("hi", **bad)
        assert (result["status"], result["error"]) == (64, "invalid_request"), bad
    assert fake_claude.records() == []


class NoPermissions(FailerBackend):
    """A backend that declares no permission level it can enforce."""

    name = "no-permissions"
    permission_levels: frozenset[str] = frozenset()


class ReadOnlyOnly(FailerBackend):
    name = "read-only-only"
    permission_levels = frozenset({"read-only"})


@pytest.mark.slow
def test_a_level_the_backend_cannot_enforce_is_refused_never_loosened() -> None:
    with pytest.raises(ConfigError, match=r"cannot enforce permissions='full'.*read-only"):
        CodingGenesisAgent(ReadOnlyOnly(), permissions="full")
    with pytest.raises(ConfigError, match=r"cannot enforce permissions='read-only'.*none"):
        CodingGenesisAgent(NoPermissions(), permissions="read-only")
    agent = CodingGenesisAgent(ReadOnlyOnly())
    refused = agent.run_sync("hi", permissions="edit")
    assert refused["status"] == 64
    assert "cannot enforce permissions='edit'" in refused["message"]
    assert agent.run_sync("hi", permissions="read-only")["status"] == 0


def test_a_backend_without_the_attribute_refuses_every_level() -> None:
    class Plain:
        name = "plain"
        executable = "plain"
        path_env_var = "GENESIS_PLAIN_PATH"
        supports_resume = False
        options: ClassVar[dict[str, Any]] = {}

        def default_program(self) -> None:
            return None

        def build_command(self, request: Request) -> CommandSpec:
            return CommandSpec(args=())

        def translator(self) -> Any:
            return FailerBackend().translator()

        def install_hint(self) -> str:
            return ""

    with pytest.raises(ConfigError, match="cannot enforce"):
        CodingGenesisAgent(Plain(), permissions="read-only")  # type: ignore[arg-type]


# -- claude ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "flags"),
    [
        (
            "read-only",
            [
                "--permission-mode=default",
                "--disallowedTools=Bash,Edit,Write,MultiEdit,NotebookEdit",
            ],
        ),
        ("edit", ["--permission-mode=acceptEdits"]),
        (
            "full",
            [
                "--permission-mode=acceptEdits",
                "--allowedTools=Bash,Edit,Write,MultiEdit,NotebookEdit,WebFetch,WebSearch",
            ],
        ),
    ],
)
def test_claude_permissions(level: str, flags: list[str]) -> None:
    spec = ClaudeBackend().build_command(request(permissions=level))
    for flag in flags:
        assert flag in spec.args
    assert not spec.warnings


def test_claude_read_only_keeps_the_users_denials_and_wins_over_permission_mode() -> None:
    spec = ClaudeBackend().build_command(
        request(
            permissions="read-only",
            options={"disallowed_tools": ["WebFetch"], "permission_mode": "bypassPermissions"},
        )
    )
    assert "--disallowedTools=WebFetch,Bash,Edit,Write,MultiEdit,NotebookEdit" in spec.args
    assert "--permission-mode=bypassPermissions" not in spec.args
    assert spec.warnings == (
        "option permission_mode='bypassPermissions' ignored: permissions='read-only' "
        "sets the permission mode",
    )


def test_claude_max_turns_model_resume_and_retries() -> None:
    spec = ClaudeBackend().build_command(
        request(model="sonnet", max_turns=3, resume="abc-1", cli_max_retries=0)
    )
    assert {"--model=sonnet", "--max-turns=3", "--resume=abc-1"} <= set(spec.args)
    assert spec.env == {"CLAUDE_CODE_MAX_RETRIES": "0", "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"}
    # The old spelling still works; the vocabulary wins when both are given.
    old = ClaudeBackend().build_command(request(options={"max_turns": 7}))
    assert "--max-turns=7" in old.args
    both = ClaudeBackend().build_command(request(max_turns=2, options={"max_turns": 7}))
    assert "--max-turns=2" in both.args and "--max-turns=7" not in both.args
    assert ClaudeBackend().build_command(request()).env == {
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"  # no retry cap asked: only ours
    }


@pytest.mark.slow
def test_claude_vocabulary_reaches_the_cli_argv_and_env(
    fake_claude: FakeCLI, tmp_path: Path
) -> None:
    fake_claude.script([{"answer_env": True}])
    agent = fake_claude.agent(permissions="edit", max_turns=4, cli_max_retries=1, cwd=tmp_path)
    result = agent.run_sync("hi")
    assert result["status"] == 0, result
    assert "CLAUDE_CODE_MAX_RETRIES" in result["message"]
    (argv,) = [r["argv"] for r in fake_claude.records() if "argv" in r]
    assert "--permission-mode=acceptEdits" in argv and "--max-turns=4" in argv
    # Per call: overrides the agent's.
    agent.run_sync("again", permissions="read-only", max_turns=1)
    argv = [r["argv"] for r in fake_claude.records() if "argv" in r][-1]
    assert "--permission-mode=default" in argv and "--max-turns=1" in argv


# -- codex ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "sandbox"),
    [("read-only", "read-only"), ("edit", "workspace-write"), ("full", "danger-full-access")],
)
def test_codex_permissions_are_its_sandbox(level: str, sandbox: str) -> None:
    spec = CodexBackend().build_command(request(permissions=level, options={"sandbox": "x"}))
    i = spec.args.index("-s")
    assert spec.args[i + 1] == sandbox
    assert spec.args.count("-s") == 1
    assert spec.warnings == (f"option sandbox='x' ignored: permissions={level!r} sets the sandbox",)


def test_codex_has_no_turn_limit_and_caps_retries_per_named_provider() -> None:
    spec = CodexBackend().build_command(request(max_turns=3, cli_max_retries=1))
    assert not any("max_turns" in a or "max-turns" in a for a in spec.args)
    assert "max_turns=3 not honored: codex has no turn limit" in spec.warnings
    assert any("cli_max_retries=1 not honored" in w for w in spec.warnings)
    named = CodexBackend().build_command(
        request(cli_max_retries=1, options={"config": {"model_provider": "fake"}})
    )
    assert "model_providers.fake.request_max_retries=1" in named.args
    assert "model_providers.fake.stream_max_retries=1" in named.args
    assert not named.warnings
    assert named.args[-1] == "-"  # the prompt still goes on stdin


@pytest.mark.slow
def test_codex_warnings_land_in_the_result(fake_codex: FakeCLI) -> None:
    fake_codex.script([{"answer": "done"}])
    result = fake_codex.agent(max_turns=5).run_sync("hi")
    assert result["status"] == 0, result
    assert "max_turns=5 not honored: codex has no turn limit" in result["warnings"]


# -- failer ---------------------------------------------------------------------


@pytest.mark.slow
def test_failer_takes_every_level() -> None:
    for level in PERMISSION_LEVELS:
        agent = CodingGenesisAgent("failer", permissions=level, max_turns=2)
        assert agent.run_sync("hello")["status"] == 0
    spec = FailerBackend().build_command(request(permissions="edit", max_turns=2))
    assert "--permissions=edit" in spec.args and "--max-turns=2" in spec.args


# -- default cap under a retry policy --------------------------------------------


@pytest.mark.slow
def test_cli_retries_are_capped_by_default_only_under_a_retry_policy(
    fake_claude: FakeCLI,
) -> None:
    fake_claude.script([{"answer_env": True}])
    plain = fake_claude.agent().run_sync("hi")
    assert "CLAUDE_CODE_MAX_RETRIES" not in plain["message"]
    fake_claude.script([{"echo_prompt": True}])
    seen: list[Any] = []

    class Probe(ClaudeBackend):
        def build_command(self, request: Request) -> CommandSpec:
            seen.append(request.cli_max_retries)
            return super().build_command(request)

    agent = CodingGenesisAgent(
        Probe(), cli_path=fake_claude.path, env=fake_claude.env(), retry=1, timeout=10
    )
    assert agent.run_sync("hi")["status"] == 0
    assert agent.run_sync("hi", cli_max_retries=5)["status"] == 0
    assert (
        CodingGenesisAgent(
            Probe(), cli_path=fake_claude.path, env=fake_claude.env(), cli_max_retries=0, retry=1
        ).run_sync("hi")["status"]
        == 0
    )
    assert seen == [DEFAULT_CLI_MAX_RETRIES, 5, 0]


# -- run_many and the command line ------------------------------------------------


def test_run_many_carries_the_vocabulary(fake_claude: FakeCLI) -> None:
    fake_claude.script([{"echo_prompt": True}])
    results = run_many_sync(
        [
            {
                "prompt": "one",
                "backend": "claude",
                "cli_path": fake_claude.path,
                "env": fake_claude.env(),
                "permissions": "read-only",
                "max_turns": 2,
            },
            {"prompt": "two", "backend": "failer", "permissions": "sudo"},
        ]
    )
    assert results[0]["status"] == 0, results[0]
    assert "permissions must be one of" in results[1]["message"]
    (argv,) = [r["argv"] for r in fake_claude.records() if "argv" in r]
    assert "--permission-mode=default" in argv and "--max-turns=2" in argv


def test_genesis_run_flags(
    fake_claude: FakeCLI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coding_genesis._cli.main import main

    for name, value in fake_claude.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GENESIS_TRANSCRIPTS", "off")
    code = main(
        [
            "run",
            "-q",
            "--json",
            "-b",
            "claude",
            "--cli-path",
            fake_claude.path,
            "--permissions",
            "read-only",
            "--max-turns",
            "3",
            "--cli-max-retries",
            "0",
            "hi",
        ]
    )
    assert code == 0, capsys.readouterr()
    (argv,) = [r["argv"] for r in fake_claude.records() if "argv" in r]
    assert "--permission-mode=default" in argv and "--max-turns=3" in argv
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["run", "--permissions", "root", "hi"])
    assert exc.value.code == 2
    assert "invalid choice: 'root'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--max-turns", "0", "hi"])
    assert "expected a whole number >= 1, got '0'" in capsys.readouterr().err


# -- the overlay ------------------------------------------------------------------

PROBE = textwrap.dedent(
    """\
    import json, os, stat, sys, time
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    root = os.environ["PROBE_OVERLAY"]
    facts = {
        "root": root,
        "root_mode": oct(stat.S_IMODE(os.stat(root).st_mode)),
        "settings": open(args["--settings"]).read(),
        "settings_mode": oct(stat.S_IMODE(os.stat(args["--settings"]).st_mode)),
        "nested_mode": oct(stat.S_IMODE(os.stat(os.path.join(root, "sub")).st_mode)),
    }
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "s1"}), flush=True)
    if os.environ.get("PROBE_SLEEP"):
        time.sleep(float(os.environ["PROBE_SLEEP"]))
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                      "result": json.dumps(facts), "session_id": "s1"}), flush=True)
    """
)


class OverlayBackend(ClaudeBackend):
    name = "overlay-probe"

    def build_command(self, request: Request) -> CommandSpec:
        return dataclasses.replace(
            super().build_command(request),
            args=("--settings={overlay}/settings.json",),
            env={"PROBE_OVERLAY": "{overlay}"},
            overlay={"settings.json": b'{"permissions": {"allow": []}}', "sub/x.txt": b"x"},
            warnings=("probe: something not honored",),
        )


def probe_agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    return CodingGenesisAgent(
        OverlayBackend(), cli_path=[sys.executable, str(script)], grace=0.5, **settings
    )


def test_the_overlay_is_private_for_the_run_and_removed_after(tmp_path: Path) -> None:
    result = probe_agent(tmp_path, timeout=20).run_sync("hi")
    assert result["status"] == 0, result
    facts = json.loads(result["message"])
    assert facts["settings"] == '{"permissions": {"allow": []}}'
    assert (facts["root_mode"], facts["nested_mode"]) == ("0o700", "0o700")
    assert facts["settings_mode"] == "0o600"
    assert not os.path.exists(facts["root"])
    assert result["warnings"][0] == "probe: something not honored"


@pytest.mark.slow
def test_the_overlay_is_removed_after_a_timeout(tmp_path: Path) -> None:
    tmp_dir = tempfile.gettempdir()
    before = set(os.listdir(tmp_dir))
    result = probe_agent(tmp_path, timeout=1.0, env={"PROBE_SLEEP": "30"}).run_sync("hi")
    assert result["status"] == 124, result
    left = {n for n in set(os.listdir(tmp_dir)) - before if n.startswith("genesis-overlay-")}
    assert not left


def test_an_overlay_path_outside_the_directory_is_refused() -> None:
    from coding_genesis._pipeline.overlay import materialised

    for bad in ("/etc/passwd", "../x", "a/../../x", ""):
        with (
            pytest.raises(ConfigError, match="relative path inside the overlay"),
            materialised(CommandSpec(args=(), overlay={bad: b""})),
        ):
            pass


def test_overlay_nested_files_are_written_and_removed() -> None:
    from coding_genesis._pipeline.overlay import materialised

    with materialised(CommandSpec(args=("{overlay}",), overlay={"a": b"1", "d/b": b"2"})) as spec:
        root = Path(spec.args[0])
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert (root / "a").read_bytes() == b"1" and (root / "d" / "b").read_bytes() == b"2"
    assert not root.exists()


def test_the_overlay_is_removed_when_the_run_is_cancelled(tmp_path: Path) -> None:
    import anyio

    from coding_genesis.run_events import RunStartedEvent

    before = set(os.listdir(tempfile.gettempdir()))
    agent = probe_agent(tmp_path, timeout=60, env={"PROBE_SLEEP": "60"})

    async def main() -> None:
        started = anyio.Event()
        agent.subscribe(lambda e: started.set() if isinstance(e, RunStartedEvent) else None)
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.run, "hi")
            await started.wait()
            left = {
                n for n in os.listdir(tempfile.gettempdir()) if n.startswith("genesis-overlay-")
            }
            assert left - before  # the overlay exists while the run does
            tg.cancel_scope.cancel()

    anyio.run(main)
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before}
    assert not {n for n in left if n.startswith("genesis-overlay-")}


def test_an_overlay_outside_an_attempt_is_refused() -> None:
    from coding_genesis._pipeline.overlay import open_overlay

    with pytest.raises(RuntimeError, match="outside an overlay_scope"):
        open_overlay(CommandSpec(args=(), overlay={"a": b"1"}))
    plain = CommandSpec(args=("x",))
    assert open_overlay(plain) is plain
