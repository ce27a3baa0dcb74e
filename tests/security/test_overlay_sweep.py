"""Round three, finding 6: a settings overlay (qwen with ``--cli-max-retries``)
survived a SIGKILLed runner; now its path is in the run's ledger record and
the sweep (``genesis reap``, or the next run) removes it, only when it is
ours: named for the run, a private directory of ours in the temp directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from coding_genesis._pipeline.overlay import OVERLAY_PREFIX, is_own_overlay
from coding_genesis._supervision import spawn
from tests.support import FakeCLI, exits_within

pytestmark = pytest.mark.skipif(
    not spawn.pdeathsig_supported(), reason="PR_SET_PDEATHSIG is Linux-only"
)

REPO = str(Path(__file__).parents[2])
GENESIS = [sys.executable, "-m", "coding_genesis._cli.main"]
SETTINGS = "QWEN_CODE_SYSTEM_SETTINGS_PATH"
#: --cli-max-retries makes qwen's backend write a settings overlay.
RETRIES = ["--cli-max-retries", "1", "--timeout", "60"]


def env_of(fake: FakeCLI, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **fake.env(),
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "GENESIS_TRANSCRIPTS": str(tmp_path / "runs"),
        "GENESIS_RUN_LOG": "off",
    }


def killed_mid_run(tmp_path: Path) -> tuple[Path, dict[str, str], dict[str, object]]:
    """A qwen run with an overlay, its runner SIGKILLed: the overlay left behind."""
    fake = FakeCLI(tmp_path, "qwen")
    fake.script([{"record_env": [SETTINGS]}, {"init": True}, {"hang": True}])
    env = env_of(fake, tmp_path)
    runner = subprocess.Popen(
        [*GENESIS, "run", "-b", "qwen", "--cli-path", fake.path, *RETRIES, "hi"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not [r for r in fake.records() if "env" in r]:
            assert time.monotonic() < deadline, "the CLI never started"
            time.sleep(0.05)
        (record,) = [r for r in fake.records() if "env" in r]
        overlay = Path(str(record["env"][SETTINGS])).parent
        cli = next(r["pid"] for r in fake.records() if "argv" in r)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    finally:
        runner.kill()
        runner.wait()
    assert exits_within(cli, 5.0)
    assert overlay.is_dir() and overlay.name.startswith(OVERLAY_PREFIX)
    (entry,) = [
        json.loads(p.read_text()) for p in (tmp_path / "ledger").iterdir() if p.suffix == ".json"
    ]
    assert entry["overlay"] == str(overlay)
    return overlay, env, entry


@pytest.mark.slow
def test_reap_removes_the_overlay_of_a_sigkilled_runner(tmp_path: Path) -> None:
    overlay, env, _entry = killed_mid_run(tmp_path)
    dry = subprocess.run([*GENESIS, "reap", "--dry-run"], cwd=REPO, env=env, capture_output=True)
    assert f"would remove its settings overlay {overlay}".encode() in dry.stdout
    assert overlay.is_dir()
    reap = subprocess.run([*GENESIS, "reap"], cwd=REPO, env=env, capture_output=True)
    assert reap.returncode == 0, reap.stderr
    assert f"removed its settings overlay {overlay}".encode() in reap.stdout
    assert not overlay.exists()


@pytest.mark.slow
def test_the_next_run_sweeps_the_overlay(tmp_path: Path) -> None:
    overlay, env, _entry = killed_mid_run(tmp_path)
    nxt = subprocess.run(
        [*GENESIS, "run", "-b", "failer", "--transcript-dir", "off", "hi"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert nxt.returncode == 0, nxt.stderr
    assert not overlay.exists()


def test_only_our_own_overlay_is_removed(tmp_path: Path) -> None:
    tag = "0123abcd" * 4
    ours = tempfile.mkdtemp(prefix=f"{OVERLAY_PREFIX}{tag}-")
    try:
        assert is_own_overlay(ours, tag) is None
        assert is_own_overlay(ours, "f" * 32) == "not named for its run"
        os.chmod(ours, 0o755)
        assert is_own_overlay(ours, tag) == "not a private directory of ours"
    finally:
        os.rmdir(ours)
    link = Path(tempfile.gettempdir()) / f"{OVERLAY_PREFIX}{tag}-link"
    link.symlink_to(tmp_path)
    try:
        assert is_own_overlay(str(link), tag) == "not a directory (a link, a file)"
    finally:
        link.unlink()
    elsewhere = tmp_path / f"{OVERLAY_PREFIX}{tag}-x"
    elsewhere.mkdir(mode=0o700)
    assert is_own_overlay(str(elsewhere), tag) == "not in the temp directory"
    assert is_own_overlay("relative/path", tag) == "not an absolute path"
    assert (
        is_own_overlay(str(Path(tempfile.gettempdir()) / f"{OVERLAY_PREFIX}{tag}-gone"), tag)
        == "gone"
    )
