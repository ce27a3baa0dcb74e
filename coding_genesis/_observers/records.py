"""Run transcripts read back: a run directory as ``genesis runs``, ``show``
and ``replay`` see it (the layout is :mod:`coding_genesis._observers.transcript`'s).

Every file of a run directory is opened as one another user or a hostile
CLI may have planted (``open_regular``: non-blocking, no link followed, a
regular file only, bounded): a FIFO named ``meta.json`` never hangs a
reader, a link to ``/dev/zero`` is never read.  A file there that cannot be
read so makes the record *damaged* (:attr:`RunRecord.damaged` says which and
why), and the commands say so.

Decoding a recorded stdout needs its backend's translator: the reader is
handed a ``translators`` function (backend name → a fresh translator) by its
caller, so this layer never reaches up to the backend registry.

The raw stdout holds no times.  A decoded event is given its attempt's
``seq`` (the ``run_started`` it follows: events of an attempt share it, in
the order the CLI printed them) and a time *estimated* between the attempt's
start and the next event the runner recorded (its end), by the event's line
in the stdout: in order, never before its attempt began nor after it ended.
:meth:`RunRecord.timed_events` says which times are estimated (``genesis show
--events`` marks them ``"ts_estimated": true``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from coding_genesis._observers.transcript import (
    ENDED,
    EVENTS,
    LAYOUT,
    META,
    RESULT,
    SESSION,
    STDERR,
)
from coding_genesis._pipeline.decode import Decoder
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._util.files import NotARegularFile, open_regular, read_regular
from coding_genesis.events import Event, EventKind
from coding_genesis.run_events import event_from_dict

if TYPE_CHECKING:
    from coding_genesis.events import Translator

__all__ = [
    "RunLookupError",
    "RunRecord",
    "Translators",
    "find_run",
    "list_runs",
    "read_run",
    "session_turns",
]

log = logging.getLogger("coding_genesis._observers.records")

#: Backend name → a fresh translator of that backend (raises for an unknown name).
Translators = Callable[[str], "Translator"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run directory as read back (by ``genesis runs`` / ``show`` / ``replay``)."""

    path: Path
    meta: dict[str, Any]
    #: None: the run never finished (the runner was stopped or crashed).
    result: dict[str, Any] | None
    #: Set by the sweep when it found the runner dead: ``ended_by``, ``found_ts``...
    ended: dict[str, Any] | None = None
    #: What makes the directory damaged: ``"result.json: not a regular file"``...
    #: (a file that is there but could not be read as what it should be).
    damaged: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def is_session(self) -> bool:
        """A live session's own directory (its turns are runs of their own)."""
        return self.meta.get("kind") == "session"

    def session_summary(self) -> dict[str, Any] | None:
        """A session's ``session.json`` (None: not written: still open, or its
        runner died)."""
        summary, _bad = _read_json(self.path / SESSION)
        return summary

    @property
    def started(self) -> float:
        value = self.meta.get("started_ts")
        if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e11:
            return float(value)
        try:
            return self.path.stat().st_mtime
        except OSError:
            return 0.0

    def stdout_files(self) -> list[Path]:
        return sorted(
            self.path.glob("stdout*.jsonl"),
            key=lambda p: int(p.stem.partition("-")[2] or 1),
        )

    def events(self, translators: Translators | None = None) -> Iterator[Event]:
        """The run's events, typed, in order: the runner's own (events.jsonl;
        a torn last line, or a line of an unknown type, is skipped) with each
        attempt's decoded stdout after its ``run_started`` (see the module doc),
        when ``translators`` is given."""
        for event, _estimated in self.timed_events(translators):
            yield event

    def timed_events(self, translators: Translators | None = None) -> Iterator[tuple[Event, bool]]:
        """:meth:`events`, each with whether its time is estimated (a decoded one)."""
        if self.meta.get("layout") != LAYOUT:
            for event in self.recorded_events():
                yield event, False
            return
        stdout = iter(self.stdout_files())
        started: Event | None = None
        recorded = list(self.recorded_events())  # the runner's own: a few per attempt
        for i, event in enumerate(recorded):
            yield event, False
            if event.kind is EventKind.RUN_STARTED:
                started = event
                path = next(stdout, None)
                if path is not None:
                    until = recorded[i + 1].ts if i + 1 < len(recorded) else self._ended(event)
                    for decoded in self.decoded_events(path, translators, started, until):
                        yield decoded, True
        for path in stdout:  # stdout of an attempt whose run_started was not written
            for decoded in self.decoded_events(path, translators, started):
                yield decoded, True

    def _ended(self, started: Event) -> float:
        """When the last attempt ended, as far as the directory tells (its newest file)."""
        newest = started.ts
        for path in self.stdout_files():
            with contextlib.suppress(OSError):
                newest = max(newest, path.stat().st_mtime)
        return newest

    def recorded_events(self) -> Iterator[Event]:
        """The events written to events.jsonl, typed (see :func:`event_from_dict`)."""
        fh = _open(self.path / EVENTS)
        if fh is None:
            return
        with fh:
            for line in _bounded_lines(fh, MAX_EVENT_LINE):
                with contextlib.suppress(orjson.JSONDecodeError, ValueError, TypeError):
                    obj = orjson.loads(line)
                    if isinstance(obj, dict):
                        yield event_from_dict(obj)

    def decoded_events(
        self,
        path: Path,
        translators: Translators | None,
        started: Event | None = None,
        until: float | None = None,
    ) -> Iterator[Event]:
        """The events of one recorded stdout file, decoded as a live run does
        (the run's backend, from meta.json, through ``translators``; none if it
        is unknown or no translators are given), stamped with ``started``'s
        agent, run id and seq, and a time estimated between ``started`` and
        ``until`` by their line in the file (see the module doc)."""
        if translators is None:
            return
        try:
            translator = translators(str(self.meta.get("backend")))
        except Exception:  # noqa: BLE001  (a recorded run names any backend: an unknown one is not decoded)
            log.warning(
                "run %s: unknown backend %r; stdout not decoded",
                self.run_id,
                self.meta.get("backend"),
            )
            return
        cwd = self.meta.get("cwd")
        out: list[Event] = []
        decoder = Decoder(translator, RunTally(str(cwd or "."), None), on_event=out.append)
        agent = started.agent if started is not None else str(self.meta.get("agent") or "")
        run_id = started.run_id if started is not None else self.run_id
        ts = started.ts if started is not None else self.started
        seq = started.seq if started is not None else 0
        fh = _open(path)  # a regular file only: a FIFO planted there never hangs us
        if fh is None:
            return
        try:
            with fh:
                total = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
                fh.seek(0)
                span = max(0.0, (until if until is not None else ts) - ts)
                line = 0
                while True:
                    chunk = fh.readline(1 << 20)
                    decoder.feed(chunk)
                    if chunk.endswith(b"\n"):
                        line += 1
                    at = ts + span * min(line, total) / total if total else ts
                    for event in out:
                        event.agent, event.run_id, event.seq, event.ts = agent, run_id, seq, at
                        yield event
                    out.clear()
                    if not chunk:
                        return
        except OSError:
            return

    def stderr(self) -> str:
        fh = _open(self.path / STDERR)
        if fh is None:
            return ""
        try:
            with fh:
                return fh.read(MAX_JSON_READ).decode("utf-8", "replace")
        except OSError:
            return ""

    def open_file(self, path: Path) -> io.BufferedReader | None:
        """A file of the run directory opened for reading, if it is a regular
        file (a FIFO or a link: None, never a hang)."""
        return _open(path)

    def read_stdout(self, path: Path) -> bytes:
        """One recorded stdout file whole (``OSError`` when it is no regular file)."""
        return read_regular(path, MAX_STDOUT_READ)


#: The most of meta.json / result.json that is read back (they are small;
#: a bigger one is damaged or planted, and reads as missing).
MAX_JSON_READ = 16 << 20
#: The longest events.jsonl line read back; a longer one is skipped unread.
MAX_EVENT_LINE = 64 << 20
#: The largest recorded stdout read whole (``replay``; the transcript's cap
#: is 1 GiB by default).
MAX_STDOUT_READ = 4 << 30


def _open(path: Path) -> io.BufferedReader | None:
    """``path`` opened for reading if it is a regular file (see the module
    doc), else None."""
    try:
        return os.fdopen(open_regular(path), "rb")
    except OSError:
        return None


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The object in a small JSON file, and why it is damaged (None: fine,
    or not there at all)."""
    try:
        data = read_regular(path, MAX_JSON_READ)
    except FileNotFoundError:
        return None, None
    except NotARegularFile as exc:
        reason = "too big" if "too big" in str(exc) else "not a regular file"
        return None, f"{path.name}: {reason}"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror or exc}"
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, f"{path.name}: not JSON"
    if not isinstance(obj, dict):
        return None, f"{path.name}: not a JSON object"
    return obj, None


def _bounded_lines(fh: Any, limit: int) -> Iterator[bytes]:
    """The lines of ``fh``, each read at most ``limit`` bytes at a time: a
    longer line (a sparse or planted file) is skipped, never held whole."""
    skipping = False
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        complete = line.endswith(b"\n")
        if skipping or (not complete and len(line) > limit):
            skipping = not complete
            continue
        yield line


def read_run(path: Path) -> RunRecord | None:
    """The run in ``path``; None when it has no meta.json at all.  A meta.json
    that cannot be read gives a damaged record with an empty ``meta``."""
    meta, bad_meta = _read_json(path / META)
    if meta is None and bad_meta is None:
        return None
    result, bad_result = _read_json(path / RESULT)
    ended, bad_ended = _read_json(path / ENDED)
    damaged = tuple(d for d in (bad_meta, bad_result, bad_ended) if d is not None)
    return RunRecord(path, meta or {}, result, ended, damaged)


def session_turns(base: Path, session: str) -> list[RunRecord]:
    """The recorded turns of the live session ``session`` (its key), in order."""
    turns = [r for r in list_runs(base) if r.meta.get("session") == session]
    turns.sort(key=lambda r: (r.meta.get("turn") or 0, r.started))
    return turns


def list_runs(base: Path, limit: int | None = None) -> list[RunRecord]:
    """Recorded runs under ``base``, newest first (a session's own directory
    is not a run: its turns are)."""
    try:
        entries = [p for p in base.iterdir() if p.is_dir()]
    except OSError:
        return []
    # Sort by directory mtime first (cheap), then read only what is shown.
    entries.sort(key=_mtime, reverse=True)
    runs: list[RunRecord] = []
    for path in entries:
        record = read_run(path)
        if record is not None and not record.is_session:
            runs.append(record)
    runs.sort(key=lambda r: r.started, reverse=True)
    return runs[:limit] if limit is not None else runs


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class RunLookupError(LookupError):
    """No run, or more than one, matches an id prefix."""


def find_run(base: Path, ref: str) -> RunRecord:
    """A run by id, unique id prefix, ``last`` / ``-1`` (newest), ``-2``..."""
    if ref in ("last", "latest") or (ref.startswith("-") and ref[1:].isdigit()):
        index = 1 if ref in ("last", "latest") else int(ref[1:])
        runs = list_runs(base)
        if index < 1 or index > len(runs):
            raise RunLookupError(
                f"there are {len(runs)} recorded run(s) in {base}; {ref!r} is out of range"
            )
        return runs[index - 1]
    if not ref or not re.fullmatch(r"[0-9a-fA-F]{1,64}", ref):
        raise RunLookupError(
            f"{ref!r} is not a run id: expected hex digits (a unique prefix is enough), "
            "'last', or -N for the N-th newest"
        )
    try:
        matches = [p for p in base.iterdir() if p.is_dir() and p.name.startswith(ref.lower())]
    except OSError:
        matches = []
    if not matches:
        raise RunLookupError(f"no recorded run {ref!r} in {base} (see `genesis runs`)")
    if len(matches) > 1:
        shown = ", ".join(sorted(p.name[:12] for p in matches)[:5])
        raise RunLookupError(f"{ref!r} matches {len(matches)} runs ({shown}...): give more digits")
    record = read_run(matches[0])
    if record is None or not record.meta:
        why = f" ({'; '.join(record.damaged)})" if record is not None and record.damaged else ""
        raise RunLookupError(f"{matches[0]} has no readable meta.json{why}")
    return record
