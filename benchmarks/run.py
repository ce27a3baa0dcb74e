"""Run the benchmarks, print a table, write RESULTS.md (and RESULTS.json).

    python -m benchmarks                 # full run (several minutes), writes benchmarks/RESULTS.md
    python -m benchmarks --smoke         # < 1 min, what CI runs; writes to a temporary file
    python -m benchmarks --only parser,e2e --out /tmp/r.md

Benchmarks are not tests: a number never fails the run.  A figure that cannot
run (a crash, a wrong count of lines) does: exit status 1, so they never rot.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import data
from .figures import E2E_LEAN, E2E_TRANSCRIPT, FIGURES, SDK_EVENTS, SDK_LEAN, SDK_TRANSCRIPT
from .stats import machine_info

__all__ = ["MODES", "main"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIB = 1024 * 1024

#: Sizes and repetitions per mode.
MODES: dict[str, dict[str, Any]] = {
    "full": {
        "events": 200_000,
        "big_mib": (1, 2, 3, 5, 8, 13, 20),
        "reps": {"parser": 9, "e2e": 7, "sdk": 3, "concurrency": 5},
        "stop_samples": 100,
        "stop_bare_samples": 25,
        "stop_timeout": 0.2,
        "stop_grace": 0.2,
        "concurrent": 200,
        "memory_bytes": 1024 * MIB,
        "memory_plain_events": 50_000,
        "memory_reps": 2,
        "hosttools_trips": 50,
        "serve_pairs": 200,
        "serve_clients": 200,
        "serve_runs": 5,
        "serve_rounds": 3,
        "startup_reps": 15,
        "sessions_first": 10,
        "sessions_pairs": 5,
        "sessions_turns": 20,
        "sessions_trips": 100,
        "sessions_deltas": 20,
        "pool_first": 10,
        "pool_batch": 8,
        "pool_batch_reps": 3,
        "acp_turns": 12,
        "acp_tools": 12,
        "acp_pool": 4,
    },
    "smoke": {
        "events": 20_000,
        "big_mib": (1, 2),
        "reps": {"parser": 3, "e2e": 3, "sdk": 2, "concurrency": 2},
        "stop_samples": 6,
        "stop_bare_samples": 3,
        "stop_timeout": 0.1,
        "stop_grace": 0.1,
        "concurrent": 30,
        "memory_bytes": 32 * MIB,
        "memory_plain_events": 10_000,
        "memory_reps": 1,
        "hosttools_trips": 5,
        "serve_pairs": 10,
        "serve_clients": 50,
        "serve_runs": 2,
        "serve_rounds": 1,
        "startup_reps": 2,
        "sessions_first": 3,
        "sessions_pairs": 1,
        "sessions_turns": 5,
        "sessions_trips": 5,
        "sessions_deltas": 3,
        "pool_first": 3,
        "pool_batch": 4,
        "pool_batch_reps": 1,
        "acp_turns": 2,
        "acp_tools": 2,
        "acp_pool": 1,
        "acp_agents": ["gemini"],
    },
}


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes, few repetitions (< 1 min)")
    ap.add_argument(
        "--out",
        type=Path,
        help="Markdown report (default: benchmarks/RESULTS.md; with --smoke a temporary file)",
    )
    ap.add_argument("--only", help=f"comma-separated figures: {','.join(FIGURES)}")
    ap.add_argument(
        "--before",
        type=Path,
        help="a RESULTS.json from an earlier run: adds a before/after section",
    )
    ap.add_argument("--before-label", default="before", help="what the earlier run was")
    ap.add_argument("--before-note", default="", help="a sentence under the before/after table")
    ap.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS.json",
        help="only re-write the Markdown report of an earlier run (no measuring)",
    )
    return ap.parse_args(argv)


def _run_figure(name: str, params: dict[str, Any], workdir: Path) -> dict[str, Any]:
    params_path = workdir / f"{name}-params.json"
    out_path = workdir / f"{name}-result.json"
    params_path.write_text(json.dumps(params))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.worker", name, str(params_path), str(out_path)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not out_path.exists():
        tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
        return {"error": f"worker exited with {proc.returncode}:\n{tail}"}
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    result: dict[str, Any] = json.loads(out_path.read_text())
    return result


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    mode = "smoke" if args.smoke else "full"
    cfg = MODES[mode]
    names = list(FIGURES)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in FIGURES]
        if unknown:
            print(f"unknown figure(s): {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
            return 2
    out = args.out
    if out is None:
        out = (
            HERE / "RESULTS.md"
            if mode == "full"
            else Path(tempfile.gettempdir()) / "genesis-bench-smoke" / "RESULTS.md"
        )
    before = json.loads(args.before.read_text()) if args.before else None
    if args.render:
        report = json.loads(args.render.read_text())
        out = args.out or args.render.with_suffix(".md")
        out.write_text(render_markdown(report, before, args.before_label, args.before_note))
        _say(f"wrote {out}")
        return 0

    started = time.perf_counter()
    now = _dt.datetime.now(_dt.UTC)
    info = machine_info(ROOT)
    workdir = Path(tempfile.mkdtemp(prefix="genesis-bench-"))
    # Runs keep their default bookkeeping (the run log, the failer's counters),
    # but in the scratch directory, not in the user's ~/.local/state.
    os.environ["XDG_STATE_HOME"] = str(workdir / "state")
    os.environ["GENESIS_RUN_LOG"] = str(workdir / "state" / "runs.jsonl")
    os.environ["GENESIS_BENCH_SCRATCH"] = "1"  # figures may empty it between runs
    # A claude user's environment holds a key: the runner's secret redaction is on.
    os.environ["ANTHROPIC_API_KEY"] = "bench-placeholder-not-a-real-key"
    results: dict[str, dict[str, Any]] = {}
    try:
        t0 = time.perf_counter()
        stream = data.generate(workdir / "stream", cfg["events"], tuple(cfg["big_mib"]))
        _say(
            f"[{mode}] stream: {stream.lines:,} lines, {stream.size / MIB:.0f} MiB, longest "
            f"{stream.max_line / MIB:.1f} MiB (generated in {time.perf_counter() - t0:.1f} s)"
        )
        base = {
            "smoke": mode == "smoke",
            "workdir": str(workdir),
            "stream": stream.params(),
            **{k: v for k, v in cfg.items() if k not in ("reps", "big_mib")},
        }
        for name in names:
            title = FIGURES[name][0]
            params = {**base, "reps": cfg["reps"].get(name, 3)}
            _say(f"[{mode}] {title} ...")
            t0 = time.perf_counter()
            res = _run_figure(name, params, workdir)
            res["title"] = title
            res["seconds"] = round(time.perf_counter() - t0, 1)
            results[name] = res
            _say(f"    {_headline(res)}  ({res['seconds']} s)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    info["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report = {
        "mode": mode,
        "date": now.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "command": "python -m benchmarks" + (" --smoke" if mode == "smoke" else ""),
        "machine": info,
        "stream": {
            "lines": stream.lines,
            "mib": round(stream.size / MIB, 1),
            "longest_mib": round(stream.max_line / MIB, 1),
        },
        "figures": results,
    }
    print(render_text(report))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(report, before, args.before_label, args.before_note))
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    _say(f"wrote {out} and {out.with_suffix('.json').name} ({report['duration_s']} s in all)")
    failed = [n for n, r in results.items() if "error" in r]
    if failed:
        _say(f"figure(s) that could not run: {', '.join(failed)}")
        return 1
    return 0


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- rendering ----------------------------------------------------------------


def _fmt(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if unit.startswith("s"):
        return f"{value:.3f} {unit}"
    if unit in ("ms", "MiB"):
        return f"{value:.1f} {unit}"
    return f"{value:,.0f} {unit}"


def _ratio(r: dict[str, Any], label: str) -> str:
    if r.get("baseline"):
        return "baseline"
    if r.get("ratio") is None:
        return ""
    return f"{r['ratio']:.2f}{label}"


def _met(res: dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR"
    if "skipped" in res:
        return "skipped"
    met = res.get("aim_met")
    return "—" if met is None else ("yes" if met else "**no**")


def _headline(res: dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR: " + str(res["error"]).splitlines()[-1]
    if "skipped" in res:
        return "skipped: " + str(res["skipped"])
    return f"{res.get('summary', '')}  [aim: {res.get('aim', '')}: {_met(res).strip('*')}]"


def render_text(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "",
        f"coding-genesis benchmarks ({report['mode']}), {report['date']}, "
        f"{m['cpu']} × {m['cores']}, {m['python']}, load {m['load_average']}",
        "",
    ]
    aims = [a for res in report["figures"].values() for a in res.get("aims", [])]
    if aims:
        lines.append("aims (tracker issue 15):")
        w = max(len(a["figure"]) for a in aims)
        for a in aims:
            met = "—" if a["met"] is None else ("met" if a["met"] else "MISSED")
            lines.append(
                f"    {a['figure']:<{w}}  {a['value']:>8}  aim {a['aim']:<7} {met:<6} {a['note']}"
            )
        lines.append("")
    for res in report["figures"].values():
        lines.append(f"{res['title']}: {_headline(res)}")
        if "rows" not in res:
            continue
        label = res.get("ratio_label", "×")
        w = max(len(r["what"]) for r in res["rows"])
        for r in res["rows"]:
            lines.append(
                f"    {r['what']:<{w}}  {_fmt(r['value'], r['unit']):>16}  {_ratio(r, label):>14}"
            )
        for c in res.get("correctness", []):
            lines.append(
                f"    {c['input']}: SDK {c['sdk_messages']}/{c['valid_lines']} ({c['sdk_outcome']}); "
                f"ours {c['ours_messages']}/{c['valid_lines']} ({c['ours_outcome']})"
            )
    return "\n".join(lines)


def render_markdown(
    report: dict[str, Any],
    before: dict[str, Any] | None = None,
    before_label: str = "before",
    before_note: str = "",
) -> str:
    m = report["machine"]
    s = report["stream"]
    out = [
        "# Benchmark results",
        "",
        f"Written by `{report['command']}` on {report['date']} ({report['duration_s']} s). "
        "Every figure is a median of several repetitions, each ratio is against a baseline "
        "measured in the same process, interleaved with it (absolute times on a shared machine "
        "are noise; ratios of paired runs much less so). Benchmarks are not tests: no number "
        "fails a run. How to run them: see the Benchmarks page of the docs (docs/benchmarks.md).",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {m['cpu']}, {m['cores']} cores (shared with other jobs while this ran) |",
        f"| memory | {m['memory_gib']} GiB |",
        f"| OS | {m['os']} |",
        f"| Python | {m['python']} |",
        f"| coding-genesis | {m['coding_genesis']} |",
        f"| orjson / anyio / psutil / pydantic | {m['orjson']} / {m['anyio']} / {m['psutil']} / {m['pydantic']} |",
        f"| claude-agent-sdk | {m['claude-agent-sdk']} |",
        f"| load average (start → end) | {m['load_average']} → {m.get('load_average_end')} |",
        "",
        f"Workload: {s['lines']:,} lines of claude stream-json, {s['mib']} MiB, generated "
        "deterministically from real recordings (`benchmarks/templates/`): mostly 0.4–3 KiB "
        f"events, a few huge Bash tool results (longest line {s['longest_mib']} MiB).",
        "",
        "## Aims (tracker issue 15)",
        "",
        "Every row of the issue's aims table, on the defaults, from the figures below.",
        "",
        "| figure | measured | aim | met | notes |",
        "|---|---:|---|---|---|",
    ]
    for res in report["figures"].values():
        for a in res.get("aims", []):
            met = "—" if a["met"] is None else ("yes" if a["met"] else "**no**")
            out.append(f"| {a['figure']} | {a['value']} | {a['aim']} | {met} | {a['note']} |")
    out += [
        "",
        "## Summary",
        "",
        "| figure | result | aim | met |",
        "|---|---|---|---|",
    ]
    for res in report["figures"].values():
        text = (
            res.get("summary")
            or res.get("skipped")
            or ("could not run: " + res.get("error", "").splitlines()[-1])
        )
        met = _met(res) + (f" ({res['aim_note']})" if res.get("aim_note") else "")
        out.append(f"| {res['title']} | {text} | {res.get('aim', '')} | {met} |")
    for res in report["figures"].values():
        out += ["", f"## {res['title']}", ""]
        if "error" in res:
            out += ["Could not run:", "", "```", res["error"], "```"]
            continue
        if "skipped" in res:
            out += [f"Skipped: {res['skipped']}"]
            continue
        note = f" ({res['aim_note']})" if res.get("aim_note") else ""
        out += [f"Aim: {res['aim']} — **{_met(res).strip('*')}**{note}. {res['summary']}.", ""]
        label = res.get("ratio_label", "×")
        out += ["| what | median | ratio | notes |", "|---|---:|---:|---|"]
        for r in res["rows"]:
            out.append(
                f"| {r['what']} | {_fmt(r['value'], r['unit'])} | {_ratio(r, label)} | {r['note']} |"
            )
        if res.get("correctness"):
            out += [
                "",
                "Correctness: one bad line among 1,000 good ones (defaults on both sides).",
                "",
                "| input | claude-agent-sdk | coding-genesis |",
                "|---|---|---|",
            ]
            for c in res["correctness"]:
                out.append(
                    f"| {c['input']} | {c['sdk_messages']}/{c['valid_lines']} messages; "
                    f"{c['sdk_outcome']} | {c['ours_messages']}/{c['valid_lines']} messages; "
                    f"{c['ours_outcome']} |"
                )
        for note in res.get("notes", []):
            out += ["", note]
    if before:
        out += _before_after(report, before, before_label, before_note)
    findings = HERE / "FINDINGS.md"
    if findings.exists():
        out += ["", findings.read_text().rstrip("\n")]
    return "\n".join(out) + "\n"


#: Rows renamed since the run before the fixes (new name -> old name).
_RENAMED = {
    E2E_TRANSCRIPT: "`CodingGenesisAgent('claude').run()` (supervised, parsed, "
    "translated, tallied)",
    E2E_LEAN: "`CodingGenesisAgent('claude').run()` (supervised, parsed, translated, tallied)",
    SDK_EVENTS: "coding-genesis, every event delivered to a subscriber",
    SDK_TRANSCRIPT: "coding-genesis, default (events folded into the result)",
    SDK_LEAN: "coding-genesis, default (events folded into the result)",
    "coding-genesis, 1.07 GiB of the benchmark stream, with its 1-20 MiB tool results": "coding-"
    "genesis: one `CodingGenesisAgent.run()`",
}


def _before_after(
    report: dict[str, Any], before: dict[str, Any], label: str, note: str
) -> list[str]:
    out = [
        "",
        "## Before and after the fixes",
        "",
        f"The same command on {label} ({before['machine']['coding_genesis']}, "
        f"{before['date']}, {before['mode']} mode) and now.",
        "",
        "| figure | row | before | after |",
        "|---|---|---:|---:|",
    ]
    for name, res in report["figures"].items():
        old = before["figures"].get(name)
        if not old or "rows" not in old or "rows" not in res:
            continue
        label_r = res.get("ratio_label", "×")
        old_rows = {r["what"]: r for r in old["rows"]}
        for new_row in res["rows"]:
            old_row = old_rows.get(new_row["what"]) or old_rows.get(
                _RENAMED.get(new_row["what"], "")
            )
            if old_row is None or new_row.get("baseline"):
                continue
            out.append(
                f"| {res['title']} | {new_row['what']} | {_fmt(old_row['value'], old_row['unit'])} "
                f"({_ratio(old_row, label_r)}) | {_fmt(new_row['value'], new_row['unit'])} "
                f"({_ratio(new_row, label_r)}) |"
            )
    if note:
        out += ["", note]
    return out
