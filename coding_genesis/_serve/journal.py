"""The server's journal: each run it accepted, recorded as it changes.

``<state dir>/journal.jsonl`` (0600, in a 0700 directory): one line per
change (``queued``, ``running`` with its run id, ``finished`` with a summary
of its result, ``lost``), each one ``write`` on an ``O_APPEND`` file, so a
SIGKILL loses at most the line being written.  The result itself is where
every run's is, in its transcript and the run log (one history with the
CLI); the journal knows what the transcripts cannot: which runs were queued
or in flight when the server died, and which run id each request became.

On start the journal is read back (bounded, a torn line skipped) and folded
per request; it is rewritten without the oldest requests once it holds more
than :data:`KEEP` of them.

Secrets never reach the disk: every record is redacted here, the one place
records are written, by the server's redactor (its environment and token)
and, for a record of a run or a session, by that run's own (the one its
transcripts use, which also knows the secrets of its ``env``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from coding_genesis._observers.transcript import safe_dumps
from coding_genesis._util.files import FILE_FLAGS, NotARegularFile, private_dir, read_regular
from coding_genesis._util.redact import Redactor

__all__ = ["KEEP", "Journal"]

log = logging.getLogger("coding_genesis._serve.journal")

#: Requests remembered across restarts (older ones live on in the transcripts).
KEEP = 20_000
#: The most of a journal read back.
MAX_READ = 256 << 20


class Journal:
    """Appends and folds the records of the runs a server accepted."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        #: The server's redactor: every record goes through it.
        self.redactor = redactor
        self._warned = False

    def _clean(self, record: Mapping[str, Any], redactor: Redactor | None) -> Any:
        """``record`` redacted by ``redactor`` (a run's) and the server's."""
        value = dict(record)
        if redactor is not None and redactor is not self.redactor:
            value = redactor.deep(value)
        return self.redactor.deep(value)

    def write(self, record: Mapping[str, Any], redactor: Redactor | None = None) -> None:
        """Append one record, redacted (``redactor``: the redactor of the run or
        session it is about).  Never raises: a journal that cannot be written
        is warned about once; the run goes on."""
        line = safe_dumps(self._clean({"at": round(time.time(), 3), **record}, redactor)) + b"\n"
        try:
            fd = os.open(self.path, FILE_FLAGS | os.O_APPEND | os.O_NONBLOCK, 0o600)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise NotARegularFile(f"{self.path} is not a regular file")
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot write the server's journal %s: %s", self.path, exc)

    def _lines(self) -> Iterator[dict[str, Any]]:
        try:
            data = read_regular(self.path, MAX_READ)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("cannot read the server's journal %s: %s", self.path, exc)
            return
        for line in data.splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                record = orjson.loads(line)
                if isinstance(record, dict) and isinstance(record.get("id"), str):
                    yield record

    def load(self) -> dict[str, dict[str, Any]]:
        """Every request's folded record (its changes merged), oldest first."""
        runs: dict[str, dict[str, Any]] = {}
        for record in self._lines():
            runs.setdefault(record["id"], {}).update(record)
        return runs

    def rewrite(self, runs: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the journal by ``runs``' folded records (the newest
        :data:`KEEP`), atomically."""
        kept = list(runs.values())[-KEEP:]
        private_dir(self.path.parent)
        tmp = self.path.with_name(self.path.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, FILE_FLAGS | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=False) as fh:
                for record in kept:  # an older journal's records are redacted too
                    fh.write(safe_dumps(self._clean(record, None)) + b"\n")
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
