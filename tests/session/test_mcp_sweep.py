"""A host killed mid-session (SIGKILL: no close ran) leaves its tools' socket and
its 0700 directory in our private runtime directory; the next bridge's start
removes them (``coding_genesis._live.mcpbridge.sweep``): only those whose owner
process is dead, never a live host's, never through a link, nothing outside the
runtime directory.  With real child host processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_genesis._live.mcpbridge import McpBridge, sweep
from coding_genesis._supervision import owners

#: A host: serves one session's bridge, says its directory, then waits.
_HOST = textwrap.dedent(
    """
    import sys, tempfile, anyio
    tempfile.tempdir = sys.argv[1]
    from coding_genesis._live.mcpbridge import McpBridge, sweep

    async def main():
        bridge = McpBridge({}, None, lambda pid: False, max_bytes=1 << 20)
        async with anyio.create_task_group() as tg:
            await bridge.serve(tg)
            print(bridge.directory, flush=True)
            await anyio.sleep(600)

    anyio.run(main)
    """
)


def _host(base: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(base)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, f"the host said nothing (rc {proc.poll()})"
    return proc, Path(line)


@pytest.fixture
def base() -> Iterator[Path]:
    """A short temp directory of the test's own (a socket's path is short)."""
    path = Path(tempfile.mkdtemp(prefix="sw", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_killed_host_s_socket_directory_is_swept_at_the_next_start(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed, gone = _host(base)
    live, kept = _host(base)
    try:
        runtime = gone.parent
        assert kept.parent == runtime and (gone / "s").exists() and (kept / "s").exists()
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert (gone / "s").exists()  # nobody closed it
        # a link named as a session directory, to a directory of a dead owner
        # outside the runtime directory: neither followed nor removed
        outside = tmp_path / "outside"
        outside.mkdir(mode=0o700)
        (outside / "o").write_text(f"{killed.pid}-1-")
        (runtime / "s-link").symlink_to(outside)
        # a directory of ours being made (no owner's file yet): left alone
        (runtime / "s-making").mkdir(mode=0o700)
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        bridge = McpBridge({}, None, lambda pid: False, max_bytes=1 << 20)  # type: ignore[arg-type]
        try:
            assert not gone.exists()
            assert (kept / "s").exists() and live.poll() is None
            assert (runtime / "s-link").is_symlink() and (outside / "o").exists()
            assert (runtime / "s-making").is_dir()
            assert bridge.directory.parent == runtime
            mine = owners.owner_of((bridge.directory / "o").read_text())
            assert mine is not None and mine[0] == os.getpid() and owners.alive(mine)
            assert oct((bridge.directory / "o").stat().st_mode & 0o777) == oct(0o600)
            assert sweep(runtime) == []  # nothing more to sweep: the live ones stay
        finally:
            shutil.rmtree(bridge.directory)
    finally:
        for proc in (killed, live):
            proc.kill()
            proc.wait(10)
            proc.stdout.close()  # type: ignore[union-attr]
    # the second host is dead now: its directory goes at the next sweep
    assert sweep(runtime) == [kept.name] and not kept.exists()
    assert sorted(os.listdir(runtime)) == ["s-link", "s-making"]
