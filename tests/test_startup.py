"""Fast start: importing the package and `genesis --help` load none of the heavy
dependencies (they come with the agent, on first use).  Checked by the modules a
fresh interpreter has loaded, never by wall-clock time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("pydantic", "rich", "psutil", "anyio", "orjson")

# Runs CODE, then prints (at exit, whatever CODE did) the top-level packages
# loaded and the coding_genesis modules, as JSON on stderr's last line.
_PROBE = """\
import atexit, json, sys

def _report():
    top = sorted({name.split(".")[0] for name in sys.modules})
    ours = sorted(name for name in sys.modules if name.startswith("coding_genesis"))
    sys.stderr.write("\\n" + json.dumps({"top": top, "ours": ours}) + "\\n")

atexit.register(_report)
"""


def loaded(code: str) -> tuple[set[str], set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENESIS_")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return set(report["top"]), set(report["ours"])


def test_import_loads_no_heavy_dependency() -> None:
    top, ours = loaded("import coding_genesis")
    assert not top & set(HEAVY), top & set(HEAVY)
    assert ours == {"coding_genesis"}


@pytest.mark.slow
def test_public_names_resolve_on_first_use() -> None:
    top, _ = loaded(
        "import coding_genesis as cg\n"
        "assert set(cg.__all__) <= set(dir(cg))\n"
        "missing = [n for n in cg.__all__ if getattr(cg, n, None) is None]\n"
        "assert not missing, missing\n"
        "from coding_genesis import CodingGenesisAgent, Status\n"
        "assert CodingGenesisAgent.__module__ == 'coding_genesis.agent'\n"
        "assert Status.SUCCESS == 0\n"
    )
    assert "pydantic" in top  # the agent did load, on first use


def test_unknown_name_is_an_attribute_error() -> None:
    import coding_genesis

    with pytest.raises(AttributeError, match="no_such_name"):
        coding_genesis.no_such_name  # noqa: B018
    assert not hasattr(coding_genesis, "no_such_name")


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["run", "--help"],
        ["run-many", "--help"],
        ["runs", "--help"],
        ["show", "--help"],
        ["replay", "--help"],
        ["doctor", "--help"],
        ["stats", "--help"],
    ],
)
def test_help_loads_no_heavy_dependency(argv: list[str]) -> None:
    top, ours = loaded(
        "from coding_genesis._cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
    )
    assert not top & set(HEAVY), top & set(HEAVY)
    # Not the agent, the backends or the pipeline: only the command modules
    # (and display, the stdlib-only filter of what a terminal is shown, with its
    # package's empty __init__).
    assert {m for m in ours if not m.startswith("coding_genesis._cli")} <= {
        "coding_genesis",
        "coding_genesis._util",
        "coding_genesis._util.display",
        "coding_genesis._util.words",  # stdlib only: counts and money in words (issue 28)
        "coding_genesis._util.version",  # --version: the package metadata, read on demand
        "coding_genesis.status",
    }, ours


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["run", "--help"], "run"),
        (["--retry-testing", "run", "--help"], "run"),
        (["run-many", "--help"], "run_many"),
        (["chat", "--help"], "chat"),
        (["show", "--help"], "show"),
    ],
)
def test_a_command_loads_no_other_command(argv: list[str], module: str) -> None:
    """``genesis run ...`` imports and builds the parser of ``run`` only: the
    other commands' modules are start-up time it would not use."""
    _, ours = loaded(
        "from coding_genesis._cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
    )
    from coding_genesis._cli.main import COMMANDS

    commands = {f"coding_genesis._cli.{name}" for name in COMMANDS}
    assert ours & commands == {f"coding_genesis._cli.{module}"}, ours


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"], ["run_many"], ["--retry"]])
def test_help_and_errors_still_know_every_command(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    shown = proc.stdout + proc.stderr
    assert all(name in shown for name in ("run-many", "doctor", "stats", "reap")), shown


@pytest.mark.parametrize("argv", [["--help"], ["-h"], [], ["--retry-testing", "--help"]])
def test_the_top_level_help_loads_no_command(argv: list[str]) -> None:
    """``genesis --help`` shows each command's line from one table: no
    command's module (their imports are most of its start-up) is loaded."""
    _, ours = loaded(
        "from coding_genesis._cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
    )
    from coding_genesis._cli.main import COMMANDS

    assert not ours & {f"coding_genesis._cli.{name}" for name in COMMANDS}, ours


def test_the_top_level_help_is_the_one_every_parser_gives() -> None:
    """The lines come from the table each command registers with, so the
    quick help and the one built from every command's parser are the same."""
    from coding_genesis._cli.main import build_parser

    assert build_parser(["--help"]).format_help() == build_parser(None).format_help()
