"""The eight figures.  Each runs in its own worker process (``benchmarks.worker``)
and returns a JSON-ready dict: rows of medians, ratios against a baseline
measured in the same process, interleaved with it, and whether the aim is met.

Heavy imports stay inside the functions, so a worker only loads what its
figure needs (that matters for the memory figure).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stats import (
    Timing,
    median,
    paired_ratio,
    peak_rss_mib,
    percentile,
    reset_peak_rss,
    rss_mib,
    timed,
)

__all__ = ["FIGURES", "PROBES"]

HERE = Path(__file__).parent
FAKE_SOURCE = HERE / "fakecli.py"
MIB = 1024 * 1024
PROMPT = "benchmark: stream the recorded session"
CLI_ARGS = ["-p", "--output-format", "stream-json", "--verbose"]

Params = dict[str, Any]
Result = dict[str, Any]


# -- helpers ---------------------------------------------------------------


def launcher(workdir: Path) -> str:
    """The fake CLI as one executable file run by this interpreter, so our
    runner, the bare baseline and claude-agent-sdk all start the same program."""
    path = workdir / "fake-claude"
    if not path.exists():
        # -S: the fake needs only the standard library, so it starts faster.
        path.write_text(f"#!{sys.executable} -S\n" + FAKE_SOURCE.read_text())
        path.chmod(0o755)
    return str(path)


def stream_bytes(p: Params) -> bytes:
    s = p["stream"]
    return b"".join(Path(s[k]).read_bytes() for k in ("head", "body", "tail"))


def stream_files(p: Params, body_repeat: int = 1) -> str:
    s = p["stream"]
    return f"{s['head']}\n{s['body']}*{body_repeat}\n{s['tail']}"


def row(
    what: str,
    value: float,
    unit: str,
    *,
    ratio: float | None = None,
    baseline: bool = False,
    note: str = "",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "what": what,
        "value": value,
        "unit": unit,
        "ratio": ratio,
        "baseline": baseline,
        "note": note,
        **extra,
    }


def aim_row(
    figure: str, value: float, aim: float, *, higher: bool = False, note: str = ""
) -> dict[str, Any]:
    """One row of tracker issue 15's aims table: a ratio, its aim, met or not."""
    sign = "≥" if higher else "≤"
    met = value >= aim if higher else value <= aim
    return {
        "figure": figure,
        "value": f"{value:.2f}×",
        "aim": f"{sign} {aim:g}×",
        "met": bool(met) if math.isfinite(value) else None,
        "note": note,
    }


def interleave(reps: int, variants: dict[str, Callable[[], Any]]) -> dict[str, list[Timing]]:
    """Run every variant once per repetition, rotating the order, so drift and
    noise on the shared machine spread evenly over all of them."""
    names = list(variants)
    out: dict[str, list[Timing]] = {n: [] for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(timed(variants[name]))
            drop_transcripts()  # untimed: keep the scratch directory small
    return out


def transcript_dir(workdir: Path) -> str:
    """Where the runs that ask for a transcript (``transcripts=DIR``: the library
    writes none by default) write it: the runs directory of the orchestrator's
    scratch state home, which is also `genesis run`'s default."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else workdir / "state"
    return str(base / "coding-genesis" / "runs")


def drop_transcripts() -> None:
    """Delete the run directories the runs wrote (see :func:`transcript_dir`;
    the orchestrator points them into its scratch directory)."""
    state = os.environ.get("XDG_STATE_HOME")
    if state and os.environ.get("GENESIS_BENCH_SCRATCH") == "1":
        shutil.rmtree(Path(state) / "coding-genesis" / "runs", ignore_errors=True)


def walls(ts: list[Timing]) -> list[float]:
    return [t.wall for t in ts]


def cpus(ts: list[Timing]) -> list[float]:
    return [t.cpu for t in ts]


def _agent(cli: str | list[str], env: dict[str, str], **kw: Any) -> Any:
    from coding_genesis import CodingGenesisAgent

    kw.setdefault("timeout", 600.0)
    return CodingGenesisAgent("claude", cli_path=cli, env=env, **kw)


def _check_run(result: dict[str, Any], lines: int) -> None:
    if result["status"] != 0 or result["lines"] != lines or result["skipped_lines"]:
        raise RuntimeError(
            f"runner did not read the stream: status={result['status']} "
            f"lines={result['lines']}/{lines} skipped={result['skipped_lines']} "
            f"message={result['message'][:300]!r}"
        )


# -- 1. parser vs the limit -------------------------------------------------


def fig_parser(p: Params) -> Result:
    import orjson

    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally
    from coding_genesis._util.parser import JsonLinesParser
    from coding_genesis.backends.claude import ClaudeTranslator

    data = stream_bytes(p)
    chunks = [data[i : i + MIB] for i in range(0, len(data), MIB)]
    lines = p["stream"]["lines"]
    loads = orjson.loads

    def bare() -> int:
        n = 0
        for line in data.splitlines():
            loads(line)
            n += 1
        return n

    def bare_hot() -> int:
        translate = ClaudeTranslator().translate
        add = RunTally("/tmp").add
        n = 0
        for line in data.splitlines():
            for event in translate(loads(line)):
                add(event)
            n += 1
        return n

    def parse() -> int:
        parser = JsonLinesParser()
        if hasattr(parser, "feed_each"):
            n = 0

            def count(obj: dict[str, Any]) -> None:
                nonlocal n
                n += 1

            for chunk in chunks:
                parser.feed_each(chunk, count)
        else:
            for chunk in chunks:
                parser.feed(chunk)
        parser.close()
        return int(parser.lines)

    def hot() -> int:
        # The one decoding pipeline that live runs and replay use.
        decoder = Decoder(ClaudeTranslator(), RunTally("/tmp"))
        feed = decoder.feed
        for chunk in chunks:
            feed(chunk)
        feed(b"")
        return decoder.lines

    for fn in (bare, parse, hot):  # warm up, and check every variant sees every line
        if fn() != lines:
            raise RuntimeError(f"{fn.__name__} did not see all {lines} lines")
    res = interleave(p["reps"], {"bare": bare, "parser": parse, "hot": hot, "bare_hot": bare_hot})
    base = cpus(res["bare"])
    mib = len(data) / MIB

    def r(name: str) -> float:
        return paired_ratio(cpus(res[name]), base)

    def rate(name: str) -> str:
        return f"{mib / median(cpus(res[name])):.0f} MiB/s, {lines / median(cpus(res[name])) / 1000:.0f}k lines/s"

    parser_ratio = r("parser")
    return {
        "aim": "JsonLinesParser ≤ 1.25× the bare loop",
        "aim_met": parser_ratio <= 1.25,
        "summary": f"parser {parser_ratio:.2f}× bare; hot path {r('hot'):.2f}× bare "
        f"({paired_ratio(cpus(res['hot']), cpus(res['bare_hot'])):.2f}× bare+translator+tally)",
        "rows": [
            row(
                "bare: `orjson.loads` over `bytes.splitlines()`",
                median(base),
                "s CPU",
                baseline=True,
                note=rate("bare"),
            ),
            row(
                "`JsonLinesParser`, 1 MiB chunks",
                median(cpus(res["parser"])),
                "s CPU",
                ratio=parser_ratio,
                note=rate("parser"),
            ),
            row(
                "hot path: `Decoder` (parser + `ClaudeTranslator` + `RunTally`)",
                median(cpus(res["hot"])),
                "s CPU",
                ratio=r("hot"),
                note=rate("hot"),
            ),
            row(
                "bare loop + `ClaudeTranslator` + `RunTally` (the hot path's own limit)",
                median(cpus(res["bare_hot"])),
                "s CPU",
                ratio=r("bare_hot"),
                note=f"hot path / this = {paired_ratio(cpus(res['hot']), cpus(res['bare_hot'])):.2f}×",
            ),
        ],
        "notes": [
            f"{lines:,} lines, {mib:.0f} MiB in memory; CPU time of this process "
            f"(less sensitive than wall time to the other jobs on the machine); "
            f"{p['reps']} interleaved repetitions.",
        ],
    }


# -- 2. end to end vs the limit ---------------------------------------------


E2E_TRANSCRIPT = (
    "`CodingGenesisAgent('claude', transcripts=DIR).run()` (a transcript of every event "
    "and of stdout is written)"
)
E2E_LEAN = (
    "the same with `transcripts=False`, the library's default (supervised, parsed, "
    "translated, tallied)"
)
E2E_UNMETERED = "the same with `metering=False` (no usage, cost or latency figures)"
E2E_BUDGET = "the library's default with a `Budget` (limits never reached)"


def fig_e2e(p: Params) -> Result:
    import orjson

    workdir = Path(p["workdir"])
    cli = launcher(workdir)
    env = {"BENCH_FAKE_FILES": stream_files(p)}
    lines = p["stream"]["lines"]
    loads = orjson.loads
    transcripts = transcript_dir(workdir)

    def bare() -> int:
        proc = subprocess.Popen(
            [cli, *CLI_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
        )
        assert proc.stdout is not None
        n = 0
        with proc.stdout:
            for line in proc.stdout:
                loads(line)
                n += 1
        proc.wait()
        return n

    def bare_wide() -> int:
        """The best a bare reader can do: a 1 MiB pipe read 1 MiB at a time."""
        r, w = os.pipe()
        with contextlib.suppress(ImportError, AttributeError, OSError):
            import fcntl

            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, MIB)
        proc = subprocess.Popen(
            [cli, *CLI_ARGS], stdin=subprocess.DEVNULL, stdout=w, env={**os.environ, **env}
        )
        os.close(w)
        n = 0
        held = bytearray()
        try:
            while chunk := os.read(r, MIB):
                end = chunk.rfind(b"\n")
                if end < 0:
                    held += chunk
                    continue
                held += memoryview(chunk)[:end]
                for line in held.split(b"\n"):
                    loads(line)
                    n += 1
                held = bytearray(memoryview(chunk)[end + 1 :])
        finally:
            os.close(r)
        proc.wait()
        return n

    def runner() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=transcripts).run_sync(PROMPT)
        return result

    def runner_lean() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=False).run_sync(PROMPT)
        return result

    def runner_no_otel() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=False, telemetry=False).run_sync(
            PROMPT
        )
        return result

    def runner_unmetered() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=False, metering=False).run_sync(
            PROMPT
        )
        return result

    def runner_budget() -> dict[str, Any]:
        from coding_genesis.budget import Budget

        budget = Budget(max_cost_usd=1e9, max_tokens=10**15, max_tool_calls=10**9, per_run=True)
        result: dict[str, Any] = _agent(cli, env, transcripts=False, budget=budget).run_sync(PROMPT)
        return result

    if bare() != lines or bare_wide() != lines:
        raise RuntimeError("a bare baseline did not read the stream")
    _check_run(runner(), lines)
    drop_transcripts()
    res = interleave(
        p["reps"],
        {
            "bare": bare,
            "runner": runner,
            "lean": runner_lean,
            "no_otel": runner_no_otel,
            "unmetered": runner_unmetered,
            "budget": runner_budget,
            "bare_wide": bare_wide,
        },
    )
    for t in res["runner"] + res["lean"] + res["no_otel"] + res["unmetered"] + res["budget"]:
        _check_run(t.value, lines)
    # What an installed, unconfigured OpenTelemetry adds to the library's default run.
    otel = _otel_installed()
    otel_ratio = paired_ratio(walls(res["lean"]), walls(res["no_otel"]))
    metering = paired_ratio(walls(res["lean"]), walls(res["unmetered"]))
    # What a per-run budget adds to metering (the default run): reported, no aim.
    budgeted = paired_ratio(walls(res["budget"]), walls(res["lean"]))
    lean_ratio = paired_ratio(walls(res["lean"]), walls(res["bare"]))
    ratio = paired_ratio(walls(res["runner"]), walls(res["bare"]))
    cpu_ratio = paired_ratio(cpus(res["runner"]), cpus(res["bare"]))
    wide_ratio = paired_ratio(walls(res["runner"]), walls(res["bare_wide"]))
    mib = p["stream"]["size"] / MIB
    return {
        "aim": "library defaults ≤ 1.2×, with a transcript ≤ 1.35× the bare loop (wall)",
        "aim_met": lean_ratio <= 1.2 and ratio <= 1.35,
        "aims": [
            aim_row(
                "end to end, library defaults (no transcript), vs the bare loop", lean_ratio, 1.2
            ),
            aim_row(
                "end to end, with a transcript (what `genesis run` does), vs the bare loop",
                ratio,
                1.35,
            ),
        ],
        "summary": f"runner {ratio:.2f}× bare wall time writing a transcript "
        f"({cpu_ratio:.2f}× the CPU), {lean_ratio:.2f}× without (the library's default); "
        + (
            f"OpenTelemetry installed, not configured: {otel_ratio:.3f}× the run without "
            f"(aim < 1.05: {'met' if otel_ratio < 1.05 else 'missed'})"
            if otel
            else "OpenTelemetry not installed: no telemetry figure"
        )
        + f"; metering adds {100 * (metering - 1):+.1f} % (aim < 5 %), "
        f"a per-run budget {100 * (budgeted - 1):+.1f} % over metering",
        "rows": [
            row(
                "bare: `Popen` + `for line in proc.stdout: orjson.loads(line)`",
                median(walls(res["bare"])),
                "s",
                baseline=True,
                note=f"CPU {median(cpus(res['bare'])):.2f} s; {mib / median(walls(res['bare'])):.0f} MiB/s",
            ),
            row(
                E2E_TRANSCRIPT,
                median(walls(res["runner"])),
                "s",
                ratio=ratio,
                note=f"CPU {median(cpus(res['runner'])):.2f} s ({cpu_ratio:.2f}×); "
                f"{mib / median(walls(res['runner'])):.0f} MiB/s; "
                f"{wide_ratio:.2f}× the 1 MiB-pipe bare reader below",
            ),
            row(
                E2E_LEAN,
                median(walls(res["lean"])),
                "s",
                ratio=lean_ratio,
                note=f"CPU {median(cpus(res['lean'])):.2f} s "
                f"({paired_ratio(cpus(res['lean']), cpus(res['bare'])):.2f}×); "
                f"{mib / median(walls(res['lean'])):.0f} MiB/s; "
                f"{paired_ratio(walls(res['lean']), walls(res['bare_wide'])):.2f}× the 1 MiB-pipe "
                "bare reader",
            ),
            row(
                E2E_NO_OTEL,
                median(walls(res["no_otel"])),
                "s",
                ratio=paired_ratio(walls(res["no_otel"]), walls(res["bare"])),
                note=(
                    f"the row above (OpenTelemetry API {otel}, no SDK configured) is "
                    f"{otel_ratio:.3f}× this one (aim < 1.05); CPU "
                    f"{median(cpus(res['no_otel'])):.2f} s"
                    if otel
                    else "OpenTelemetry is not installed here: the row above is the same run"
                ),
            ),
            row(
                E2E_UNMETERED,
                median(walls(res["unmetered"])),
                "s",
                ratio=paired_ratio(walls(res["unmetered"]), walls(res["bare"])),
                note=f"metering's cost: the row above is {metering:.3f}× this one "
                f"({100 * (metering - 1):+.1f} %; aim < 5 %), CPU "
                f"{paired_ratio(cpus(res['lean']), cpus(res['unmetered'])):.3f}×",
            ),
            row(
                E2E_BUDGET,
                median(walls(res["budget"])),
                "s",
                ratio=paired_ratio(walls(res["budget"]), walls(res["bare"])),
                note=f"{budgeted:.3f}× the library's default, metering on "
                f"({100 * (budgeted - 1):+.1f} %), CPU "
                f"{paired_ratio(cpus(res['budget']), cpus(res['lean'])):.3f}×: a budget "
                "checked on every usage and tool-call event",
            ),
            row(
                "bare, best case: a 1 MiB pipe, `os.read` 1 MiB at a time, split, `orjson.loads`",
                median(walls(res["bare_wide"])),
                "s",
                ratio=paired_ratio(walls(res["bare_wide"]), walls(res["bare"])),
                note=f"CPU {median(cpus(res['bare_wide'])):.2f} s; "
                f"{mib / median(walls(res['bare_wide'])):.0f} MiB/s",
            ),
        ],
        "notes": [
            f"The fake CLI (`benchmarks/fakecli.py`) `sendfile`s {lines:,} lines ({mib:.0f} MiB) "
            f"to its stdout; every side starts the same program. {p['reps']} interleaved "
            "repetitions; CPU is this process's only (the fake's is the same on every side). "
            "The aim is against the first row, the plain `for line in proc.stdout` loop (8 KiB "
            "buffered reads from a 64 KiB pipe); the last row is the limit a reader can reach "
            "with the runner's own pipe settings. The environment holds an `ANTHROPIC_API_KEY` "
            "placeholder, as a claude user's does, so secret redaction is on.",
        ],
    }


E2E_NO_OTEL = (
    "the same with `telemetry=False` (as without OpenTelemetry installed): no spans, "
    "no `TRACEPARENT`"
)


def _otel_installed() -> str | None:
    """The installed OpenTelemetry API's version, or None."""
    from importlib import metadata

    try:
        return metadata.version("opentelemetry-api")
    except metadata.PackageNotFoundError:
        return None


# -- 3. against claude-agent-sdk --------------------------------------------


async def _sdk_count(cli: str, env: dict[str, str], max_buffer: int | None) -> tuple[int, str]:
    from claude_agent_sdk import ClaudeAgentOptions, query

    options = ClaudeAgentOptions(cli_path=cli, env=env, max_buffer_size=max_buffer)
    n = 0
    t0 = time.perf_counter()
    try:
        async for _message in query(prompt=PROMPT, options=options):
            n += 1
    except Exception as exc:  # noqa: BLE001  (the SDK under test may raise anything: the figure reports it)
        text = str(exc).splitlines()[0] if str(exc) else ""
        return n, f"raised {type(exc).__name__} after {time.perf_counter() - t0:.1f} s: {text[:80]}"
    return n, "ok"


def _sdk_version() -> str | None:
    try:
        from importlib import metadata

        return metadata.version("claude-agent-sdk")
    except Exception:  # noqa: BLE001  (the SDK under test may raise anything: the figure reports it)
        return None


SDK_EVENTS = "coding-genesis, a transcript + every event delivered to a subscriber"
SDK_TRANSCRIPT = (
    "coding-genesis, `transcripts=DIR` (events folded into the result, transcript written)"
)
SDK_LEAN = "coding-genesis, `transcripts=False` (the library's default)"


def fig_sdk(p: Params) -> Result:
    import logging

    import anyio

    # The SDK logs each failure of the correctness runs at ERROR; they are reported below.
    logging.getLogger("claude_agent_sdk").setLevel(logging.CRITICAL)

    version = _sdk_version()
    try:
        import claude_agent_sdk  # noqa: F401
    except ImportError as exc:
        return {
            "aim": "≥ 2× claude-agent-sdk's throughput",
            "aim_met": None,
            "skipped": f"claude-agent-sdk is not importable ({exc}); "
            "install it with `pip install -e '.[bench]'`",
        }
    from coding_genesis import Event

    workdir = Path(p["workdir"])
    cli = launcher(workdir)
    env = {"BENCH_FAKE_FILES": stream_files(p)}
    lines = p["stream"]["lines"]
    transcripts = transcript_dir(workdir)
    # Our default line limit; the SDK's default (1 MiB) stops at the first big tool result.
    big_buffer = 64 * MIB

    def sdk() -> int:
        n, outcome = anyio.run(_sdk_count, cli, env, big_buffer)
        if outcome != "ok" or n != lines:
            raise RuntimeError(f"claude-agent-sdk read {n}/{lines} messages: {outcome}")
        return n

    def ours_events() -> dict[str, Any]:
        agent = _agent(cli, env, transcripts=transcripts)
        seen = 0

        def on_event(event: Event) -> None:
            nonlocal seen
            seen += 1

        agent.subscribe(on_event)
        result: dict[str, Any] = agent.run_sync(PROMPT)
        result["events_delivered"] = seen
        return result

    def ours() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=transcripts).run_sync(PROMPT)
        return result

    def ours_lean() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, env, transcripts=False).run_sync(PROMPT)
        return result

    from . import data

    plain = data.generate(workdir / "plain", p["memory_plain_events"], seed=13).params()
    plain_env = {"BENCH_FAKE_FILES": stream_files({"stream": plain})}
    plain_lines = plain["lines"]

    def sdk_plain() -> int:
        n, outcome = anyio.run(_sdk_count, cli, plain_env, big_buffer)
        if outcome != "ok" or n != plain_lines:
            raise RuntimeError(f"claude-agent-sdk read {n}/{plain_lines} messages: {outcome}")
        return n

    def lean_plain() -> dict[str, Any]:
        result: dict[str, Any] = _agent(cli, plain_env, transcripts=False).run_sync(PROMPT)
        return result

    sdk()
    _check_run(ours_events(), lines)
    sdk_plain()
    _check_run(lean_plain(), plain_lines)
    drop_transcripts()
    res = interleave(
        p["reps"],
        {
            "sdk": sdk,
            "ours_events": ours_events,
            "ours": ours,
            "lean": ours_lean,
            "sdk_plain": sdk_plain,
            "lean_plain": lean_plain,
        },
    )
    for t in res["ours_events"] + res["ours"] + res["lean"]:
        _check_run(t.value, lines)
    for t in res["lean_plain"]:
        _check_run(t.value, plain_lines)
    delivered = res["ours_events"][0].value["events_delivered"]

    def mps(name: str) -> float:
        return float(lines / median(walls(res[name])))

    def speedup(name: str) -> float:
        # msg/s ratio = inverse wall-time ratio, per pair
        return 1.0 / paired_ratio(walls(res[name]), walls(res["sdk"]))

    def cpu_note(name: str) -> str:
        return f"CPU {median(cpus(res[name])):.2f} s ({paired_ratio(cpus(res[name]), cpus(res['sdk'])):.2f}× the SDK's)"

    rows = [
        row(
            f"claude-agent-sdk {version} `query()` (`max_buffer_size` 64 MiB)",
            mps("sdk"),
            "msg/s",
            baseline=True,
            note=f"CPU {median(cpus(res['sdk'])):.2f} s; wall {median(walls(res['sdk'])):.2f} s",
        ),
        row(
            SDK_EVENTS,
            mps("ours_events"),
            "msg/s",
            ratio=speedup("ours_events"),
            note=cpu_note("ours_events") + f"; {delivered:,} events delivered",
        ),
        row(
            SDK_TRANSCRIPT,
            mps("ours"),
            "msg/s",
            ratio=speedup("ours"),
            note=cpu_note("ours"),
        ),
        row(
            SDK_LEAN,
            mps("lean"),
            "msg/s",
            ratio=speedup("lean"),
            note=cpu_note("lean"),
        ),
    ]
    plain_speedup = 1.0 / paired_ratio(walls(res["lean_plain"]), walls(res["sdk_plain"]))
    rows += [
        row(
            f"claude-agent-sdk {version}, {plain_lines:,} ordinary events (0.4-3 KiB lines)",
            plain_lines / median(walls(res["sdk_plain"])),
            "msg/s",
            baseline=True,
            note=f"CPU {median(cpus(res['sdk_plain'])):.2f} s",
        ),
        row(
            f"{SDK_LEAN}, the same ordinary events",
            plain_lines / median(walls(res["lean_plain"])),
            "msg/s",
            ratio=plain_speedup,
            note=f"CPU {median(cpus(res['lean_plain'])):.2f} s "
            f"({paired_ratio(cpus(res['lean_plain']), cpus(res['sdk_plain'])):.2f}× the SDK's)",
        ),
    ]
    correctness = _sdk_correctness(workdir, cli)
    return {
        "aim": "≥ 4× claude-agent-sdk's throughput with the defaults, on ordinary events",
        "aim_met": plain_speedup >= 4.0,
        "aims": [
            aim_row(
                "vs claude-agent-sdk throughput, defaults, ordinary events",
                plain_speedup,
                4.0,
                higher=True,
                note=f"the big-lines stream: {speedup('lean'):.2f}×",
            )
        ],
        "summary": f"{plain_speedup:.1f}× the SDK's msg/s with the library's defaults on "
        f"ordinary events; on the big-lines stream {speedup('ours'):.1f}× writing a transcript, "
        f"{speedup('ours_events'):.1f}× with a subscriber too, {speedup('lean'):.1f}× with "
        "the library's defaults (no transcript)",
        "rows": rows,
        "ratio_label": "× SDK msg/s",
        "correctness": correctness,
        "notes": [
            f"Same fake CLI and stream ({lines:,} lines); the fake answers the SDK's "
            "`initialize` control request, then streams. Ratios are msg/s ÷ the SDK's msg/s "
            f"(higher is better), medians of {p['reps']} interleaved repetitions; CPU is this "
            "process's only.",
        ],
    }


def _sdk_correctness(workdir: Path, cli: str) -> list[dict[str, Any]]:
    """One bad line among 1,000 good ones: what does each side deliver?"""
    import anyio

    from . import data

    gen = data.generate(workdir / "correct", 1000, seed=3)
    body = gen.body.read_bytes().splitlines(keepends=True)
    cases = {
        "a valid 2 MiB line (a big tool result)": (data.line_with("big", 2 * MIB), 1),
        "one invalid UTF-8 byte in a line": (data.line_with("invalid_utf8"), 0),
        "a broken line: `{` cut short": (data.line_with("broken"), 0),
    }
    envs = []
    for i, (bad, _) in enumerate(cases.values()):
        path = workdir / f"correct-{i}.jsonl"
        path.write_bytes(
            gen.head.read_bytes()
            + b"".join(body[:500])
            + bad
            + b"".join(body[500:])
            + gen.tail.read_bytes()
        )
        envs.append({"BENCH_FAKE_FILES": str(path)})

    async def sdk_all() -> dict[int, tuple[int, str]]:
        # Concurrently: after a failure the SDK waits 5 s for the CLI (blocked on a
        # full pipe) before it terminates it.
        got: dict[int, tuple[int, str]] = {}

        async def one(i: int) -> None:
            got[i] = await _sdk_count(cli, envs[i], None)

        async with anyio.create_task_group() as tg:
            for i in range(len(envs)):
                tg.start_soon(one, i)
        gc.collect()  # the SDK leaves its transport to the collector: let it close in this loop
        await anyio.sleep(0.05)
        return got

    sdk = anyio.run(sdk_all)
    out = []
    for i, (label, (_, extra_valid)) in enumerate(cases.items()):
        t0 = time.perf_counter()
        result = _agent(cli, envs[i]).run_sync(PROMPT)
        took = time.perf_counter() - t0
        n_sdk, sdk_outcome = sdk[i]
        out.append(
            {
                "input": label,
                "valid_lines": gen.lines + extra_valid,
                "sdk_messages": n_sdk,
                "sdk_outcome": sdk_outcome,
                "ours_messages": result["lines"] - result["skipped_lines"],
                "ours_outcome": f"status {result['status']} after {took:.1f} s, "
                f"{result['skipped_lines']} line(s) skipped",
            }
        )
    return out


# -- 4. stop precision --------------------------------------------------------


def _pids(path: Path) -> tuple[float, list[int]]:
    """The fake's readiness time and the pids of its tree (see fakecli.py)."""
    for _ in range(400):
        with contextlib.suppress(OSError, ValueError):
            text = path.read_text()
            if text.endswith("\n"):
                first, *pids = text.split()
                return float(first), [int(x) for x in pids]
        time.sleep(0.005)
    return math.inf, []


def _gone(pid: int) -> bool:
    """Not running and not a zombie: reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2
    for pid in pids:
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if _gone(pid):
                break
            time.sleep(0.005)


def fig_stop(p: Params) -> Result:
    import anyio

    workdir = Path(p["workdir"])
    cli = launcher(workdir)
    timeout = p["stop_timeout"]
    grace = p["stop_grace"]
    pidfile = workdir / "stop.pids"
    ignore = "hang-ignore-term"

    def env(mode: str) -> dict[str, str]:
        return {
            "BENCH_FAKE_MODE": mode,
            "BENCH_FAKE_CHILD": "1",
            "BENCH_FAKE_PIDFILE": str(pidfile),
        }

    def expected(mode: str) -> float:
        return float(timeout + (grace if mode == ignore else 0.0))

    async def runner(mode: str) -> tuple[float | None, bool]:
        """Overshoot (None: the fake was not set up by the deadline), tree reaped."""
        pidfile.unlink(missing_ok=True)
        agent = _agent(cli, env(mode), timeout=timeout, grace=grace)
        t0 = time.perf_counter()
        wall0 = time.time()
        result = await agent.run(PROMPT)
        elapsed = time.perf_counter() - t0
        ready, pids = _pids(pidfile)
        reaped = bool(pids) and all(_gone(pid) for pid in pids)
        _cleanup(pids)
        if result["status"] != 124:
            raise RuntimeError(f"expected a timeout, got {result['status']}: {result['message']}")
        killed = "SIGKILL" in result["signals_sent"]
        if ready > wall0 + timeout or killed != (mode == ignore):
            return None, reaped
        return elapsed - expected(mode), reaped

    async def bare(mode: str) -> float | None:
        pidfile.unlink(missing_ok=True)
        t0 = time.perf_counter()
        wall0 = time.time()
        proc = await anyio.open_process(
            [cli, *CLI_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env(mode)},
            start_new_session=True,
        )
        async with proc:
            with anyio.move_on_after(timeout):
                await proc.wait()
            os.killpg(proc.pid, signal.SIGTERM)
            with anyio.move_on_after(grace):
                await proc.wait()
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        over = time.perf_counter() - t0 - expected(mode)
        ready, pids = _pids(pidfile)
        _cleanup(pids)
        killed = proc.returncode == -signal.SIGKILL
        if ready > wall0 + timeout or killed != (mode == ignore):
            return None
        return over

    async def measure(mode: str) -> dict[str, Any]:
        await runner(mode)  # warm-up
        n, nb = p["stop_samples"], p["stop_bare_samples"]
        samples: list[float] = []
        base: list[float] = []
        reaped = invalid = 0
        for i in range(n):
            over, ok = await runner(mode)
            reaped += ok
            if over is None:
                invalid += 1
            else:
                samples.append(over * 1000)
            if i % max(1, n // nb) == 0 and len(base) < nb:
                b = await bare(mode)
                if b is not None:
                    base.append(b * 1000)
        return {"samples": samples, "base": base, "reaped": reaped, "n": n, "invalid": invalid}

    async def main() -> dict[str, dict[str, Any]]:
        return {mode: await measure(mode) for mode in ("hang", ignore)}

    measured = anyio.run(main)
    rows = []
    met = True
    summary = []
    aims = []
    for mode, label in (("hang", "cooperative CLI"), (ignore, "CLI ignoring SIGTERM")):
        m = measured[mode]
        ms, bms = m["samples"], m["base"]
        p99 = percentile(ms, 99)
        base_p99 = percentile(bms, 99)
        p99_ratio = p99 / base_p99 if base_p99 > 0 else math.inf
        met = met and p99_ratio <= 2.5 and m["reaped"] == m["n"]
        aims.append(
            aim_row(
                f"stop precision p99 (deadline → tree reaped) vs bare `killpg` + `wait` p99, {label}",
                p99_ratio,
                2.5,
                note=f"p99 {p99:.1f} ms vs {base_p99:.1f} ms",
            )
        )
        summary.append(
            f"{label}: median {median(ms):.1f} ms, p99 {p99:.1f} ms ({p99_ratio:.1f}× bare p99)"
        )
        rows.append(
            row(
                f"bare anyio, {label}: `move_on_after` → `killpg` (→ SIGKILL after grace) → `wait()`",
                median(bms),
                "ms",
                baseline=True,
                note=f"p99 {percentile(bms, 99):.1f} ms, max {max(bms, default=math.nan):.1f} ms "
                f"({len(bms)} samples); waits for the main process only",
            )
        )
        rows.append(
            row(
                f"coding-genesis, {label}: deadline → whole tree reaped → result dict",
                median(ms),
                "ms",
                ratio=median(ms) / median(bms) if bms and median(bms) > 0 else None,
                note=f"**p99 {p99:.1f} ms**, max {max(ms, default=math.nan):.1f} ms "
                f"({len(ms)} samples); tree (CLI + child) reaped at return in "
                f"{m['reaped']}/{m['n']}"
                + (
                    f"; {m['invalid']} sample(s) dropped: fake not set up by the deadline"
                    if m["invalid"]
                    else ""
                ),
                p99=p99,
            )
        )
    return {
        "aim": "p99 ≤ 2.5× the bare `killpg` + `wait` p99, whole tree reaped",
        "aim_met": met,
        "aims": aims,
        "summary": "; ".join(summary),
        "rows": rows,
        "notes": [
            f"Overshoot = time from `await agent.run()` to its result, minus the timeout "
            f"({timeout * 1000:.0f} ms), minus the grace ({grace * 1000:.0f} ms) for the CLI "
            "that ignores SIGTERM; all samples in one event loop. It counts spawning, validation "
            "and building the result, so it bounds the stop latency from above. The fake CLI "
            "forks a child (a process tree); 'reaped' means neither process exists any more, not "
            "even as a zombie. Ratio = median ÷ the bare median.",
        ],
    }


# -- 5. concurrency -----------------------------------------------------------


def _raise_nofile() -> None:
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _short_cli(workdir: Path) -> tuple[str, int]:
    recording = HERE / "templates" / "claude_bash_allowed.jsonl"
    script = workdir / "fake-short"
    if not script.exists():
        # Reads its prompt (stdin) to the end, then prints a real 5-line session.
        script.write_text(f'#!/bin/sh\nwhile read -r _; do :; done\nexec cat "{recording}"\n')
        script.chmod(0o755)
    return str(script), len([x for x in recording.read_bytes().splitlines() if x.strip()])


def _no_pdeath_backend() -> Any:
    """claude's backend without the parent-death signal: what that signal costs."""
    from coding_genesis.backends import get_backend

    base = type(get_backend("claude"))
    return type("NoParentDeathSignal", (base,), {"pdeath_signal": None})()


def _batch(which: str, script: str, expected: int, n: int) -> int:
    """``n`` concurrent runs in one event loop; how many succeeded."""
    import anyio
    import orjson

    ok = 0

    async def bare_one() -> None:
        nonlocal ok
        done = await anyio.run_process([script, *CLI_ARGS], input=PROMPT.encode())
        objs = [orjson.loads(line) for line in done.stdout.splitlines() if line.strip()]
        ok += done.returncode == 0 and len(objs) == expected

    async def runner_one() -> None:
        nonlocal ok
        result = await _agent(script, {}, timeout=60.0).run(PROMPT)
        ok += result["status"] == 0 and result["lines"] == expected

    async def runner_no_pdeath_one() -> None:
        nonlocal ok
        from coding_genesis import CodingGenesisAgent

        agent = CodingGenesisAgent(_no_pdeath_backend(), cli_path=script, timeout=60.0)
        result = await agent.run(PROMPT)
        ok += result["status"] == 0 and result["lines"] == expected

    async def batch() -> None:
        one = {"bare": bare_one, "runner": runner_one, "no_pdeath": runner_no_pdeath_one}[which]
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)

    anyio.run(batch)
    return ok


def probe_concurrency_rss(p: Params) -> Result:
    """In a fresh process: RSS growth during one batch of concurrent runs."""
    _raise_nofile()
    script, expected = _short_cli(Path(p["workdir"]))
    _batch(p["which"], script, expected, 1)  # imports and first-use caches
    gc.collect()
    before = rss_mib()
    if not reset_peak_rss():
        return {"per_run_kib": math.nan}
    ok = _batch(p["which"], script, expected, p["concurrent"])
    return {"per_run_kib": (peak_rss_mib() - before) * 1024 / p["concurrent"], "ok": ok}


def fig_concurrency(p: Params) -> Result:
    _raise_nofile()
    script, expected = _short_cli(Path(p["workdir"]))
    n = p["concurrent"]

    def bare() -> int:
        return _batch("bare", script, expected, n)

    def runner() -> int:
        return _batch("runner", script, expected, n)

    def no_pdeath() -> int:
        return _batch("no_pdeath", script, expected, n)

    runner()
    bare()
    res = interleave(p["reps"], {"bare": bare, "runner": runner, "no_pdeath": no_pdeath})
    wn, cn = median(walls(res["no_pdeath"])), median(cpus(res["no_pdeath"]))
    for name in ("bare", "runner", "no_pdeath"):
        for t in res[name]:
            if t.value != n:
                raise RuntimeError(f"{name}: only {t.value}/{n} runs succeeded")
    peaks = {
        which: median(
            [
                _run_probe("probe_concurrency_rss", {**p, "which": which})["per_run_kib"]
                for _ in range(p["memory_reps"])
            ]
        )
        for which in ("bare", "runner")
    }
    wb, wr = median(walls(res["bare"])), median(walls(res["runner"]))
    cb, cr = median(cpus(res["bare"])), median(cpus(res["runner"]))
    ratio = paired_ratio(walls(res["runner"]), walls(res["bare"]))
    cpu_ratio = paired_ratio(cpus(res["runner"]), cpus(res["bare"]))
    return {
        "aim": "batch time ≤ 1.5×, runner CPU per run ≤ 2× bare `anyio.run_process`'s",
        "aim_met": ratio <= 1.5 and cpu_ratio <= 2.0,
        "aims": [
            aim_row(
                f"{n} concurrent short runs, batch time vs bare `anyio.run_process`", ratio, 1.5
            ),
            aim_row(
                "runner CPU per short run vs bare `anyio.run_process`'s",
                cpu_ratio,
                2.0,
                note=f"+{(cr - cb) / n * 1000:.2f} ms per run",
            ),
        ],
        "summary": f"{n / wr:.0f} runs/s vs {n / wb:.0f} bare ({ratio:.2f}× the batch time); "
        f"+{(cr - cb) / n * 1000:.2f} ms CPU per run; {peaks['runner']:.0f} KiB peak RSS per run",
        "rows": [
            row(
                f"bare: {n} × `anyio.run_process` of the same command, one event loop",
                n / wb,
                "runs/s",
                baseline=True,
                note=f"batch {wb:.2f} s; CPU {cb / n * 1000:.2f} ms/run; peak RSS +{peaks['bare']:.0f} KiB/run",
            ),
            row(
                f"coding-genesis: {n} concurrent `CodingGenesisAgent.run()`",
                n / wr,
                "runs/s",
                ratio=ratio,
                note=f"batch {wr:.2f} s; CPU {cr / n * 1000:.2f} ms/run "
                f"(overhead +{(cr - cb) / n * 1000:.2f} ms CPU, +{(wr - wb) / n * 1000:.2f} ms wall per run); "
                f"peak RSS +{peaks['runner']:.0f} KiB/run",
                overhead_ms=(cr - cb) / n * 1000,
                rss_kib=peaks["runner"],
            ),
            row(
                "the same without the parent-death signal (`pdeath_signal=None`: "
                "`vfork` instead of `fork` + `prctl`)",
                n / wn,
                "runs/s",
                ratio=paired_ratio(walls(res["no_pdeath"]), walls(res["bare"])),
                note=f"batch {wn:.2f} s; CPU {cn / n * 1000:.2f} ms/run: the signal costs "
                f"{(cr - cn) / n * 1000:+.2f} ms CPU, {(wr - wn) / n * 1000:+.2f} ms wall per run",
            ),
        ],
        "ratio_label": "× bare batch time",
        "notes": [
            "The short CLI is an `sh` script that reads its prompt, then `exec cat`s a real "
            "5-line recording (a Bash tool call), so the runner's own cost shows rather than "
            "Python's start-up. Ratio = batch wall time ÷ bare batch wall time (lower is "
            f"better); {p['reps']} interleaved repetitions. Peak RSS per run = (peak RSS during "
            "one batch − RSS before it) ÷ runs, each in a fresh process after one warm-up run.",
        ],
    }


# -- 6. memory ----------------------------------------------------------------


def probe_memory(p: Params) -> Result:
    """In a fresh process: stream ``size`` bytes through the runner (or the bare
    loop); report peak RSS.  Runs as its own worker so nothing else counts."""
    which = p["which"]
    if which in ("fat", "thin"):
        return _probe_fat(p)
    repeat = p["body_repeat"]
    env = {"BENCH_FAKE_FILES": stream_files(p, repeat)}
    workdir = Path(p["workdir"])
    cli = launcher(workdir)
    lines = p["stream"]["lines"] + p["stream"]["body_lines"] * (repeat - 1)
    if which == "bare":
        import orjson

        idle = rss_mib()
        proc = subprocess.Popen(
            [cli, *CLI_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
        )
        assert proc.stdout is not None
        n = 0
        t0 = time.perf_counter()
        with proc.stdout:
            for line in proc.stdout:
                orjson.loads(line)
                n += 1
        proc.wait()
        wall = time.perf_counter() - t0
        if n != lines:
            raise RuntimeError(f"bare read {n}/{lines} lines")
    else:
        import coding_genesis.backends.claude  # noqa: F401  (imports coding_genesis too)

        idle = rss_mib()
        t0 = time.perf_counter()
        _check_run(_agent(cli, env).run_sync(PROMPT), lines)
        wall = time.perf_counter() - t0
    return {"peak_mib": peak_rss_mib(), "idle_mib": idle, "wall": wall}


#: The fat line of the memory figure: this many empty lists in one tool input
#: (``[],[],...``: 36 MB of stdout, ~770 MB if it were parsed).
FAT_CONTAINERS = 12_000_000


def _fat_file(workdir: Path, containers: int) -> Path:
    """One claude ``tool_use`` line whose input holds ``containers`` empty lists."""
    path = workdir / f"fat-{containers}.jsonl"
    if not path.exists():
        with path.open("wb") as fh:
            fh.write(
                b'{"type":"assistant","message":{"content":[{"type":"tool_use",'
                b'"id":"fat","name":"Fat","input":{"items":['
            )
            block = b"[]," * 65536
            left = containers - 1
            while left > 0:
                n = min(left, 65536)
                fh.write(block[: 3 * n])
                left -= n
            fh.write(b"[]]}}]}}\n")
    return path


def _probe_fat(p: Params) -> Result:
    """One run over the plain stream's head and tail around one line: the fat
    line (``fat``) or a small line of the same shape (``thin``)."""
    import coding_genesis.backends.claude  # noqa: F401  (imports coding_genesis too)

    workdir = Path(p["workdir"])
    s = p["stream"]
    line = _fat_file(workdir, FAT_CONTAINERS if p["which"] == "fat" else 1000)
    env = {"BENCH_FAKE_FILES": f"{s['head']}\n{line}\n{s['tail']}"}
    idle = rss_mib()
    t0 = time.perf_counter()
    result = _agent(launcher(workdir), env).run_sync(PROMPT)
    wall = time.perf_counter() - t0
    skipped = 1 if p["which"] == "fat" else 0
    if result["status"] != 0 or result["skipped_lines"] != skipped:
        raise RuntimeError(f"fat-line run: status={result['status']} skipped={skipped}")
    return {
        "peak_mib": peak_rss_mib(),
        "idle_mib": idle,
        "wall": wall,
        "line_mib": line.stat().st_size / MIB,
    }


def fig_memory(p: Params) -> Result:
    from . import data

    plain = data.generate(Path(p["workdir"]) / "plain", p["memory_plain_events"], seed=13)
    workloads = {
        "plain": ("ordinary events (0.4-3 KiB lines)", plain.params()),
        "big": ("the benchmark stream, with its 1-20 MiB tool results", p["stream"]),
    }
    probes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for key, (_, stream) in workloads.items():
        body = Path(stream["body"]).stat().st_size
        repeat = max(1, math.ceil(p["memory_bytes"] / body))
        sizes[key] = (stream["size"] + body * (repeat - 1), repeat)
        for _ in range(p["memory_reps"]):
            for which in ("bare", "runner"):
                params = {**p, "stream": stream, "which": which, "body_repeat": repeat}
                probes.setdefault((key, which), []).append(_run_probe("probe_memory", params))
                drop_transcripts()

    def peak(key: str, which: str) -> float:
        return median([x["peak_mib"] for x in probes[key, which]])

    def idle(key: str, which: str) -> float:
        return median([x["idle_mib"] for x in probes[key, which]])

    def wall(key: str, which: str) -> float:
        return median([x["wall"] for x in probes[key, which]])

    rows = []
    for key, (label, stream) in workloads.items():
        total = sizes[key][0]
        rows.append(
            row(
                f"bare loop, {total / 2**30:.2f} GiB of {label}",
                peak(key, "bare"),
                "MiB",
                baseline=True,
                note=f"after imports {idle(key, 'bare'):.1f} MiB; {wall(key, 'bare'):.1f} s; "
                f"longest line {_size(stream['max_line'])}",
            )
        )
        rows.append(
            row(
                f"coding-genesis, {total / 2**30:.2f} GiB of {label}",
                peak(key, "runner"),
                "MiB",
                ratio=peak(key, "runner") / peak(key, "bare"),
                note=f"after imports {idle(key, 'runner'):.1f} MiB "
                f"(+{peak(key, 'runner') - idle(key, 'runner'):.1f} MiB while streaming); "
                f"{wall(key, 'runner'):.1f} s",
            )
        )
    # A line of millions of tiny containers: skipped unparsed (issue 29).
    for which in ("thin", "fat"):
        params = {**p, "stream": workloads["plain"][1], "which": which}
        probes.setdefault(("fat", which), []).append(_run_probe("probe_memory", params))
        drop_transcripts()
    fat_mib = probes["fat", "fat"][0]["line_mib"]
    rows.append(
        row(
            "coding-genesis, one ordinary tool_use line (baseline)",
            peak("fat", "thin"),
            "MiB",
            baseline=True,
            note=f"after imports {idle('fat', 'thin'):.1f} MiB",
        )
    )
    rows.append(
        row(
            f"coding-genesis, one {fat_mib:.0f} MiB line of {FAT_CONTAINERS / 1e6:.0f} M "
            "empty lists (skipped: it would cost ~0.8 GB to hold)",
            peak("fat", "fat"),
            "MiB",
            ratio=peak("fat", "fat") / peak("fat", "thin"),
            note=f"+{peak('fat', 'fat') - peak('fat', 'thin'):.1f} MiB over the baseline "
            f"(aim ≤ 3× the line, {3 * fat_mib:.0f} MiB)",
        )
    )
    plain_peak, big_peak = peak("plain", "runner"), peak("big", "runner")
    plain_ratio = plain_peak / peak("plain", "bare")
    return {
        "aim": "peak RSS over ordinary events ≤ 2× the bare loop's",
        "aim_met": plain_ratio <= 2.0,
        "aims": [
            aim_row(
                f"peak RSS over {sizes['plain'][0] / 2**30:.2f} GiB of ordinary events vs the bare loop's",
                plain_ratio,
                2.0,
                note=f"{plain_peak:.1f} vs {peak('plain', 'bare'):.1f} MiB",
            )
        ],
        "summary": f"peak RSS {plain_peak:.1f} MiB over {sizes['plain'][0] / 2**30:.2f} GiB of "
        f"ordinary events (bare loop {peak('plain', 'bare'):.1f}); {big_peak:.1f} MiB with "
        f"{p['stream']['max_line'] / MIB:.0f} MiB lines (bare {peak('big', 'bare'):.1f}); "
        f"a {fat_mib:.0f} MiB line of tiny containers: {peak('fat', 'fat') / peak('fat', 'thin'):.2f}× "
        "the run with an ordinary line",
        "rows": rows,
        "notes": [
            "`bare loop` = `Popen` + `for line in proc.stdout: orjson.loads(line)`; "
            "`coding-genesis` = one `CodingGenesisAgent.run()`. Each stream's body is repeated to "
            "reach the size. Memory does not grow with the total; it grows with the longest line, "
            "which must be held whole to be parsed, and whose decoded strings take 1-4 bytes per "
            "character (these lines hold non-Latin-1 text, so 2): expect the imports plus about "
            "3× the longest line on both sides. The aim applies to ordinary events. Each probe is "
            f"a fresh process (VmHWM); medians of {p['memory_reps']}.",
        ],
    }


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


def _run_probe(probe: str, p: Params) -> dict[str, Any]:
    """Run a probe in a fresh worker process (its peak RSS is its own)."""
    out = Path(p["workdir"]) / f"{probe}-{p['which']}.json"
    params = Path(p["workdir"]) / f"{probe}-{p['which']}-params.json"
    params.write_text(json.dumps(p))
    subprocess.run(
        [sys.executable, "-m", "benchmarks.worker", probe, str(params), str(out)],
        check=True,
        cwd=HERE.parent,
    )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# -- 7. start-up --------------------------------------------------------------


def _genesis() -> list[str]:
    script = Path(sys.executable).with_name("genesis")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "coding_genesis._cli.main"]


def _compile_package() -> None:
    """Byte-compile the package, as installing a wheel does.  An editable
    install run with ``PYTHONDONTWRITEBYTECODE=1`` (as in some CI and agent
    sandboxes) never writes ``__pycache__``: every start would then compile
    the package's ~30 modules from source (100-200 ms), which no installed
    copy pays."""
    import compileall

    import coding_genesis

    root = Path(coding_genesis.__file__).parent
    for folder in (root, root.resolve().parent / "backends"):
        if folder.is_dir():
            compileall.compile_dir(str(folder), quiet=1)


def _importtime(argv: list[str], env: dict[str, str]) -> list[tuple[str, float]]:
    """``python -X importtime ARGV``: the modules whose own (self) import time
    is largest, in ms: where the time actually goes."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stderr
    own: list[tuple[str, float]] = []
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            own.append((m.group(4), int(m.group(1)) / 1000))
    own.sort(key=lambda x: -x[1])
    return own


#: The start-up commands, their row labels and their aims (× `python -c pass`).
STARTUP = (
    ("import", "`python -c 'import coding_genesis'`", 5.0),
    ("help", "`genesis --help`", 6.0),
    ("run", "`genesis run --backend failer hello`", 10.0),
)


def fig_startup(p: Params) -> Result:
    genesis = _genesis()
    scratch = Path(p["workdir"]) / "startup"
    scratch.mkdir(parents=True, exist_ok=True)
    # The run is recorded as by default (a transcript and a run-log line), in scratch.
    env = {
        **os.environ,
        "GENESIS_TRANSCRIPTS": str(scratch / "runs"),
        "GENESIS_RUN_LOG": str(scratch / "runs.jsonl"),
    }
    env.pop("GENESIS_BACKEND", None)

    def cmd(argv: list[str]) -> Callable[[], int]:
        def go() -> int:
            return subprocess.run(argv, capture_output=True, env=env, check=False).returncode

        return go

    argvs = {
        "python": [sys.executable, "-c", "pass"],
        "import": [sys.executable, "-c", "import coding_genesis"],
        "help": [*genesis, "--help"],
        "run": [*genesis, "run", "--backend", "failer", "hello"],
    }
    variants = {name: cmd(argv) for name, argv in argvs.items()}
    _compile_package()
    for name, fn in variants.items():  # warm the caches; each must succeed
        if fn() != 0:
            raise RuntimeError(f"{' '.join(argvs[name][1:])} failed")
    res = interleave(p["startup_reps"], variants)
    for name in variants:
        if any(t.value != 0 for t in res[name]):
            raise RuntimeError(f"{' '.join(argvs[name][1:])} failed")
    base = walls(res["python"])
    ratios = {name: paired_ratio(walls(res[name]), base) for name, _, _ in STARTUP}
    met = {name: ratios[name] <= aim for name, _, aim in STARTUP}
    slowest = {"run": _importtime(["-m", "coding_genesis._cli.main", *argvs["run"][-4:]], env)}
    shutil.rmtree(scratch, ignore_errors=True)
    notes = {
        "import": "public names are imported on first use",
        "help": "loads argparse and one table of the commands: no command module, none of the dependencies",
        "run": "two interpreters: the CLI, then the embedded failer it supervises",
    }
    rows = [row("`python -c pass`", median(base) * 1000, "ms", baseline=True)]
    for name, label, aim in STARTUP:
        note = f"aim ≤ {aim:g}×: {'met' if met[name] else 'missed'}; {notes[name]}"
        if name in slowest:
            note += "; largest own import times: " + ", ".join(
                f"`{n}` {ms:.0f} ms" for n, ms in slowest[name][:5]
            )
        rows.append(
            row(label, median(walls(res[name])) * 1000, "ms", ratio=ratios[name], note=note)
        )
    return {
        "aim": "`import coding_genesis` ≤ 5×, `genesis --help` ≤ 6×, "
        "`genesis run --backend failer hello` ≤ 10× `python -c pass`",
        "aim_met": all(met.values()),
        "aims": [
            aim_row(f"{label} vs `python -c pass`", ratios[name], aim)
            for name, label, aim in STARTUP
        ],
        "summary": "; ".join(
            f"{label} {median(walls(res[name])) * 1000:.0f} ms ({ratios[name]:.1f}×)"
            for name, label, _ in STARTUP
        )
        + f" vs `python -c pass` {median(base) * 1000:.0f} ms",
        "rows": rows,
        "notes": [
            f"Wall time of each command, {p['startup_reps']} interleaved repetitions, all "
            "run by the same interpreter; ratios are per repetition, "
            "against `python -c pass` run in the same rotation. `genesis` is the installed "
            "entry point next to the interpreter (else `python -m coding_genesis._cli.main`); the "
            "run records its transcript and run-log line as by default, in a scratch "
            "directory. An editable install adds its import hook to every start-up, "
            "`python -c pass` included.",
        ],
    }


def fig_sessions(p: Params) -> Result:
    """Live sessions on the real claude (``benchmarks/sessions.py``)."""
    from .sessions import fig_sessions as figure

    return figure(p)


def fig_pool(p: Params) -> Result:
    """Warm session pools on the real claude and codex (``benchmarks/pool.py``)."""
    from .pool import fig_pool as figure

    return figure(p)


def fig_hosttools(p: Params) -> Result:
    """A host tool round trip on the real claude (``benchmarks/hosttools.py``)."""
    from .hosttools import fig_hosttools as figure

    return figure(p)


def fig_acp(p: Params) -> Result:
    """Live sessions over ACP on the real gemini, qwen, opencode (``benchmarks/acp.py``)."""
    from .acp import fig_acp as figure

    return figure(p)


def fig_serve(p: Params) -> Result:
    """``genesis serve`` against a library call, and 200 SSE clients (``benchmarks/serve.py``)."""
    from .serve import fig_serve as figure

    return figure(p)


PROBES: dict[str, Callable[[Params], Result]] = {
    "probe_memory": probe_memory,
    "probe_concurrency_rss": probe_concurrency_rss,
}

FIGURES: dict[str, tuple[str, Callable[[Params], Result]]] = {
    "parser": ("1. Parser vs the limit", fig_parser),
    "e2e": ("2. End to end vs the limit", fig_e2e),
    "sdk": ("3. Against claude-agent-sdk", fig_sdk),
    "stop": ("4. Stop precision", fig_stop),
    "concurrency": ("5. Concurrency", fig_concurrency),
    "memory": ("6. Memory", fig_memory),
    "startup": ("7. Start-up", fig_startup),
    "sessions": ("8. Live sessions", fig_sessions),
    "pool": ("9. Warm pool", fig_pool),
    "hosttools": ("10. Host tools", fig_hosttools),
    "acp": ("11. ACP sessions", fig_acp),
    "serve": ("12. genesis serve", fig_serve),
}
