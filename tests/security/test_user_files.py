"""Round three, finding 7: every file the user names (``--prices``,
``--backends-file``, the batch file of ``run-many``) that cannot be used is a
usage error (exit 2) naming it: nested too deep (a ``RecursionError`` in the
parser), not UTF-8, a directory, a FIFO (which would block), too big.  Never
a traceback, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from coding_genesis._cli.run_many import MAX_BATCH_FILE
from coding_genesis._observers.prices import MAX_PRICE_FILE
from coding_genesis.backends.generic import MAX_BACKENDS_FILE
from tests.terminal import genesis

pytestmark = pytest.mark.slow


def deep_json(path: Path) -> None:
    path.write_text('{"claude": ' + "[" * 100_000 + "]" * 100_000 + "}")


def deep_toml(path: Path) -> None:
    path.write_text("[backends.x]\ncommand = " + "[" * 100_000 + "]" * 100_000 + "\n")


def not_utf8(path: Path) -> None:
    path.write_bytes(b'{"claude": {"input": 1, "output": 2}, "\xff\xfe": 1}\n')


def directory(path: Path) -> None:
    path.mkdir()


def fifo(path: Path) -> None:
    os.mkfifo(path)


def huge(limit: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with open(path, "wb") as fh:
            fh.truncate(limit + 1)  # sparse: no disk used

    return make


PRICES = {
    "nested": deep_json,
    "not-utf8": not_utf8,
    "directory": directory,
    "fifo": fifo,
    "huge": huge(MAX_PRICE_FILE),
}
BACKENDS = {
    "nested": deep_toml,
    "not-utf8": not_utf8,
    "directory": directory,
    "fifo": fifo,
    "huge": huge(MAX_BACKENDS_FILE),
}
BATCH = {"directory": directory, "fifo": fifo, "huge": huge(MAX_BATCH_FILE)}


def usage_error(args: list[str], named: Path) -> None:
    try:
        done = genesis(args, env={"GENESIS_RUN_LOG": "off"}, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"genesis {' '.join(args)} hung")
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.returncode == 2, done.stderr.decode()
    assert str(named).encode() in done.stderr


@pytest.mark.parametrize("kind", sorted(PRICES))
def test_a_bad_prices_file_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "prices.json"
    PRICES[kind](path)
    usage_error(["run", "-b", "failer", "--prices", str(path), "go"], path)
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps({"prompt": "x", "backend": "failer"}) + "\n")
    usage_error(["run-many", "--prices", str(path), str(batch)], path)


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_a_bad_backends_file_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "backends.toml"
    BACKENDS[kind](path)
    usage_error(["run", "-b", "failer", "--backends-file", str(path), "go"], path)


@pytest.mark.parametrize("kind", sorted(BATCH))
def test_a_batch_file_that_is_no_file_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "batch.jsonl"
    BATCH[kind](path)
    usage_error(["run-many", str(path)], path)


def test_bad_lines_of_a_batch_file_are_failures_of_their_own(tmp_path: Path) -> None:
    """A batch file's lines are requests: a line nested too deep or not UTF-8
    is that request's failure (status 64), the others run (never a traceback)."""
    path = tmp_path / "batch.jsonl"
    good = json.dumps({"prompt": "x", "backend": "failer"}).encode()
    path.write_bytes(b"[" * 100_000 + b"\n" + b'{"prompt": "\xff"}\n' + good + b"\n")
    done = genesis(["run-many", str(path)], env={"GENESIS_RUN_LOG": "off"}, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    statuses = sorted(json.loads(line)["status"] for line in done.stdout.splitlines())
    assert statuses == [0, 64, 64] and done.returncode == 1


@pytest.mark.parametrize("kind", ["nested", "not-utf8", "fifo"])
def test_doctor_reads_a_bad_cli_config_as_the_default(tmp_path: Path, kind: str) -> None:
    """codex's config.toml and claude's settings.json are the user's files
    too: a damaged one reads as absent, never a traceback or a hang."""
    codex_home, claude_dir = tmp_path / "codex", tmp_path / "claude"
    codex_home.mkdir()
    claude_dir.mkdir()
    {"nested": deep_toml, "not-utf8": not_utf8, "fifo": fifo}[kind](codex_home / "config.toml")
    {"nested": deep_json, "not-utf8": not_utf8, "fifo": fifo}[kind](claude_dir / "settings.json")
    env = {"CODEX_HOME": str(codex_home), "CLAUDE_CONFIG_DIR": str(claude_dir)}
    for backend in ("codex", "claude"):
        try:
            done = genesis(["doctor", "--backend", backend, "--json"], env=env, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"genesis doctor --backend {backend} hung")
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        json.loads(done.stdout)
