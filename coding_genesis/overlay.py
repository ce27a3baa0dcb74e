"""A run's private settings overlay (``CommandSpec.overlay``), for its lifetime.

The backend says which files the CLI should read (by relative path); this unit
writes them (0600) in a fresh 0700 temporary directory, puts that directory's
path where the backend wrote ``{overlay}`` (in ``args`` and ``env`` values) and
removes the whole directory when the run is over, however it ended (timeout,
cancellation, an exception).  The user's own configuration is never touched.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from .backend import CommandSpec
from .errors import ConfigError
from .files import FILE_FLAGS

__all__ = ["PLACEHOLDER", "materialised"]

PLACEHOLDER = "{overlay}"


def _relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (
        not name
        or "\0" in name
        or path.is_absolute()
        or any(part in ("..", "") for part in path.parts)
        or not path.parts
    ):
        raise ConfigError(f"overlay file name {name!r} must be a relative path inside the overlay")
    return path


@contextmanager
def materialised(spec: CommandSpec) -> Iterator[CommandSpec]:
    """``spec`` with its overlay written and ``{overlay}`` replaced; the
    directory is removed on exit.  A spec without an overlay is returned as is."""
    if not spec.overlay:
        yield spec
        return
    names = [(_relative(name), data) for name, data in spec.overlay.items()]
    root = tempfile.mkdtemp(prefix="genesis-overlay-")  # 0700, ours
    try:
        os.chmod(root, 0o700)
        for rel, data in names:
            target = os.path.join(root, *rel.parts)
            parent = os.path.dirname(target)
            os.makedirs(parent, mode=0o700, exist_ok=True)
            fd = os.open(target, FILE_FLAGS | os.O_EXCL | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(bytes(data))
        yield dataclasses.replace(
            spec,
            args=tuple(a.replace(PLACEHOLDER, root) for a in spec.args),
            env={k: v.replace(PLACEHOLDER, root) for k, v in spec.env.items()},
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
