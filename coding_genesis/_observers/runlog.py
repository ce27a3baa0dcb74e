"""Failure monitoring: one JSON line per run in a run log, and
counts and rates by category and backend over a time window.

The library writes a run log only when asked (``run_log=PATH``, through
:class:`RunLogObserver`); the ``genesis`` CLI keeps one by default (see
``coding_genesis._cli.env``) and ``genesis stats`` prints the statistics
(their text: ``coding_genesis._cli.stats``).

A record holds no prompt and no answer: ids, status, category, reason, the
blocker, counts and timings, with environment secrets redacted.  Appends are
single ``write`` calls on an ``O_APPEND`` file, so concurrent runs (threads or
processes) do not interleave lines; past :data:`MAX_BYTES` the log is rotated
to ``runs.jsonl.1``.  Writing never fails a run: errors are logged once.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from coding_genesis._util.clock import iso_utc
from coding_genesis._util.files import FILE_FLAGS, NotARegularFile, open_regular, private_dir
from coding_genesis._util.homes import public
from coding_genesis._util.redact import Redactor
from coding_genesis.events import EventKind
from coding_genesis.observer import Observer, RunInfo, RunObserver
from coding_genesis.status import FailureCategory

if TYPE_CHECKING:
    from coding_genesis.events import Translator
from coding_genesis.usage import RunningTotals, Tokens

__all__ = [
    "MAX_BYTES",
    "RunLogObserver",
    "append_run",
    "blocker_key",
    "ending",
    "failure_stats",
    "parse_window",
    "read_runs",
    "run_record",
    "session_before",
    "token_counts",
    "usage_stats",
]

log = logging.getLogger("coding_genesis._observers.runlog")

MAX_BYTES = 20 * 1024 * 1024
#: 2: a run's usage and cost are its own share of a CLI session's running
#: totals (version 1 wrote claude's running session cost on each turn).
SCHEMA = 2
_MESSAGE = 300
_warned: set[str] = set()


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def token_counts(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The token counts of a CLI's usage dict, the same for every CLI:
    ``input_tokens`` (every input token, cached ones included),
    ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` (each
    only when the CLI reported it).

    claude reports cache reads and writes apart from ``input_tokens``, so they
    are added in; codex's ``input_tokens`` already includes its
    ``cached_input_tokens``.
    """
    if not isinstance(usage, Mapping) or not usage:
        return {}
    out: dict[str, int] = {}
    given = _count(usage.get("input_tokens"))
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_write = _count(usage.get("cache_creation_input_tokens"))
    if given is not None:
        out["input_tokens"] = given + (cache_read or 0) + (cache_write or 0)
    output = _count(usage.get("output_tokens"))
    if output is not None:
        out["output_tokens"] = output
    if cache_read is None:
        cache_read = _count(usage.get("cached_input_tokens"))
    if cache_read is not None:
        out["cache_read_tokens"] = cache_read
    if cache_write is not None:
        out["cache_write_tokens"] = cache_write
    return out


def run_record(
    response: Mapping[str, Any], *, now: float | None = None, redactor: Redactor | None = None
) -> dict[str, Any]:
    """The run log line of one response dict (no prompt, no answer)."""
    ts = time.time() if now is None else now
    failure = response.get("failure") or {}
    ok = not response.get("is_error") and response.get("status") == 0
    tokens = token_counts(response.get("usage"))
    cost = response.get("cost_usd")
    record: dict[str, Any] = {
        "v": SCHEMA,
        "ts": iso_utc(ts),
        "t": round(ts, 3),
        "run_id": response.get("run_id"),
        "agent": response.get("agent"),
        "backend": response.get("backend"),
        "status": response.get("status"),
        "ok": ok,
        "error": response.get("error"),
        "category": failure.get("category"),
        "retryable": failure.get("retryable"),
        "suggested_retry": failure.get("suggested_retry"),
        "reason": failure.get("reason"),
        "blocked_on": failure.get("blocked_on"),
        "retry_after_s": failure.get("retry_after_s"),
        "message": None if ok else str(response.get("message") or "")[:_MESSAGE],
        "duration_s": response.get("duration_s"),
        "tool_calls": response.get("tool_calls"),
        "files_modified": len(response.get("files_modified") or ()),
        "exit_code": response.get("exit_code"),
        "signal": response.get("signal"),
        "stop_reason": response.get("stop_reason"),
        "session_id": response.get("session_id"),
        "turn": response.get("turn"),
        "trigger": response.get("trigger"),
        "model": response.get("model"),
        "cli_retries": response.get("cli_retries"),
        "attempts": response.get("attempts"),
        "api_error_status": response.get("api_error_status"),
        **{
            key: tokens.get(key)
            for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        },
        "cost_usd": cost if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        # Cost provenance ("reported", "computed", "unknown"), once results carry it.
        "cost_source": response.get("cost_source"),
    }
    redactor = redactor or Redactor()
    redacted: dict[str, Any] = redactor.deep(record)
    return redacted


def _rotate(path: Path, max_bytes: int) -> None:
    try:
        if path.stat().st_size >= max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass


def append_run(path: Path, record: Mapping[str, Any], *, max_bytes: int = MAX_BYTES) -> bool:
    """Append one record; False (and one warning per path) if it could not be written."""
    try:
        line = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        private_dir(path.parent)
        _rotate(path, max_bytes)
        # Never through a symlink (another user's link to ~/.bashrc, say), and
        # never blocked by a FIFO planted in its place (O_NONBLOCK: ENXIO).
        fd = os.open(path, FILE_FLAGS | os.O_APPEND | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotARegularFile(f"{path} is not a regular file")
            os.write(fd, line)
        finally:
            os.close(fd)
    except (OSError, TypeError, orjson.JSONEncodeError) as exc:
        key = str(path)
        if key not in _warned:
            _warned.add(key)
            log.warning("cannot write the run log %s: %s", path, exc)
        return False
    return True


# -- reading and statistics -------------------------------------------------

_WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.I)
_WINDOW_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_window(text: str) -> float | None:
    """``24h``, ``30m``, ``7d``, ``1w``, ``90`` (seconds) -> seconds; ``all`` -> None."""
    if text.strip().lower() in ("all", "ever", "forever"):
        return None
    match = _WINDOW.match(text)
    if not match:
        raise ValueError(f"expected a time window such as 24h, 30m, 7d or all, got {text!r}")
    seconds = float(match.group(1)) * _WINDOW_UNITS[match.group(2).lower()]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"the time window must be > 0, got {text!r}")
    return seconds


def read_runs(
    path: Path,
    *,
    since_s: float | None = None,
    backend: str | None = None,
    now: float | None = None,
    stats: Counter[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Records of the log (its rotated part first) in the window, in file order.

    Lines that are not records are skipped (counted in ``stats["malformed"]``).
    """
    clock = time.time() if now is None else now
    start = clock - since_s if since_s is not None else -math.inf
    for part in (path.with_name(path.name + ".1"), path):
        try:  # a regular file only: a FIFO in its place never hangs `genesis stats`
            fh = os.fdopen(open_regular(part, follow=True), "rb")
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot read the run log %s: %s", part, exc)
            if stats is not None:
                stats["malformed"] += 1
            continue
        with fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    record = None
                t = record.get("t") if isinstance(record, dict) else None
                if not isinstance(t, int | float) or isinstance(t, bool):
                    if stats is not None:
                        stats["malformed"] += 1
                    continue
                # (``t`` is rounded to the millisecond: a record written just
                # now may be up to 0.5 ms "in the future")
                if t < start or t > clock + 1.0:
                    continue
                if backend is not None and record.get("backend") != backend:
                    continue
                yield record


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


#: What varies between identical failures: times, dates, ids, durations, counts.
_VARYING = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<time>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"), "<time>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{12,}\b", re.I), "<id>"),
    # (an HTTP status stays: 429 and 500 are different failures)
    (re.compile(r"(?<!HTTP )(?<![\w.])\d+(?:\.\d+)?(?![\d.])"), "<n>"),
)


def blocker_key(text: str) -> str:
    """``text`` with what varies between identical failures (timestamps, ids,
    numbers) replaced by placeholders, so that they are counted together."""
    for pattern, placeholder in _VARYING:
        text = pattern.sub(placeholder, text)
    return text


#: Endings that are no failure of the run: counted apart from the failures (an
#: interrupted turn with the cancelled runs: the caller stopped both).
_NOT_FAILURES = {"cancelled": "cancelled", "interrupted": "cancelled", "not_started": "not_started"}
#: The same, read from the error code of a record written before its category existed.
_NOT_FAILURE_ERRORS = {
    "cancelled": "cancelled",
    "interrupted": "cancelled",
    "usage_limit": "not_started",
}


def category_word(value: object) -> str:
    """A record's category as it is named now (a log written before a category
    was renamed still reads: ``not_found`` is ``missing``)."""
    text = str(value or FailureCategory.UNKNOWN.value)
    try:
        return FailureCategory(text).value
    except ValueError:
        return text


def ending(record: Mapping[str, Any]) -> str:
    """How a recorded run ended: ``ok``, ``cancelled``, ``not_started`` or ``failed``."""
    if record.get("ok"):
        return "ok"
    found = _NOT_FAILURES.get(str(record.get("category")))
    if found is None:
        found = _NOT_FAILURE_ERRORS.get(str(record.get("error")))
    return found or "failed"


def failure_stats(
    path: str | os.PathLike[str],
    *,
    since_s: float | None = 86400.0,
    backend: str | None = None,
    now: float | None = None,
    top: int = 5,
) -> dict[str, Any]:
    """Counts and rates of runs and failures by category and backend in a window.

    ``since_s=None`` covers the whole log.  Rates are fractions (0.25 = 25%):
    ``failure_rate`` of runs that failed, per category its ``share`` of the
    failures and its ``rate`` over all runs.  Cancelled runs (and interrupted
    turns) and runs never started (a spent budget, a usage limit) are counted
    apart (``cancelled``, ``not_started``), not as failures.
    """
    log_path: Path | None = Path(os.fspath(path))
    clock = time.time() if now is None else now
    counters: Counter[str] = Counter()
    runs = 0
    failures = 0
    apart: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    blockers: Counter[str] = Counter()
    backends: dict[str, dict[str, Any]] = {}
    if log_path is not None:
        for record in read_runs(
            log_path, since_s=since_s, backend=backend, now=clock, stats=counters
        ):
            runs += 1
            name = str(record.get("backend") or "unknown")
            entry = backends.setdefault(name, {"runs": 0, "failures": 0, "by_category": Counter()})
            entry["runs"] += 1
            end = ending(record)
            if end == "ok":
                continue
            if end != "failed":
                apart[end] += 1
                continue
            failures += 1
            category = category_word(record.get("category"))
            by_category[category] += 1
            entry["failures"] += 1
            entry["by_category"][category] += 1
            if record.get("blocked_on"):
                blockers[blocker_key(str(record["blocked_on"]))] += 1
    return {
        "log": str(log_path) if log_path is not None else None,
        "since_s": since_s,
        "from": iso_utc(clock - since_s) if since_s is not None else None,
        "to": iso_utc(clock),
        "backend": backend,
        "runs": runs,
        "failures": failures,
        "cancelled": apart["cancelled"],
        "not_started": apart["not_started"],
        "failure_rate": _rate(failures, runs),
        "by_category": {
            category: {
                "count": count,
                "share": _rate(count, failures),
                "rate": _rate(count, runs),
            }
            for category, count in by_category.most_common()
        },
        "by_backend": {
            name: {
                "runs": entry["runs"],
                "failures": entry["failures"],
                "failure_rate": _rate(entry["failures"], entry["runs"]),
                "by_category": dict(entry["by_category"].most_common()),
            }
            for name, entry in sorted(backends.items())
        },
        "top_blockers": [
            {"blocked_on": blocker, "count": count} for blocker, count in blockers.most_common(top)
        ],
        "malformed_lines": counters["malformed"],
    }


# -- usage: runs, failures, tokens and cost by backend, model or day ------------

#: What ``usage_stats(by=...)`` groups by.
USAGE_KEYS = ("backend", "model", "day")
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _usage_key(record: Mapping[str, Any], by: str) -> str:
    if by == "day":
        ts = record.get("ts")
        if isinstance(ts, str) and len(ts) >= 10:
            return ts[:10]
        return iso_utc(float(record["t"]))[:10]
    value = record.get(by)
    return str(value) if value else "unknown"


def _usage_entry() -> dict[str, Any]:
    return {
        "runs": 0,
        "failures": 0,
        **dict.fromkeys(_TOKENS, 0),
        "runs_with_usage": 0,
        "cost_usd": 0.0,
        "runs_with_cost": 0,
        "cost_sources": Counter(),
    }


def _add_usage(entry: dict[str, Any], record: Mapping[str, Any]) -> None:
    entry["runs"] += 1
    if ending(record) == "failed":
        entry["failures"] += 1
    seen = False
    for key in _TOKENS:
        value = _count(record.get(key))
        if value is not None:
            entry[key] += value
            seen = True
    if seen:
        entry["runs_with_usage"] += 1
    cost = record.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost):
        entry["cost_usd"] += float(cost)
        entry["runs_with_cost"] += 1
        # Cost provenance: counted by source once records carry it.
        source = record.get("cost_source")
        if isinstance(source, str) and source:
            entry["cost_sources"][source] += 1


def _usage_out(entry: dict[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    out["failure_rate"] = _rate(entry["failures"], entry["runs"])
    out["cost_usd"] = round(entry["cost_usd"], 6)
    out["cost_sources"] = dict(entry["cost_sources"].most_common())
    return out


def usage_stats(
    path: str | os.PathLike[str],
    *,
    since_s: float | None = 86400.0,
    backend: str | None = None,
    by: str = "backend",
    now: float | None = None,
) -> dict[str, Any]:
    """Runs, failures, tokens and cost in a window, grouped ``by`` backend,
    model or day (UTC), with the totals.

    Tokens are summed over the runs that reported them (``runs_with_usage``);
    cost over the runs that have one (``runs_with_cost``): a run without a
    cost is not counted as free.
    """
    if by not in USAGE_KEYS:
        raise ValueError(f"by must be one of {', '.join(USAGE_KEYS)}, got {by!r}")
    log_path = Path(os.fspath(path))
    clock = time.time() if now is None else now
    total = _usage_entry()
    groups: dict[str, dict[str, Any]] = {}
    for record in read_runs(log_path, since_s=since_s, backend=backend, now=clock):
        key = _usage_key(record, by)
        _add_usage(total, record)
        _add_usage(groups.setdefault(key, _usage_entry()), record)
    return {
        "log": str(log_path),
        "since_s": since_s,
        "from": iso_utc(clock - since_s) if since_s is not None else None,
        "to": iso_utc(clock),
        "backend": backend,
        "by": by,
        "total": _usage_out(total),
        "groups": {key: _usage_out(groups[key]) for key in sorted(groups)},
    }


# -- the observer ------------------------------------------------------------------


class RunLogObserver(Observer):
    """Appends one line per run to a run log (failure monitoring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunLogObserver({str(self.path)!r})"

    def start(self, run: RunInfo) -> RunObserver:
        if run.resume and run.totals is not None and run.translator is not None:
            _seed(self.path, run.resume, run.backend, run.totals, run.translator())
        return _RunLogRun(self.path, run.redactor)


def _seed(
    path: Path, session: str, backend: str, totals: RunningTotals, translator: Translator
) -> None:
    """Before a resumed run of a session the agent has not seen: what the
    log says it cost so far, so that the run's share of a CLI's running total
    (claude counts its cost across ``--resume``, even in a new process) is
    its own."""
    cli = translator.running_cli
    if cli is None or totals.last(cli, session) is not None:
        return
    before = session_before(path, backend, session)
    if before is not None:
        known = translator.recorded_total(*before)
        if known is not None:
            totals.seed(cli, session, known)


class _RunLogRun(RunObserver):
    __slots__ = ("_path", "_redactor")

    #: One line per run, from the response: no events needed.
    event_kinds: frozenset[EventKind] = frozenset()

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._path = path
        self._redactor = redactor

    def finish(self, response: Mapping[str, Any]) -> None:
        append_run(self._path, run_record(response, now=time.time(), redactor=self._redactor))


def session_before(
    path: Path, backend: str, session_id: str
) -> tuple[float, dict[str, tuple[Tokens, float]]] | None:
    """What a CLI session had cost before this process (``genesis run
    --resume``, ``genesis chat --resume``), from the run log: the cost, and per
    model the tokens and cost.  Version 2 records are shares (summed); a
    version 1 record held claude's running cost itself (the largest is the
    total so far).  None: no record of the session."""
    cost = running = 0.0
    by_model: dict[str, tuple[Tokens, float]] = {}
    seen = False
    for record in read_runs(path, backend=backend):
        if record.get("session_id") != session_id:
            continue
        seen = True
        value = record.get("cost_usd")
        number = (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
        )
        if record.get("v") == 1:
            running = max(running, number)
            continue
        cost += number
        model = record.get("model")
        if isinstance(model, str) and model:
            tokens, spent = by_model.get(model, (Tokens(), 0.0))
            tokens.add(Tokens(*(_count(record.get(k)) or 0 for k in _TOKEN_FIELDS)))
            by_model[model] = (tokens, spent + number)
    return (running + cost, by_model) if seen else None


#: A record's token counts, in the order of :class:`Tokens`.
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(RunLogObserver)
