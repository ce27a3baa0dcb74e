"""A run's private settings overlay (``CommandSpec.overlay``).

Some CLI settings exist only in a settings file (gemini's
``general.maxAttempts``, qwen's ``model.generationConfig.maxRetries``).  A
backend asks for such files by relative path; :func:`materialized` writes them
(0600) in a fresh directory (0700) for one run, puts that directory's path in
place of ``{overlay}`` in the command's arguments and environment values, and
removes it afterwards.  The user's own configuration is never touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator

from .backend import CommandSpec
from .errors import ConfigError

__all__ = ["OVERLAY_MARK", "materialized"]

#: Replaced by the overlay directory in ``args`` and ``env`` values.
OVERLAY_MARK = "{overlay}"


def _target(directory: str, relative: str) -> str:
    parts = relative.replace("\\", "/").split("/")
    if not relative or os.path.isabs(relative) or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(f"overlay file {relative!r} must be a plain relative path")
    return os.path.join(directory, *parts)


@contextlib.contextmanager
def materialized(spec: CommandSpec) -> Iterator[CommandSpec]:
    """``spec`` with its overlay written and ``{overlay}`` replaced; the
    directory is removed when the block ends (even on error or cancellation)."""
    if not spec.overlay:
        yield spec
        return
    directory = tempfile.mkdtemp(prefix="genesis-overlay-")  # mode 0700
    try:
        for relative, data in spec.overlay.items():
            path = _target(directory, relative)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(bytes(data))
        yield dataclasses.replace(
            spec,
            args=tuple(a.replace(OVERLAY_MARK, directory) for a in spec.args),
            env={k: v.replace(OVERLAY_MARK, directory) for k, v in spec.env.items()},
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
