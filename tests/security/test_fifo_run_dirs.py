"""Round three, finding 5: a FIFO (or a link, or a device) planted where a
run directory's file should be never hangs ``genesis runs``, ``show`` or
``replay``: they report the run directory as damaged and exit; the run log
likewise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from coding_genesis._util.files import NotARegularFile, open_regular, read_regular
from tests.terminal import genesis

RUN_ID = "abc123def456"


def run_dir(tmp_path: Path) -> Path:
    base = tmp_path / "runs"
    run = base / RUN_ID
    run.mkdir(parents=True)
    meta = {"run_id": RUN_ID, "layout": 2, "backend": "claude", "prompt": "hi", "started_ts": 1.0}
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "result.json").write_text(json.dumps({"status": 0, "message": "ok"}))
    (run / "events.jsonl").write_text("")
    (run / "stdout.jsonl").write_text('{"type":"result","result":"ok"}\n')
    (run / "stderr.txt").write_text("")
    return base


def no_hang(
    args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        done = genesis(args, env=env, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"genesis {' '.join(args)} hung on a FIFO")
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return done


@pytest.mark.slow
@pytest.mark.parametrize("name", ["result.json", "meta.json"])
def test_a_fifo_record_never_hangs_runs_or_show(tmp_path: Path, name: str) -> None:
    base = run_dir(tmp_path)
    fifo = base / RUN_ID / name
    fifo.unlink()
    os.mkfifo(fifo)
    where = ["--transcript-dir", str(base)]
    listed = no_hang(["runs", *where])
    assert listed.returncode == 0
    assert b"damaged" in listed.stderr and name.encode() in listed.stderr
    rows = [json.loads(line) for line in no_hang(["runs", "--json", *where]).stdout.splitlines()]
    assert [row["run_id"] for row in rows] == [RUN_ID]
    assert "damaged" in rows[0]["error"]
    for extra in ([], ["--json"], ["--events"], ["--raw"]):
        shown = no_hang(["show", RUN_ID, *extra, *where])
        assert shown.returncode != 0
        assert b"damaged" in shown.stderr or b"no readable meta.json" in shown.stderr
    shown = no_hang(["show", "last", *where])
    assert shown.returncode != 0 and b"damaged" in shown.stderr
    replayed = no_hang(["replay", RUN_ID, *where])
    assert replayed.returncode in (0, 1, 2)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["events.jsonl", "stdout.jsonl", "stderr.txt"])
def test_a_fifo_in_place_of_a_stream_never_hangs_show_or_replay(tmp_path: Path, name: str) -> None:
    base = run_dir(tmp_path)
    fifo = base / RUN_ID / name
    fifo.unlink()
    os.mkfifo(fifo)
    where = ["--transcript-dir", str(base)]
    for extra in ([], ["--events"], ["--raw"]):
        no_hang(["show", RUN_ID, *extra, *where])
    replayed = no_hang(["replay", RUN_ID, *where])
    if name == "stdout.jsonl":
        assert replayed.returncode == 2 and b"damaged" in replayed.stderr


@pytest.mark.slow
def test_a_fifo_run_log_never_hangs_a_run_or_stats(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    os.mkfifo(log)
    env = {"GENESIS_RUN_LOG": str(log)}
    ran = no_hang(["run", "-b", "failer", "--transcript-dir", "off", "go"], env=env)
    assert ran.returncode == 0, ran.stderr
    no_hang(["stats", "--log", str(log)], env=env)


def test_the_reader_refuses_what_is_no_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    regular = tmp_path / "file"
    regular.write_bytes(b"x" * 100)
    with pytest.raises(NotARegularFile):
        read_regular(fifo, 10)
    with pytest.raises(OSError):  # noqa: PT011  (ELOOP: the link is not followed; its text varies)
        read_regular(link, 10)
    with pytest.raises(NotARegularFile):  # followed, but /dev/zero is a device
        read_regular(link, 10, follow=True)
    with pytest.raises(NotARegularFile, match="too big"):
        read_regular(regular, 99)
    assert read_regular(regular, 100) == b"x" * 100
    os.close(open_regular(tmp_path / "file"))
    with pytest.raises(NotARegularFile):
        open_regular(tmp_path)  # a directory


@pytest.mark.slow
def test_a_fifo_ended_json_never_hangs_the_sweep(tmp_path: Path) -> None:
    """The sweep marks a dead run's transcript (ended.json): a FIFO planted
    there (by the CLI, which runs as us) fails the open, never blocks reap."""
    import sys
    import uuid

    run_id = uuid.uuid4().hex
    transcript = tmp_path / "runs" / run_id
    transcript.mkdir(parents=True, mode=0o700)
    os.mkfifo(transcript / "ended.json")
    ledger = tmp_path / "ledger"
    # A runner that records its run and dies (its pid is then gone).
    code = (
        "import sys\n"
        "from coding_genesis._supervision.ledger import Ledger\n"
        "Ledger(sys.argv[1]).record(sys.argv[2], marker=sys.argv[2], transcript=sys.argv[3])\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(ledger), run_id, str(transcript)], check=True, timeout=60
    )
    reaped = no_hang(["reap"], env={"GENESIS_LEDGER": str(ledger)})
    assert reaped.returncode == 0 and run_id.encode() in reaped.stdout, reaped.stdout
    assert not os.listdir(ledger)  # the record was acted on and removed
