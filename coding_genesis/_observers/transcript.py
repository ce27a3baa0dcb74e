"""Run transcripts: one directory per run, written while the run goes.

Layout of ``<base>/<run_id>/``::

    meta.json      who, what, where, when (written when the run starts)
    stdout.jsonl   the CLI's stdout bytes as received, lines the parser skipped included
                   (``stdout-2.jsonl``, ... for further attempts of the same run)
    events.jsonl   the runner's own events (``Event.to_dict()``: state, run_started,
                   attempt, run_finished), one per line
    stdin.jsonl    what we wrote on a live CLI's stdin (a session's turn, a run with
                   an approver): prompts, control requests, approval answers
    stderr.txt     the CLI's stderr tail (at the end)
    result.json    the response dict (at the end; status 130 when cancelled)

A live session also has a directory of its own, ``<base>/<session key>/``
(``meta.json`` with ``"kind": "session"``): ``stdout.jsonl`` and
``stdin.jsonl`` hold what was said outside its turns (the opening handshake,
what came between turns), and ``session.json`` its summary (its turns' run
ids in order, usage, cost) once it closed.  Each turn's ``meta.json`` names
its ``session``, ``turn`` and ``trigger``.

The raw stdout is the record of what the CLI said: one ``write`` per chunk
read, before the chunk is decoded.  The normalized events are not written a
second time; :meth:`RunRecord.events` derives them from the stdout files
through the same :class:`~coding_genesis._pipeline.decode.Decoder` a live run and
``replay`` use, and puts each attempt's events after its ``run_started``
(they carry that event's ``seq`` and a time estimated within the attempt:
see :mod:`coding_genesis._observers.records`).  The runner's own events are
written as they happen, so a crash of the runner loses at most the line being
parsed.  A run directory without ``result.json`` is a run that never finished
(the runner was killed).  (Transcripts written before this layout, without
``"layout": 2`` in ``meta.json``, hold every event in ``events.jsonl`` and
are read as they are.)

Secrets: values of secret-looking environment variables (see
:mod:`coding_genesis._util.redact`) are replaced by ``[REDACTED]`` everywhere,
raw stdout included.  That is the one way ``stdout.jsonl`` may differ from
the bytes received.  To catch a secret split across two reads, raw stdout is
then written line by line: an unfinished line waits for its newline (beyond
1 MiB, all but its last ``len(longest secret) - 1`` bytes are written); when a
secret holds a newline, the last ``len(that secret) - 1`` bytes wait for the
next read even after a newline, so a secret split across reads or lines is
masked whole.  A crash loses at most the last, unfinished line (and those bytes).  A secret is also found in the forms
JSON escapes it to, and written with any other legal JSON escape (``\\/``,
``\\u0026``, every character ``\\u``-escaped): bytes holding a ``\\u`` or ``\\/``
escape are searched with a pattern of every JSON encoding of it and its raw
bytes are masked, the rest of the line kept byte for byte (see :mod:`coding_genesis._util.redact`).  With no secret in the
environment every chunk is written through untouched as it arrives.

Writing never breaks a run: the first ``OSError`` (disk full, permissions)
turns the transcript off for that run and is reported as a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from coding_genesis._util.clock import iso_utc
from coding_genesis._util.files import FILE_FLAGS, UnsafeDirectory, new_private_dir, private_dir
from coding_genesis._util.homes import public
from coding_genesis._util.numbers import INT64_RANGE
from coding_genesis._util.parser import MAX_DEPTH, TOO_DEEP, bound_depth
from coding_genesis._util.redact import Redactor
from coding_genesis._util.version import version
from coding_genesis.events import Event, EventKind
from coding_genesis.observer import Observer, RunInfo, RunObserver
from coding_genesis.prompts import described
from coding_genesis.run_events import LIFECYCLE_KINDS

if TYPE_CHECKING:
    from coding_genesis.events import Translator

__all__ = [
    "Transcript",
    "TranscriptObserver",
    "now_meta",
    "safe_dumps",
]

log = logging.getLogger("coding_genesis._observers.transcript")


META = "meta.json"
EVENTS = "events.jsonl"
#: Deltas are never event records: the whole message is (stdout keeps every byte).
_PIECES = frozenset({EventKind.TEXT_DELTA, EventKind.THOUGHT_DELTA})
STDIN = "stdin.jsonl"
STDERR = "stderr.txt"
RESULT = "result.json"
#: A live session's own directory: its summary, written when it closes.
SESSION = "session.json"
#: Written by the run ledger's sweep into a run whose runner died (see coding_genesis._supervision.ledger).
ENDED = "ended.json"
_DUMPS_OPTS = orjson.OPT_NON_STR_KEYS
#: ``meta.json``'s ``layout``: events.jsonl holds the runner's own events only.
LAYOUT = 2
#: Longest unfinished line held back for redaction before it is written in pieces.
_MAX_HOLD = 1 << 20
#: Raw stdout recorded per run by default (``AgentConfig.transcript_max_bytes``).
DEFAULT_MAX_RAW_BYTES = 1 << 30


def safe_dumps(obj: Any, option: int = _DUMPS_OPTS) -> bytes:
    """JSON that never fails: text that is not valid Unicode (a lone surrogate
    in a prompt, say) is stored with U+FFFD in its place, an integer beyond
    64 bits as its decimal text, and containers
    nested deeper than :data:`~coding_genesis._util.parser.MAX_DEPTH` (orjson stops
    at 254 levels) are replaced by a marker."""
    try:
        return orjson.dumps(obj, default=str, option=option)
    except (TypeError, ValueError):
        pass
    try:
        return orjson.dumps(_valid_text(bound_depth(obj)), default=str, option=option)
    except (TypeError, ValueError, RecursionError):
        return orjson.dumps({"unserialisable": type(obj).__name__}, option=option)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if type(value) is int and not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
        return str(value)  # orjson writes 64-bit integers only
    if isinstance(value, Mapping | list | tuple) and depth >= 2 * MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, Mapping):
        return {str(_valid_text(k)): _valid_text(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_valid_text(v, depth + 1) for v in value]
    return value


class _RawFile:
    """One attempt's stdout, written as it arrives (secrets masked, see module doc)."""

    __slots__ = ("_carry", "_escaped", "_fd", "_keep", "_keep_nl", "_pattern", "_secrets")

    def __init__(self, dir_fd: int, name: str, redactor: Redactor) -> None:
        self._fd = os.open(name, FILE_FLAGS | os.O_APPEND | os.O_EXCL, 0o600, dir_fd=dir_fd)
        raw = redactor.raw_pattern()
        self._pattern: re.Pattern[bytes] | None = raw[0] if raw else None
        # A secret fully ``\\u``-escaped is 6 bytes per byte of it.
        self._keep = 6 * raw[1] - 1 if raw else 0
        self._escaped = redactor.escaped_spans
        self._secrets: tuple[bytes, ...] = raw[2] if raw else ()
        self._keep_nl = max((len(s) - 1 for s in self._secrets if b"\n" in s), default=0)
        self._carry = b""

    def write(self, chunk: bytes) -> None:
        pattern = self._pattern
        if pattern is None:
            _write_all(self._fd, chunk)
            return
        # Complete lines go out masked; the unfinished last line waits for its
        # newline (a very long one only keeps what a secret could span).
        data = self._carry + chunk if self._carry else chunk
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > _MAX_HOLD:
            cut = max(cut, len(data) - self._keep)
        if self._keep_nl:
            # A secret with a newline in it can span lines: the last bytes it
            # could start in wait for the next read, so it is masked whole.
            cut = max(min(cut, len(data) - self._keep_nl), 0)
        # Only a secret that starts before the cut is masked now (one after it
        # is found in the next write): decode no further than it can reach.
        spans = self._spans(data, cut + self._keep + 1)
        if not spans:
            _write_all(self._fd, data[:cut])
            self._carry = data[cut:]
            return
        out: list[bytes] = []
        pos = 0
        for start, end in spans:
            if start >= cut:
                break
            if end <= pos:  # inside a span already masked
                continue
            out.append(data[pos:start] if start > pos else b"")
            out.append(b"[REDACTED]")
            pos = end
            cut = max(cut, end)
        out.append(data[pos:cut])
        self._carry = data[cut:]
        _write_all(self._fd, b"".join(out))

    def _spans(self, data: bytes, end: int | None = None) -> list[tuple[int, int]]:
        """The spans of ``data`` to mask, in order: each form of a secret
        (verbatim, as JSON escapes it), and, where ``data[:end]`` holds a
        ``\\u`` or ``\\/`` escape, a secret written with any escapes there
        (see ``Redactor.escaped_spans``; ``end`` bounds that pass, so an
        unfinished line held across many reads is not searched again at each)."""
        spans: list[tuple[int, int]] = []
        if any(secret in data for secret in self._secrets):
            assert self._pattern is not None
            spans = [match.span() for match in self._pattern.finditer(data)]
        end = len(data) if end is None else min(end, len(data))
        if _ESCAPES_TO_DECODE(data, 0, end) is not None:
            escaped = self._escaped(data[:end] if end < len(data) else data)
            if escaped:
                spans = sorted(spans + escaped)
        return spans

    def close(self) -> None:
        try:
            if self._carry:
                data, self._carry = self._carry, b""
                out: list[bytes] = []
                pos = 0
                for start, end in self._spans(data):
                    if end <= pos:
                        continue
                    out.append(data[pos:start] if start > pos else b"")
                    out.append(b"[REDACTED]")
                    pos = end
                out.append(data[pos:])
                _write_all(self._fd, b"".join(out))
        finally:
            os.close(self._fd)


#: Whether bytes hold an escape the fixed forms of a secret do not cover: one
#: regex pass (two ``in`` tests for these two-byte needles cost 4x as much,
#: ``\\`` being frequent in JSON text).
_ESCAPES_TO_DECODE = re.compile(rb"\\[u/]").search


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Transcript:
    """Writes one run's directory.  Every method is safe to call after a
    write error (it then does nothing) and never raises ``OSError``."""

    def __init__(
        self,
        base: Path,
        run_id: str,
        redactor: Redactor,
        *,
        max_raw_bytes: int = DEFAULT_MAX_RAW_BYTES,
        translator: Callable[[], Translator] | None = None,
    ) -> None:
        self.run_id = run_id
        #: A fresh translator of the run's backend: decodes the stdout past the
        #: raw cap, whose events are then written to events.jsonl (the stdout
        #: that holds them is not kept).
        self._translator = translator
        self._overflow: Any = None
        #: Raw stdout recorded at most (all attempts together); past it the
        #: run goes on and the response's warnings say where recording stopped.
        self.max_raw_bytes = max_raw_bytes
        self._raw_bytes = 0
        #: Where raw recording stopped (bytes of stdout received), if it did.
        self.raw_stopped_at: int | None = None
        self.path = base / run_id
        self._redactor = redactor
        self._raw: _RawFile | None = None
        self._stdin: _RawFile | None = None
        self._attempts = 0
        self._events: Any = None
        self._pending: list[bytes] = []
        self._dir_fd: int | None = None
        #: First write error, if any (the transcript is off from then on).
        self.error: str | None = None
        try:
            # Every level we create is 0700; the base must be safe to write
            # in; the run's files are opened relative to its open directory.
            private_dir(base)
            self._dir_fd = new_private_dir(self.path)
            fd = os.open(EVENTS, FILE_FLAGS | os.O_APPEND | os.O_EXCL, 0o600, dir_fd=self._dir_fd)
            self._events = os.fdopen(fd, "ab")
        except (OSError, ValueError) as exc:
            self._fail(exc)

    @property
    def ok(self) -> bool:
        return self.error is None

    def _fail(self, exc: Exception) -> None:
        if self.error is None:
            detail = exc if isinstance(exc, UnsafeDirectory) else None
            self.error = (
                f"transcript {self.path}: {detail or getattr(exc, 'strerror', None) or exc}"
            )
            log.warning("transcript disabled for this run: %s", self.error)
        self._close_files()

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        if self.error is None:
            self._write_json(META, {"run_id": self.run_id, **self._redactor.deep(dict(meta))})

    def new_attempt(self) -> None:
        """A fresh stdout file for the next attempt of the run."""
        if self.error is not None:
            return
        if self.raw_stopped_at is not None:
            self._end_overflow()
            self._overflow = self._overflow_decoder()
            return
        self._close_raw()
        self._attempts += 1
        name = "stdout.jsonl" if self._attempts == 1 else f"stdout-{self._attempts}.jsonl"
        try:
            assert self._dir_fd is not None
            self._raw = _RawFile(self._dir_fd, name, self._redactor)
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def raw(self, chunk: bytes) -> None:
        raw = self._raw
        if raw is None:
            if self._overflow is not None:
                self._overflow.feed(chunk)
            return
        room = self.max_raw_bytes - self._raw_bytes
        self._raw_bytes += len(chunk)
        if len(chunk) > room:
            # Keep whole lines up to the cap, then stop recording this run's
            # stdout; the events of the rest are decoded here and written.
            cut = chunk.rfind(b"\n", 0, max(room, 0)) + 1
            chunk, rest = chunk[:cut], chunk[cut:]
            self.raw_stopped_at = self._raw_bytes
            self._raw = None
            self._overflow = self._overflow_decoder()
            if self._overflow is not None and rest:
                self._overflow.feed(rest)
        try:
            if chunk:
                raw.write(chunk)
            if self._raw is None:
                raw.close()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _overflow_decoder(self) -> Any:
        # lazy: only a run past its raw cap decodes here
        from coding_genesis._pipeline.decode import Decoder
        from coding_genesis._pipeline.tally import RunTally

        if self._translator is None:
            return None
        try:
            translator = self._translator()
        except Exception:  # noqa: BLE001  (a plug-in translator that fails to build: the overflow is not decoded)
            return None
        return Decoder(translator, RunTally(".", None), on_event=self._overflow_event)

    def _overflow_event(self, event: Event) -> None:
        if self._events is None or event.kind in _PIECES:  # a message's pieces: its whole is kept
            return
        event.agent, event.run_id, event.seq, event.ts = "", self.run_id, 0, time.time()
        self._pending.append(safe_dumps(event.redacted(self._redactor).to_dict()))

    def _end_overflow(self) -> None:
        overflow, self._overflow = self._overflow, None
        if overflow is not None:
            overflow.feed(b"")

    @property
    def warning(self) -> str | None:
        """Where raw recording stopped, if the cap was reached."""
        if self.raw_stopped_at is None:
            return None
        return (
            f"transcript: stdout stopped being recorded after {self.max_raw_bytes} bytes "
            f"(transcript_max_bytes; the stdout chunk that crossed it ended at byte "
            f"{self.raw_stopped_at}); the run went on and its events are all recorded (those past the "
            "cap in events.jsonl)"
        )

    def event(self, event: Event) -> None:
        """Bus callback: buffer one event (flushed by :meth:`flush`)."""
        if self._events is not None:
            self._pending.append(safe_dumps(event.to_dict()))
            if event.kind is EventKind.RUN_STARTED:
                # Written before any stdout of the attempt: the derived events
                # of a run whose runner dies are found after it.
                self.flush()

    def flush(self) -> None:
        """Write the buffered events (called after every stdout chunk)."""
        if not self._pending or self._events is None:
            return
        lines = self._pending
        self._pending = []
        try:
            self._events.write(b"\n".join(lines) + b"\n")
            self._events.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def finish(self, result: Mapping[str, Any]) -> None:
        """Write the stderr tail and the response, then close."""
        self._end_overflow()
        self.flush()
        self._close_raw()
        if self.error is None:
            stderr = result.get("stderr_tail") or ""
            if stderr:
                text = self._redactor.text(str(stderr))
                self._write_bytes(STDERR, text.encode("utf-8", "replace"))
            self._write_json(RESULT, self._redactor.deep(dict(result)))
        self._close_files()

    def finish_session(self, summary: Mapping[str, Any]) -> None:
        """A session's directory: its summary (``session.json``), then close."""
        self.flush()
        self._close_raw()
        if self.error is None:
            self._write_json(SESSION, self._redactor.deep(dict(summary)))
        self._close_files()

    def close(self) -> None:
        self._end_overflow()
        self.flush()
        self._close_files()

    def _write_json(self, name: str, obj: Any) -> None:
        self._write_bytes(name, safe_dumps(obj, _DUMPS_OPTS | orjson.OPT_INDENT_2))

    def _write_bytes(self, name: str, data: bytes) -> None:
        """Atomic: a reader sees the old file or the whole new one.  The
        temporary file is new (``O_EXCL``), never a symlink, in the run's open
        directory."""
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        dir_fd = self._dir_fd
        try:
            assert dir_fd is not None
            fd = os.open(tmp, FILE_FLAGS | os.O_EXCL | os.O_TRUNC, 0o600, dir_fd=dir_fd)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _close_raw(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            try:
                raw.close()
            except (OSError, ValueError) as exc:
                self._fail(exc)

    def sent(self, data: bytes) -> None:
        """A line we wrote on a live CLI's stdin (masked like stdout)."""
        if self.error is not None:
            return
        try:
            if self._stdin is None:
                assert self._dir_fd is not None
                self._stdin = _RawFile(self._dir_fd, STDIN, self._redactor)
            self._stdin.write(data)
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _close_files(self) -> None:
        self._close_raw()
        stdin, self._stdin = self._stdin, None
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()
        events, self._events = self._events, None
        if events is not None:
            with contextlib.suppress(OSError):
                events.close()
        dir_fd, self._dir_fd = self._dir_fd, None
        if dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(dir_fd)


def _parts(run: RunInfo) -> dict[str, Any]:
    """The meta's ``parts``, only where the prompt has some (else the meta is as it was)."""
    parts = run.request.parts if run.request is not None else ()
    return {"parts": [described(part) for part in parts]} if parts else {}


def now_meta(ts: float | None = None) -> dict[str, Any]:
    ts = time.time() if ts is None else ts
    return {"started_ts": ts, "started": iso_utc(ts)}


# -- the observer ------------------------------------------------------------------


class TranscriptObserver(Observer):
    """Writes one directory per run under ``base`` (a :class:`Transcript`)."""

    def __init__(self, base: str | os.PathLike[str], max_raw_bytes: int | None = None) -> None:
        self.base = Path(base)
        self.max_raw_bytes = max_raw_bytes

    def __repr__(self) -> str:
        return f"TranscriptObserver({str(self.base)!r})"

    def start(self, run: RunInfo) -> RunObserver:
        return _TranscriptRun(self.base, run, self.max_raw_bytes)

    def session_started(self, session: str, info: RunInfo) -> RunObserver:
        """The session's own directory (``<base>/<session key>``), beside its
        turns' (each turn's ``meta.json`` names the session): the opening
        exchange and what came between turns, and ``session.json`` at the end."""
        return _TranscriptRun(self.base, info, self.max_raw_bytes, kind="session")


class _TranscriptRun(RunObserver):
    __slots__ = ("_kind", "_transcript")

    #: The raw stdout is the transcript of what the CLI said; events decoded
    #: from it are derived on reading (:meth:`RunRecord.events`), not written.
    event_kinds = LIFECYCLE_KINDS | {EventKind.APPROVAL}

    def __init__(
        self, base: Path, run: RunInfo, max_raw_bytes: int | None = None, kind: str = "run"
    ) -> None:
        self._kind = kind
        transcript = Transcript(
            base,
            run.run_id,
            run.redactor,
            max_raw_bytes=max_raw_bytes or DEFAULT_MAX_RAW_BYTES,
            translator=run.translator,
        )
        self._transcript = transcript
        transcript.write_meta(
            {
                **now_meta(run.started),
                "agent": run.agent,
                "backend": run.backend,
                "cwd": run.cwd,
                "timeout": run.timeout,
                "model": run.model,
                "resume": run.resume,
                "prompt": run.prompt[:100_000],
                "runner_pid": os.getpid(),
                "version": version(),
                "layout": LAYOUT,
                "kind": kind,
                # a session's turn: its session (key) and place in it
                "session": run.session,
                "turn": run.turn or None,
                "trigger": run.trigger,
                # a prompt's images and files, an image by its size and sha256
                **_parts(run),
            }
        )
        if kind == "session":  # no run_started opens its stdout: it is open from the start
            transcript.new_attempt()

    def event(self, event: Event) -> None:
        transcript = self._transcript
        if event.kind == EventKind.RUN_STARTED:
            transcript.new_attempt()
        transcript.event(event)

    def stdout(self, chunk: bytes) -> None:
        self._transcript.raw(chunk)

    def stdin(self, data: bytes) -> None:
        self._transcript.sent(data)

    def flush(self) -> None:
        self._transcript.flush()

    def response_fields(self) -> Mapping[str, Any]:
        transcript = self._transcript
        if transcript.ok:
            warning = transcript.warning
            fields: dict[str, Any] = {"transcript": str(transcript.path)}
            if warning:
                fields["warnings"] = [warning]
            return fields
        return {"warnings": [f"transcript not written: {transcript.error}"]}

    def finish(self, response: Mapping[str, Any]) -> None:
        if self._kind == "session":
            self._transcript.finish_session(response)
        else:
            self._transcript.finish(response)


# Public names: ``from coding_genesis import ...`` (see coding_genesis._util.homes).
public(TranscriptObserver)
