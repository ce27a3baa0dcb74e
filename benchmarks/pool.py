"""Figure 9: warm session pools, on the REAL claude and codex CLIs against the
fake model server.

Two comparisons per CLI, each a ratio against a baseline measured in the same
run, interleaved with it:

* a prompt's first event from a warm pool (``pool.run_result()``: a warm
  session taken, one turn, released) against a fresh ``run()`` of the same
  prompt: the CLI's start-up is what the pool saves;
* a batch of prompts, ``run_many(pool=...)`` against ``run_many()``'s fresh
  runs, at the same concurrency as the pool's size (the pool warmed before
  the prompts arrive, as it would be in a service).

The fake model server (``tests/fakes/model_server.py``) runs in a process of
its own, so its threads never compete with the measured event loop for the
GIL.  A CLI that is not installed is skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sessions import fake_server, hermetic
from .stats import median, paired_ratio, percentile

__all__ = ["fig_pool"]

Params = dict[str, Any]
Result = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "SCENARIO:text the same answer"
ANSWER = "the same answer"
#: Kinds of event decoded from the CLI (not the run's own: state, run_started).
CLI_KINDS = frozenset(
    {"session", "text", "tool_call", "tool_result", "usage", "result", "error", "cli_retry"}
)


@dataclass
class Rig:
    backend: str
    cli: str
    env: dict[str, str]
    work: Path


class FirstEvent:
    """A bus subscriber: when the first event decoded from the CLI arrived."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, event: Any) -> None:
        if self.at is None and event.kind.value in CLI_KINDS:
            self.at = time.perf_counter()


def _settings(rig: Rig) -> dict[str, Any]:
    return {"cli_path": rig.cli, "cwd": rig.work, "env": rig.env, "timeout": 60.0}


def _check(result: Any) -> None:
    if result.status != 0 or result.message != ANSWER:
        raise RuntimeError(
            f"the turn failed: status={result.status} error={result.error} "
            f"message={result.message[:300]!r}"
        )


async def _first_event(rig: Rig, n: int) -> dict[str, list[float]]:
    """``n`` interleaved pairs: a fresh ``run()``, a prompt from a warm pool."""
    from coding_genesis import CodingGenesisAgent, SessionPool

    fresh = CodingGenesisAgent(rig.backend, **_settings(rig))
    stamp = FirstEvent()
    fresh.subscribe(stamp)
    out: dict[str, list[float]] = {"pool": [], "run": [], "pool_wall": [], "run_wall": []}
    async with SessionPool(rig.backend, size=2, max_idle=600, **_settings(rig)) as pool:

        async def from_pool() -> Any:
            if not await pool.wait_warm(timeout=60):  # untimed: a warm pool is the premise
                raise RuntimeError(f"the pool did not warm up: {pool.stats()}")
            stamp.at = None
            started = time.perf_counter()
            result = await pool.run_result(PROMPT, on_event=stamp)
            return started, result

        async def from_run() -> Any:
            stamp.at = None
            started = time.perf_counter()
            return started, await fresh.run_result(PROMPT)

        variants = {"pool": from_pool, "run": from_run}
        for call in variants.values():  # warm-up: the caches, the first spawn
            _check((await call())[1])
        for rep in range(n):
            names = list(variants) if rep % 2 == 0 else list(variants)[::-1]
            for name in names:
                started, result = await variants[name]()
                ended = time.perf_counter()
                _check(result)
                if stamp.at is None:
                    raise RuntimeError(f"{name}: no event from the CLI")
                out[name].append(stamp.at - started)
                out[f"{name}_wall"].append(ended - started)
        if pool.stats().fresh:
            raise RuntimeError(f"a prompt was not served warm: {pool.stats()}")
    return out


async def _batch(rig: Rig, prompts: int, reps: int) -> dict[str, list[float]]:
    """``reps`` interleaved pairs: ``run_many`` of ``prompts`` prompts, fresh
    runs against a warm pool of 2 (concurrency 2 both)."""
    from coding_genesis import RunSpec, SessionPool, run_many

    specs = [RunSpec(prompt=PROMPT, backend=rig.backend, **_settings(rig)) for _ in range(prompts)]

    async def fresh() -> float:
        started = time.perf_counter()
        results = await run_many(specs, concurrency=2)
        took = time.perf_counter() - started
        _answered(results)
        return took

    async def pooled() -> float:
        async with SessionPool(rig.backend, size=2, max_idle=600, **_settings(rig)) as pool:
            if not await pool.wait_warm(timeout=60):
                raise RuntimeError(f"the pool did not warm up: {pool.stats()}")
            started = time.perf_counter()
            results = await run_many(specs, concurrency=2, pool=pool)
            took = time.perf_counter() - started
        _answered(results)
        return took

    out: dict[str, list[float]] = {"pool": [], "run": []}
    sides = {"pool": pooled, "run": fresh}
    for rep in range(reps):
        names = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for name in names:
            out[name].append(await sides[name]())
    return out


def _answered(results: list[dict[str, Any]]) -> None:
    bad = [r for r in results if r["status"] != 0 or r["message"] != ANSWER]
    if bad:
        raise RuntimeError(f"{len(bad)} prompt(s) of the batch failed: {bad[0]['message'][:300]!r}")


def _ms(values: list[float]) -> float:
    return median(values) * 1000


def _p90(values: list[float]) -> float:
    return percentile(values, 90) * 1000


def _rigs(url: str, work: Path) -> list[Rig]:
    from tests.fakes.real_cli import (
        claude_env,
        codex_env,
        find_claude,
        find_codex,
        write_codex_home,
    )

    rigs = []
    claude = find_claude()
    if claude is not None:
        env = claude_env(url, work / "claude-home", base_env={})
        rigs.append(Rig("claude", claude, env, work / "claude"))
    codex = find_codex()
    if codex is not None:
        env = codex_env(write_codex_home(work / "codex-home", url), base_env={})
        rigs.append(Rig("codex", codex, env, work / "codex"))
    for rig in rigs:
        rig.work.mkdir(parents=True, exist_ok=True)
    return rigs


def fig_pool(p: Params) -> Result:
    import anyio

    from .figures import aim_row, row

    aim = "a prompt's first event from a warm pool ≤ 0.15× a fresh run()'s"
    hermetic()
    work = Path(p["workdir"]) / "pool"
    with fake_server() as url:
        rigs = _rigs(url, work)
        if not rigs:
            return {"aim": aim, "aim_met": None, "skipped": "neither claude nor codex is installed"}
        measured = {}
        for rig in rigs:

            async def measure(rig: Rig = rig) -> dict[str, Any]:
                return {
                    "first": await _first_event(rig, p["pool_first"]),
                    "batch": await _batch(rig, p["pool_batch"], p["pool_batch_reps"]),
                }

            measured[rig.backend] = anyio.run(measure)

    rows, aims, summary, met = [], [], [], []
    for backend, m in measured.items():
        first, batch = m["first"], m["batch"]
        n = len(first["pool"])
        ratio = paired_ratio(first["pool"], first["run"])
        p90_ratio = _p90(first["pool"]) / _p90(first["run"])
        batch_ratio = paired_ratio(batch["pool"], batch["run"])
        rows += [
            row(
                f"{backend}: a fresh `run()`: the call → its first event from the CLI",
                _ms(first["run"]),
                "ms",
                baseline=True,
                note=f"p90 {_p90(first['run']):.0f} ms; whole run {_ms(first['run_wall']):.0f} ms",
            ),
            row(
                f"{backend}: `pool.run_result()` from a warm pool: the call → its first event",
                _ms(first["pool"]),
                "ms",
                ratio=ratio,
                note=f"p90 {_p90(first['pool']):.0f} ms ({p90_ratio:.2f}× the run's p90); "
                f"whole call {_ms(first['pool_wall']):.0f} ms",
            ),
            row(
                f"{backend}: `run_many()` of {p['pool_batch']} prompts, concurrency 2, fresh runs",
                median(batch["run"]),
                "s",
                baseline=True,
            ),
            row(
                f"{backend}: the same batch with `pool=` a warm pool of 2",
                median(batch["pool"]),
                "s",
                ratio=batch_ratio,
            ),
        ]
        aims.append(
            aim_row(
                f"pool ({backend}): a prompt's first event vs a fresh run's",
                ratio,
                0.15,
                note=f"median of {n} interleaved pairs; p90 {p90_ratio:.2f}×; "
                f"a batch {batch_ratio:.2f}×",
            )
        )
        met.append(ratio <= 0.15)
        summary.append(f"{backend}: first event {ratio:.2f}×, a batch {batch_ratio:.2f}×")
    notes = [
        "Real CLIs against the fake model server (`tests/fakes/model_server.py`, in a process "
        "of its own), `SCENARIO:text` prompts, each answer checked. First event: the first "
        "event decoded from the CLI's stdout (claude's `system/init`, codex's thread event), "
        f"timed from the call; {p['pool_first']} interleaved pairs after one warm-up of each; "
        "the pool is waited on (untimed) until warm before each of its prompts, and none was "
        "served by a fresh session. The ratio is the median of the per-pair ratios. "
        "A warm session's first turn still pays the CLI's own first-prompt work (claude "
        "reads its settings, skills and project memory at the first prompt: ~50-250 ms on "
        "this machine, against ~20-30 ms for its later turns).",
        f"Batches: {p['pool_batch_reps']} interleaved pairs; the pool is opened and warmed "
        "before the batch's clock starts, and refills in the background while it runs. With a "
        "pool as large as the concurrency, each prompt past the first two waits for a refill "
        "(a start-up, overlapped only with the other slot's turn): a batch saves less than a "
        "prompt arriving at a warm pool does.",
    ]
    return {
        "aim": aim,
        "aim_met": all(met),
        "aims": aims,
        "summary": "; ".join(summary),
        "rows": rows,
        "ratio_label": "×",
        "notes": notes,
    }
