"""A real ``genesis serve`` process on 127.0.0.1 for the tests, and its clients.

The server runs in a process of its own (``python -m coding_genesis._cli.main
serve --port 0``), with its own state directory, transcripts, run log and run
ledger; a test's clients are this process (httpx) or another one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]

#: The routes of the API (the committed schema's paths).
SCHEMA_PATHS = frozenset(
    {
        "/runs",
        "/runs/{run}",
        "/runs/{run}/cancel",
        "/runs/{run}/transcript",
        "/runs/{run}/events",
        "/events",
        "/stats",
        "/doctor",
        "/server",
        "/auth/session",
        "/approvals",
        "/approvals/events",
        "/approvals/{approval}",
        "/sessions",
        "/sessions/{session}",
        "/sessions/{session}/turns",
        "/sessions/{session}/turns/{number}",
        "/sessions/{session}/events",
        "/sessions/{session}/interrupt",
        "/sessions/{session}/steer",
        "/sessions/{session}/close",
        "/sessions/{session}/resume",
    }
)


@dataclass
class Served:
    """One server process and what a client needs to reach it."""

    proc: subprocess.Popen[str]
    url: str
    token: str
    state: Path
    root: Path
    transcripts: Path
    run_log: Path
    env: dict[str, str]
    stderr_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **kwargs)

    def anonymous(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0, **kwargs)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def start(self, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post("/runs", json=body)
        assert response.status_code == 202, response.text
        run: dict[str, Any] = response.json()
        return run

    def wait(
        self,
        client: httpx.Client,
        run: str,
        states: tuple[str, ...] = ("finished",),
        within: float = 60.0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            view: dict[str, Any] = client.get(f"/runs/{run}").json()
            if view["state"] in states or time.monotonic() > deadline:
                assert view["state"] in states, view
                return view
            time.sleep(0.05)

    def stop(self, signum: int = signal.SIGTERM, within: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(within)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"the server did not stop within {within}s:\n{self.stderr()}"
            ) from None
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


#: A generic backend of a stream-json CLI: no two-way protocol (every built-in
#: backend has one), what the capability check refuses an inbox or a session.
ONE_WAY = """\
[backends.oneway]
command = ["oneway-cli", "-p"]
format = "claude-stream-json"
"""


def server_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server of its own: state, transcripts, run log, ledger,
    and a backends file naming the one-way backend ``oneway``."""
    tmp.mkdir(parents=True, exist_ok=True)
    backends = tmp / "backends.toml"
    backends.write_text(ONE_WAY)
    return {
        **os.environ,
        "XDG_STATE_HOME": str(tmp / "state"),
        "GENESIS_TRANSCRIPTS": str(tmp / "runs"),
        "GENESIS_RUN_LOG": str(tmp / "runs.jsonl"),
        "GENESIS_LEDGER": str(tmp / "ledger"),
        "GENESIS_BACKEND": "failer",
        "GENESIS_BACKENDS_FILE": str(backends),
        **(extra or {}),
    }


def serve(
    tmp: Path,
    *args: str,
    env: dict[str, str] | None = None,
    root: Path | None = None,
    within: float = 30.0,
) -> Served:
    """Start ``genesis serve --port 0`` and wait until it listens."""
    tmp.mkdir(parents=True, exist_ok=True)
    root = root or tmp / "root"
    root.mkdir(exist_ok=True)
    environment = server_env(tmp, env)
    state = tmp / "state" / "coding-genesis" / "serve"
    err = tmp / f"serve-{time.monotonic_ns()}.err"
    argv = [
        sys.executable,
        "-m",
        "coding_genesis._cli.main",
        "serve",
        "--port",
        "0",
        "--root",
        str(root),
        *args,
    ]
    with open(err, "w") as stderr:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env=environment,
            cwd=ROOT,
        )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], within)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("http://"):
        proc.kill()
        proc.wait()
        raise AssertionError(f"the server did not start: {line!r}\n{err.read_text()}")
    given = args[args.index("--token-file") + 1] if "--token-file" in args else None
    token = (
        environment.get("GENESIS_SERVE_TOKEN") or Path(given or state / "token").read_text().strip()
    )
    return Served(
        proc=proc,
        url=line,
        token=token,
        state=state,
        root=root,
        transcripts=tmp / "runs",
        run_log=tmp / "runs.jsonl",
        env=environment,
        stderr_path=err,
        args=list(args),
    )


@contextlib.contextmanager
def serving(tmp: Path, *args: str, **kwargs: Any) -> Iterator[Served]:
    served = serve(tmp, *args, **kwargs)
    try:
        yield served
    finally:
        served.stop(signal.SIGTERM)


def sse(
    response: httpx.Response, *, until: Any = None, limit: int = 10_000
) -> list[dict[str, Any]]:
    """The events of an SSE response (``until(event)``: stop after the first
    event it is true of): each ``{"id", "event", "data"}``."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in current:
                current["data"] = json.loads(current["data"])
                events.append(current)
                if (until is not None and until(current)) or len(events) >= limit:
                    return events
            current = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        if key in ("id", "event", "data"):
            current[key] = value
    return events


def finished(event: dict[str, Any]) -> bool:
    return event["event"] == "run" and event["data"]["state"] in ("finished", "lost")


def turn_ended(
    client: httpx.Client, session: str, number: int, within: float = 60.0
) -> dict[str, Any]:
    """Turn ``number`` of ``session`` once it has ended."""
    turn: dict[str, Any] = client.get(
        f"/sessions/{session}/turns/{number}", params={"wait": within}
    ).json()
    assert turn["state"] == "finished", turn
    return turn


def asked(client: httpx.Client, session: str, within: float = 30.0) -> dict[str, Any]:
    """The first approval ``session`` asks, once it waits in the inbox."""
    deadline = time.monotonic() + within
    while True:
        found = [a for a in client.get("/approvals").json()["approvals"] if a["session"] == session]
        if found or time.monotonic() > deadline:
            assert found, "no approval was asked"
            view: dict[str, Any] = found[0]
            return view
        time.sleep(0.05)
