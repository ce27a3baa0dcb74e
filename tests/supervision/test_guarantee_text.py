"""The supervision guarantee is a promise users read (docs/supervision.md
quotes it from the docstring of :mod:`coding_genesis._supervision.process`):
a refactoring of the loop must not reword it by accident.  Changing it on
purpose means changing this pin in the same commit, and saying why."""

from __future__ import annotations

import hashlib

from coding_genesis._supervision import process

#: sha256 of the module docstring as of commit 7268075 (unchanged since).
GUARANTEE_SHA256 = "2199b94a560f2f96dbfbd027af1ecf81b9e0e94e9fe530b2e49b41dabe7ec795"


def test_the_guarantee_docstring_is_byte_identical() -> None:
    doc = process.__doc__
    assert doc is not None
    assert hashlib.sha256(doc.encode()).hexdigest() == GUARANTEE_SHA256
