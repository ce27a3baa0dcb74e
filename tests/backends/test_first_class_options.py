"""``system_prompt=``, ``append_system_prompt=`` and ``add_dirs=``: first-class keywords of
``run()``, sessions and batch lines, mapped by each backend that has them (one-shot argv, a
live session's argv or thread and turn params), the old ``options=`` keys still working (the
first-class one wins, with a warning), refused with one wording where a CLI lacks them; and
untrusted input may set a system prompt but not a directory the CLI may write in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent, ConfigError, RefusedError
from coding_genesis._lines import read_requests
from coding_genesis.backends import get_backend
from coding_genesis.batch import InvalidRequest
from coding_genesis.capabilities import backends_that, untrusted_problem
from coding_genesis.control import Reply
from tests.backends.test_codex_control import schema_problems
from tests.support import cli_request

FIRST_CLASS: dict[str, Any] = {"system_prompt": "SYS", "append_system_prompt": "APP"}


def args_of(backend: str, **fields: Any) -> tuple[str, ...]:
    return get_backend(backend).build_command(cli_request("hi", **fields)).args


def test_claude_one_shot_and_live_argv(tmp_path: Path) -> None:
    one_shot = args_of("claude", add_dirs=(str(tmp_path),), **FIRST_CLASS)
    live = get_backend("claude").control()
    assert live is not None
    session = live.command(cli_request(add_dirs=(str(tmp_path),), **FIRST_CLASS)).args
    for argv in (one_shot, session):
        assert "--system-prompt=SYS" in argv and "--append-system-prompt=APP" in argv
        assert f"--add-dir={tmp_path}" in argv


def test_qwen_and_gemini_argv(tmp_path: Path) -> None:
    qwen = args_of("qwen", add_dirs=(str(tmp_path),), **FIRST_CLASS)
    assert "--system-prompt=SYS" in qwen and "--append-system-prompt=APP" in qwen
    assert f"--add-dir={tmp_path}" in qwen
    assert f"--include-directories={tmp_path}" in args_of("gemini", add_dirs=(str(tmp_path),))


def test_codex_exec_argv(tmp_path: Path) -> None:
    argv = args_of(
        "codex", permissions="edit", add_dirs=(str(tmp_path),), system_prompt='say "x"\n'
    )
    at = argv.index('instructions="say \\"x\\"\\n"')  # a TOML string, as codex reads -c
    assert argv[at - 1] == "-c"
    assert ["--add-dir", str(tmp_path)] == list(argv[argv.index("--add-dir") :][:2])
    appended = args_of("codex", append_system_prompt="APP")
    assert 'developer_instructions="APP"' in appended


def test_codex_app_server_thread_and_turn_params(tmp_path: Path) -> None:
    protocol = get_backend("codex").control()
    assert protocol is not None
    start = cli_request(permissions="edit", add_dirs=(str(tmp_path),), **FIRST_CLASS)
    protocol.begin(start)
    (reply,) = protocol.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    thread = next(o for o in reply.objects if o.get("method") == "thread/start")
    assert thread["params"]["baseInstructions"] == "SYS"
    assert thread["params"]["developerInstructions"] == "APP"
    protocol.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    (turn,) = protocol.begin_turn("x")
    assert turn["params"]["sandboxPolicy"] == {
        "type": "workspaceWrite",
        "writableRoots": [str(tmp_path)],
    }
    for written in (thread, turn):
        assert schema_problems(written) == [], written


def test_codex_says_when_its_sandbox_cannot_take_add_dirs(tmp_path: Path) -> None:
    spec = get_backend("codex").build_command(
        cli_request("hi", permissions="read-only", add_dirs=(str(tmp_path),))
    )
    assert "--add-dir" not in spec.args
    assert any("add_dirs=" in w and "workspace-write" in w for w in spec.warnings)


@pytest.mark.parametrize(
    ("backend", "option", "key"),
    [
        ("claude", "append_system_prompt", "append_system_prompt"),
        ("claude", "add_dirs", "add_dirs"),
        ("qwen", "add_dirs", "add_dirs"),
        ("gemini", "add_dirs", "include_directories"),
    ],
)
def test_the_old_option_works_and_the_first_class_one_wins(
    backend: str, option: str, key: str, tmp_path: Path
) -> None:
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    old = "OLD" if option == "append_system_prompt" else str(old_dir)
    new: Any = "NEW" if option == "append_system_prompt" else (str(new_dir),)
    alone = get_backend(backend).build_command(cli_request("hi", options={key: old}))
    assert any(old in arg for arg in alone.args) and not alone.warnings
    both = get_backend(backend).build_command(
        cli_request("hi", options={key: old}, **{option: new})
    )
    assert not any(old in arg for arg in both.args)
    assert any(
        ("NEW" if option == "append_system_prompt" else str(new_dir)) in a for a in both.args
    )
    assert f"option {key}={old!r} ignored: {option}= sets it" in both.warnings


@pytest.mark.parametrize(
    ("backend", "option", "noun"),
    [
        ("gemini", "system_prompt", "system prompt"),
        ("gemini", "append_system_prompt", "appended system prompt"),
        ("opencode", "system_prompt", "system prompt"),
        ("opencode", "add_dirs", "extra directories"),
        ("failer", "append_system_prompt", "appended system prompt"),
    ],
)
def test_a_cli_without_it_refuses_in_one_wording(
    backend: str, option: str, noun: str, tmp_path: Path
) -> None:
    value: Any = [str(tmp_path)] if option == "add_dirs" else "text"
    words = (
        f"backend {backend!r} takes no {noun}, which {option}= needs; "
        f"backends that do: {', '.join(backends_that(option))}"
    )
    with pytest.raises(RefusedError) as refused:
        CodingGenesisAgent(backend, ledger=False, **{option: value})
    assert str(refused.value) == words
    response = CodingGenesisAgent(backend, ledger=False).run_sync("hi", **{option: value})
    assert response["status"] == 64 and response["message"] == words


def test_add_dirs_must_exist_and_is_made_absolute(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a directory"):
        CodingGenesisAgent("claude", add_dirs=[str(tmp_path / "missing")])
    agent = CodingGenesisAgent("claude", add_dirs=str(tmp_path))
    assert agent.config.add_dirs == (str(tmp_path),)


def test_untrusted_input_may_set_a_system_prompt_but_no_directory(tmp_path: Path) -> None:
    line = {"prompt": "p", "backend": "claude", "system_prompt": "S", "append_system_prompt": "A"}
    assert untrusted_problem(line) is None
    widened = {**line, "add_dirs": [str(tmp_path)]}
    assert "refused field(s) add_dirs" in str(untrusted_problem(widened))
    (refused,) = read_requests([json.dumps(widened).encode()])
    assert isinstance(refused, InvalidRequest) and "add_dirs" in refused.reason
    (trusted,) = read_requests([json.dumps(widened).encode()], trusted=True)
    assert trusted == widened
