"""A run's private settings overlay (``CommandSpec.overlay``), for its lifetime.

The backend says which files the CLI should read (by relative path); this unit
writes them (0600) in a fresh 0700 temporary directory, puts that directory's
path where the backend wrote ``{overlay}`` (in ``args`` and ``env`` values) and
removes the whole directory when the attempt is over, however it ended
(timeout, cancellation, an exception).  The user's own configuration is never
touched.

``run_attempt`` is wrapped in :func:`overlay_scope` and calls
:func:`open_overlay` on its command; :func:`materialised` is the same as a
context manager (``genesis doctor``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import PurePosixPath
from typing import ParamSpec, TypeVar

from coding_genesis._util.files import FILE_FLAGS
from coding_genesis.backend import CommandSpec
from coding_genesis.errors import ConfigError

__all__ = [
    "OVERLAY_MARK",
    "PLACEHOLDER",
    "materialised",
    "materialized",
    "open_overlay",
    "overlay_scope",
]

PLACEHOLDER = "{overlay}"
#: The same, under the name the more-clis branch uses.
OVERLAY_MARK = PLACEHOLDER

P = ParamSpec("P")
T = TypeVar("T")

#: The overlay directories opened in the current attempt (None: outside one).
_SCOPE: ContextVar[list[str] | None] = ContextVar("genesis_overlays", default=None)


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


def _write(spec: CommandSpec) -> tuple[str, CommandSpec]:
    """The overlay directory and ``spec`` pointing at it."""
    names = [(_relative(name), data) for name, data in spec.overlay.items()]
    root = tempfile.mkdtemp(prefix="genesis-overlay-")  # 0700, ours
    try:
        os.chmod(root, 0o700)
        for rel, data in names:
            target = os.path.join(root, *rel.parts)
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            fd = os.open(target, FILE_FLAGS | os.O_EXCL | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(bytes(data))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root, dataclasses.replace(
        spec,
        args=tuple(a.replace(PLACEHOLDER, root) for a in spec.args),
        env={k: v.replace(PLACEHOLDER, root) for k, v in spec.env.items()},
    )


def overlay_scope(body: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run ``body`` with an overlay scope: every overlay :func:`open_overlay`
    writes during the call is removed when it returns, raises or is cancelled."""

    @functools.wraps(body)
    async def scoped(*args: P.args, **kwargs: P.kwargs) -> T:
        opened: list[str] = []
        token = _SCOPE.set(opened)
        try:
            return await body(*args, **kwargs)
        finally:
            _SCOPE.reset(token)
            for root in opened:
                shutil.rmtree(root, ignore_errors=True)

    return scoped


def open_overlay(spec: CommandSpec) -> CommandSpec:
    """``spec`` with its overlay written and ``{overlay}`` replaced, removed at
    the end of the enclosing :func:`overlay_scope`.  A spec without an overlay
    is returned as is."""
    if not spec.overlay:
        return spec
    opened = _SCOPE.get()
    if opened is None:
        raise RuntimeError("open_overlay() outside an overlay_scope: nothing would remove it")
    root, ready = _write(spec)
    opened.append(root)
    return ready


@contextmanager
def materialised(spec: CommandSpec) -> Iterator[CommandSpec]:
    """:func:`open_overlay` as a context manager: the directory is removed on exit."""
    if not spec.overlay:
        yield spec
        return
    root, ready = _write(spec)
    try:
        yield ready
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: The same, under the name the more-clis branch uses.
materialized = materialised
