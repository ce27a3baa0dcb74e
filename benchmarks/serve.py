"""Figure 12: ``genesis serve``, ratios measured in one run.

* A failer run through the API (``POST /runs``, then its event stream until its
  end) against the same run as a direct library call (a fresh agent's
  ``run()``, recording transcripts and the run log as the server does),
  interleaved pair by pair: the median of the per-pair ratios.
* Event lag (an event's time on the run's bus to its arrival at a client) with
  200 clients following ``/events`` against one client's: the p99 of each.
* The server's RSS with 200 clients against one.

The server runs in a process of its own (``genesis serve --port 0``), the
clients of the lag figure in another (``tests/serve/load_client.py``): a
client has an event when its socket is read (stamped then, parsed later).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .stats import median, paired_ratio

__all__ = ["fig_serve"]

Params = dict[str, Any]
Result = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
#: The aims (issue 42).
AIM_RUN = 1.15
AIM_LAG = 5.0
AIM_RSS = 2.0


def _api_run(client: Any, prompt: str) -> tuple[float, float]:
    """(to the run's start event, to its end) of one run through the API."""
    t0 = time.perf_counter()
    started = None
    key = client.post("/runs", json={"prompt": prompt}).json()["id"]
    with client.stream("GET", f"/runs/{key}/events") as response:
        for line in response.iter_lines():
            if started is None and line == "event: run_started":
                started = time.perf_counter() - t0
            if line.startswith("data: ") and '"state":"finished"' in line:
                if '"status":0' not in line:
                    raise RuntimeError(f"the API run failed: {line[:300]}")
                break
    end = time.perf_counter() - t0
    return started or end, end


def _library_run(settings: dict[str, Any], prompt: str) -> tuple[float, float]:
    from coding_genesis import CodingGenesisAgent

    t0 = time.perf_counter()
    agent = CodingGenesisAgent("failer", **settings)
    started: list[float] = []
    agent.subscribe(
        lambda e: (
            started.append(time.perf_counter() - t0)
            if e.kind.value == "run_started" and not started
            else None
        )
    )
    result = agent.run_sync(prompt)
    if result["status"] != 0:
        raise RuntimeError(f"the library run failed: {result['message'][:300]}")
    end = time.perf_counter() - t0
    return (started[0] if started else end), end


def _rss(pid: int) -> int:
    import psutil

    return int(psutil.Process(pid).memory_info().rss)


def _follow(server: Any, client: Any, n: int, runs: int) -> tuple[Result, int]:
    """``n`` clients (another process) follow everything while ``runs`` runs go:
    what they saw, and the server's RSS while they are connected."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.serve.load_client",
            "sse",
            server.url,
            server.token,
            str(n),
            str(runs),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdin is not None
    json.loads(proc.stdout.readline())  # connected
    for i in range(runs):
        _api_run(client, f"watched {i}")
    report: Result = json.loads(proc.stdout.readline())
    time.sleep(0.5)
    memory = _rss(server.proc.pid)
    proc.stdin.write("bye\n")
    proc.stdin.flush()
    proc.wait(120)
    proc.stdin.close()
    proc.stdout.close()
    return report, memory


def fig_serve(p: Params) -> Result:
    from .figures import aim_row, row

    aim = (
        f"a run through the API ≤ {AIM_RUN:g}× a library call; 200 clients' p99 lag ≤ "
        f"{AIM_LAG:g}× one's; RSS with 200 clients ≤ {AIM_RSS:g}× with one"
    )
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return {"aim": aim, "aim_met": None, "skipped": f"the serve extra is not installed ({exc})"}
    from tests.serve.support import serving

    pairs = int(p["serve_pairs"])
    n_clients = int(p["serve_clients"])
    runs = int(p["serve_runs"])
    work = Path(tempfile.mkdtemp(prefix="bench-serve-", dir=p["workdir"]))
    with serving(work, "--concurrency", "4", "--queue", "1000") as server:
        settings = {
            "transcripts": str(server.transcripts),
            "run_log": str(server.run_log),
            "cwd": str(server.root),
        }
        api: list[tuple[float, float]] = []
        lib: list[tuple[float, float]] = []
        with server.client() as client:
            for warm in range(3):
                _api_run(client, f"warm {warm}")
                _library_run(settings, f"warm {warm}")
            for i in range(pairs):
                if i % 2:
                    api.append(_api_run(client, "hello"))
                    lib.append(_library_run(settings, "hello"))
                else:
                    lib.append(_library_run(settings, "hello"))
                    api.append(_api_run(client, "hello"))
            lag: dict[int, list[Result]] = {1: [], n_clients: []}
            rss: dict[int, list[int]] = {1: [], n_clients: []}
            for _round in range(int(p["serve_rounds"])):  # 1, N, 1, N...: noise hits both
                for n in (1, n_clients):
                    report, memory = _follow(server, client, n, runs)
                    lag[n].append(report)
                    rss[n].append(memory)
    ends = paired_ratio([a[1] for a in api], [b[1] for b in lib])
    starts = paired_ratio([a[0] for a in api], [b[0] for b in lib])
    for many in lag[n_clients]:
        if many["missed"] or len(set(many["events"])) != 1:
            raise RuntimeError(f"not every client got every event: {many}")
    if {r["events"][0] for r in lag[1]} != {r["events"][0] for r in lag[n_clients]}:
        raise RuntimeError("a client of the many got another count of events than the one")
    lag_ratio = median(
        [
            float(m["p99_lag"]) / max(float(o["p99_lag"]), 1e-4)
            for o, m in zip(lag[1], lag[n_clients], strict=True)
        ]
    )
    rss_ratio = median([m / o for o, m in zip(rss[1], rss[n_clients], strict=True)])
    one_p99 = median([float(r["p99_lag"]) for r in lag[1]])
    many_p99 = median([float(r["p99_lag"]) for r in lag[n_clients]])
    ms = 1000.0
    rows = [
        row(
            "a failer run, a library call: to its answer",
            median([b[1] for b in lib]) * ms,
            "ms",
            baseline=True,
        ),
        row(
            "a failer run through the API: to its answer",
            median([a[1] for a in api]) * ms,
            "ms",
            ratio=ends,
            note=f"to its run_started event {starts:.2f}× the library's",
        ),
        row("event lag p99, 1 client", one_p99 * ms, "ms", baseline=True),
        row(
            f"event lag p99, {n_clients} clients",
            many_p99 * ms,
            "ms",
            ratio=lag_ratio,
        ),
        row("server RSS, 1 client", median(rss[1]) / 2**20, "MiB", baseline=True),
        row(
            f"server RSS, {n_clients} clients",
            median(rss[n_clients]) / 2**20,
            "MiB",
            ratio=rss_ratio,
        ),
    ]
    return {
        "aim": aim,
        "aim_met": ends <= AIM_RUN and lag_ratio <= AIM_LAG and rss_ratio <= AIM_RSS,
        "aims": [
            aim_row(
                "serve: a run through the API vs a library call",
                ends,
                AIM_RUN,
                note=f"median of {pairs} interleaved pairs",
            ),
            aim_row(
                f"serve: p99 event lag, {n_clients} clients vs 1",
                lag_ratio,
                AIM_LAG,
                note=f"{runs} runs' events, every client got every one; the median of "
                f"{len(lag[1])} rounds (1 client, then {n_clients})",
            ),
            aim_row(f"serve: server RSS, {n_clients} clients vs 1", rss_ratio, AIM_RSS),
        ],
        "summary": f"API run {ends:.2f}× a library call; p99 lag {lag_ratio:.2f}× with "
        f"{n_clients} clients; RSS {rss_ratio:.2f}×",
        "rows": rows,
        "ratio_label": "×",
        "notes": [
            "The server (`genesis serve`, its defaults: transcripts, run log, ledger) runs in "
            "a process of its own; the library side records transcripts and the run log too. "
            "Each API run is `POST /runs`, then its event stream read until its end; each "
            'library run is a fresh `CodingGenesisAgent("failer").run_sync()`. The lag '
            "clients are raw HTTP connections in another process (tests/serve/load_client.py); "
            "each stamps its bytes as its socket is read and parses them after the runs, so "
            "that the time that process spends on the other 199 streams is not counted as "
            "this one's lag (one client and 200 are measured the same way)."
        ],
    }
