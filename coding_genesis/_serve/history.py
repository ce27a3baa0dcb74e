"""One history with the command line: the server's runs and every recorded run.

A run the server accepted is known by its request id (the journal, and in
memory while it is held); once it started it also has its run id, the name
of its transcript and of its run-log line, as every run recorded by
``genesis run``, ``run-many`` or an agent with ``transcripts=`` has.  The
listing merges both: the server's requests (queued, running, finished,
lost) and the transcripts no request of the server names.

At start (:func:`recover`) the sweep stops what runs of dead runners left
running (a server that was SIGKILLed is such a runner: its CLIs' trees are
stopped, their transcripts marked ``ended.json``), then every request the
journal shows queued or running is marked ``lost``, with what it had done
read from its transcript (its recorded stdout decoded as a live run is,
through ``agent.replay``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from coding_genesis._observers.records import RunLookupError, RunRecord, find_run, list_runs
from coding_genesis._serve.journal import Journal
from coding_genesis._serve.runs import Entry, Runs, prompt_head
from coding_genesis.agent import CodingGenesisAgent

__all__ = ["History", "lost_done", "recover"]

log = logging.getLogger("coding_genesis._serve.history")

#: The most of a lost run's recorded stdout decoded to say what it did.
MAX_REPLAY = 64 << 20

LOST_REASON = (
    "the server stopped (killed or crashed) while this run was {where}; its process tree "
    "was stopped at the server's next start"
)


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _text(value: object) -> str | None:
    """A recorded value shown as text (a planted or damaged file holds anything)."""
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def lost_done(base: Path | None, run_id: str | None) -> dict[str, Any]:
    """What a run did before its server died, from its transcript: attempts,
    tool calls by name, files modified, its CLI session, usage and cost."""
    done: dict[str, Any] = {"attempts": 0, "tool_calls": 0, "tool_usage": {}}
    if base is None or not run_id:
        done["transcript"] = None
        return done
    try:
        record = find_run(base, run_id)
    except RunLookupError:
        done["transcript"] = None
        return done
    done["transcript"] = str(record.path)
    ended = record.ended or {}
    done["stopped_processes"] = ended.get("stopped")
    backend = str(record.meta.get("backend") or "")
    files: list[str] = []
    usage: dict[str, Any] | None = None
    cost = 0.0
    for path in record.stdout_files():
        done["attempts"] += 1
        try:
            stdout = record.read_stdout(path)[-MAX_REPLAY:]
            agent = CodingGenesisAgent(backend, transcripts=None, run_log=None, ledger=False)
            result = agent.replay(stdout, returncode=None, cwd=str(record.meta.get("cwd") or "/"))
        except Exception as exc:  # noqa: BLE001  (a planted or damaged transcript: say so)
            done["unreadable"] = f"{path.name}: {type(exc).__name__}"
            continue
        done["tool_calls"] += int(result.get("tool_calls") or 0)
        for name, count in (result.get("tool_usage") or {}).items():
            done["tool_usage"][name] = done["tool_usage"].get(name, 0) + count
        files += [f for f in result.get("files_modified") or () if f not in files]
        done["session_id"] = result.get("session_id") or done.get("session_id")
        done["model"] = result.get("model") or done.get("model")
        usage = result.get("usage") or usage
        cost += _number(result.get("cost_usd")) or 0.0
    done["files_modified"] = files
    done["usage"] = usage
    done["cost_usd"] = round(cost, 6) if cost else None
    return done


async def recover(
    journal: Journal,
    base: Path | None,
    ledger: str | bool | None,
) -> tuple[dict[str, dict[str, Any]], int]:
    """What an earlier run of the server left: the dead runners' trees stopped
    (the sweep), every request it held queued or running marked lost (with
    what it did), the journal compacted.  Returns the requests, oldest first,
    and how many were found lost now."""
    if ledger is not False:
        # lazy: the sweep loads git and the worktree machinery only when a dead run left a worktree
        from coding_genesis._supervision.ledger import Ledger, LedgerError
        from coding_genesis._workspace.sweep import sweep

        try:
            swept = await sweep(Ledger(ledger if isinstance(ledger, str) else None))
        except (LedgerError, OSError) as exc:
            log.warning("cannot sweep the run ledger: %s", exc)
        else:
            for run in swept:
                log.warning(
                    "run %s: its runner (pid %s) died; stopped %d process(es)",
                    run.run_id,
                    run.runner_pid,
                    len(run.stopped),
                )
    past = journal.load()
    now = time.time()
    found = 0
    for key, record in past.items():
        state = record.get("state")
        if state not in ("queued", "running"):
            continue
        where = "queued (it never started)" if state == "queued" else "running"
        lost = {
            "id": key,
            "state": "lost",
            "found": now,
            "was": state,
            "reason": LOST_REASON.format(where=where),
            "done": lost_done(base, record.get("run_id")) if state == "running" else None,
        }
        journal.write(lost)
        record.update(lost, at=round(now, 3))
        found += 1
    journal.rewrite(past)
    return past, found


# -- views -------------------------------------------------------------------------


def entry_view(entry: Entry, runs: Runs) -> dict[str, Any]:
    """A request the server holds now."""
    view = {
        "id": entry.id,
        "run_id": entry.run_id,
        "source": "api",
        "state": entry.state,
        "backend": entry.backend,
        "model": entry.model,
        "prompt": entry.prompt,
        "cwd": entry.cwd,
        "accepted": entry.accepted,
        "started": entry.started,
        "finished": entry.finished,
        "position": runs.position(entry),
        "cancel_requested": entry.cancel is not None,
        **entry.summary(),
        "lost": None,
    }
    if entry.state == "finished":
        view["result"] = entry.result
    return view


def _journal_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """A request of an earlier run of the server (or one evicted from memory)."""
    summary = record.get("summary") or {}
    lost = None
    if record.get("state") == "lost":
        lost = {
            "found": record.get("found"),
            "was": record.get("was"),
            "reason": record.get("reason"),
            "done": record.get("done"),
        }
    return {
        "id": record["id"],
        "run_id": record.get("run_id"),
        "source": "api",
        "state": record.get("state") if record.get("state") in ("finished", "lost") else "lost",
        "backend": _text(record.get("backend")),
        "model": _text(record.get("model")),
        "prompt": str(record.get("prompt") or ""),
        "cwd": _text(record.get("cwd")),
        "accepted": _number(record.get("accepted")),
        "started": _number(record.get("started")),
        "finished": _number(record.get("finished")),
        "position": None,
        "cancel_requested": False,
        "status": _int(summary.get("status")),
        "error": _text(summary.get("error")),
        "category": _text(summary.get("category")),
        "duration_s": _number(summary.get("duration_s")),
        "tool_calls": _int(summary.get("tool_calls")),
        "lost": lost,
    }


def _transcript_view(record: RunRecord) -> dict[str, Any]:
    """A run recorded by anyone (``genesis run``, ``run-many``, an agent)."""
    result = record.result if isinstance(record.result, dict) else None
    ended = record.ended or {}
    lost = None
    state = "finished"
    if result is None:
        pid = record.meta.get("runner_pid")
        alive = isinstance(pid, int) and pid > 0 and _alive(pid)
        state = "running" if alive and not ended else "lost"
        if state == "lost":
            lost = {
                "found": _number(ended.get("found_ts")),
                "was": "running",
                "reason": "its runner stopped (killed or crashed) before the run finished"
                + ("; the sweep stopped its process tree" if ended else ""),
                "done": None,
            }
    failure = (result or {}).get("failure") or {}
    return {
        "id": record.run_id,
        "run_id": record.run_id,
        "source": "cli",
        "state": state,
        "backend": _text(record.meta.get("backend")),
        "model": _text(record.meta.get("model")),
        "prompt": prompt_head(record.meta.get("prompt")),
        "cwd": _text(record.meta.get("cwd")),
        "accepted": None,
        "started": record.started,
        "finished": None,
        "position": None,
        "cancel_requested": False,
        "status": _int((result or {}).get("status")),
        "error": _text((result or {}).get("error"))
        if not record.damaged
        else f"damaged run directory ({'; '.join(record.damaged)})",
        "category": _text(failure.get("category")) if isinstance(failure, dict) else None,
        "duration_s": _number((result or {}).get("duration_s")),
        "tool_calls": _int((result or {}).get("tool_calls")),
        "lost": lost,
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _when(view: Mapping[str, Any]) -> float:
    return float(view.get("started") or view.get("accepted") or 0.0)


class History:
    """The merged history the API lists and looks up."""

    def __init__(self, runs: Runs, past: dict[str, dict[str, Any]], base: Path | None) -> None:
        self.runs = runs
        #: The journal's requests of earlier runs of the server (by request id).
        self.past = past
        self.base = base
        self._past_run_ids = {
            str(r["run_id"]): key for key, r in past.items() if isinstance(r.get("run_id"), str)
        }

    def _api_ids(self) -> set[str]:
        return set(self._past_run_ids) | set(self.runs.by_run_id)

    async def listing(
        self,
        *,
        state: str | None = None,
        backend: str | None = None,
        source: str | None = None,
        failed: bool | None = None,
        since: float | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Newest first, filtered (the transcripts are read in a worker thread)."""
        views: list[dict[str, Any]] = []
        held = self.runs.entries
        for entry in held.values():
            views.append(entry_view(entry, self.runs))
        for key, record in self.past.items():
            if key not in held:
                views.append(_journal_view(record))
        if self.base is not None and source != "api":
            known = self._api_ids()
            base = self.base
            records = await anyio.to_thread.run_sync(lambda: list_runs(base))
            views += [_transcript_view(r) for r in records if r.run_id not in known]
        for view in views:
            view.pop("result", None)
        wanted = [v for v in views if _matches(v, state, backend, source, failed, since)]
        wanted.sort(key=_when, reverse=True)
        return wanted[:limit]

    def find(self, ref: str) -> dict[str, Any] | None:
        """One run by request id or run id (a CLI run: a unique prefix too), with its result."""
        entry = self.runs.entries.get(ref)
        if entry is None and ref in self.runs.by_run_id:
            entry = self.runs.entries.get(self.runs.by_run_id[ref])
        if entry is not None:
            return entry_view(entry, self.runs)
        key = ref if ref in self.past else self._past_run_ids.get(ref)
        if key is not None:
            view = _journal_view(self.past[key])
            view["result"] = self._result(view.get("run_id"))
            return view
        record = self.record(ref)
        if record is None:
            return None
        view = _transcript_view(record)
        if view["run_id"] in self._past_run_ids:
            return self.find(self._past_run_ids[view["run_id"]])
        view["result"] = record.result if isinstance(record.result, dict) else None
        return view

    def record(self, run_id: str | None) -> RunRecord | None:
        """The transcript of a run id (or a unique prefix of one)."""
        if self.base is None or not run_id:
            return None
        try:
            return find_run(self.base, run_id)
        except RunLookupError:
            return None

    def _result(self, run_id: object) -> dict[str, Any] | None:
        record = self.record(run_id if isinstance(run_id, str) else None)
        if record is None or not isinstance(record.result, dict):
            return None
        return record.result


def _matches(
    view: Mapping[str, Any],
    state: str | None,
    backend: str | None,
    source: str | None,
    failed: bool | None,
    since: float | None,
) -> bool:
    if state is not None and view["state"] != state:
        return False
    if backend is not None and view["backend"] != backend:
        return False
    if source is not None and view["source"] != source:
        return False
    if failed is not None:
        status = view.get("status")
        is_failed = view["state"] == "lost" or (status is not None and status != 0)
        if is_failed != failed:
            return False
    return not (since is not None and _when(view) < time.time() - since)
