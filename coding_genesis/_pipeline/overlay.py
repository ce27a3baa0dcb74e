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

A runner killed by SIGKILL runs no ``finally``: so the directory's name
carries the run's marker (``genesis-overlay-<marker>-XXXXXXXX``) and the run
wiring records its path in the run's ledger record as soon as it exists
(``on_open``); the sweep of a dead runner's record removes it
(:func:`is_own_overlay` says which directory may be removed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import PurePosixPath
from typing import ParamSpec, TypeVar

from coding_genesis._util.files import FILE_FLAGS
from coding_genesis.errors import ConfigError
from coding_genesis.request import CommandSpec

__all__ = [
    "OVERLAY_MARK",
    "OVERLAY_PREFIX",
    "PLACEHOLDER",
    "is_own_overlay",
    "materialised",
    "materialized",
    "open_overlay",
    "overlay_scope",
    "overlays",
]

PLACEHOLDER = "{overlay}"
#: The start of every overlay directory's name (in the temp directory).
OVERLAY_PREFIX = "genesis-overlay-"
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


def _write(
    spec: CommandSpec, tag: str = "", on_open: Callable[[str], object] | None = None
) -> tuple[str, CommandSpec]:
    """The overlay directory and ``spec`` pointing at it; ``tag`` (the run's
    marker) goes into its name, ``on_open`` hears its path once it exists."""
    names = [(_relative(name), data) for name, data in spec.overlay.items()]
    prefix = f"{OVERLAY_PREFIX}{tag}-" if tag else OVERLAY_PREFIX
    root = tempfile.mkdtemp(prefix=prefix)  # 0700, ours
    try:
        os.chmod(root, 0o700)
        if on_open is not None:
            on_open(root)
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
        async with overlays():
            return await body(*args, **kwargs)

    return scoped


@contextlib.asynccontextmanager
async def overlays() -> AsyncIterator[None]:
    """An overlay scope for the body (a live session's: its overlay lives as
    long as the session): see :func:`overlay_scope`."""
    opened: list[str] = []
    token = _SCOPE.set(opened)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        for root in opened:
            shutil.rmtree(root, ignore_errors=True)


def open_overlay(
    spec: CommandSpec, *, tag: str = "", on_open: Callable[[str], object] | None = None
) -> CommandSpec:
    """``spec`` with its overlay written and ``{overlay}`` replaced, removed at
    the end of the enclosing :func:`overlay_scope`.  A spec without an overlay
    is returned as is.  ``tag``: the run's marker, put in the directory's name;
    ``on_open``: told the directory's path before anything is written in it
    (the run records it in its ledger record, for the sweep)."""
    if not spec.overlay:
        return spec
    opened = _SCOPE.get()
    if opened is None:
        raise RuntimeError("open_overlay() outside an overlay_scope: nothing would remove it")
    root, ready = _write(spec, tag, on_open)
    opened.append(root)
    return ready


def is_own_overlay(path: str, tag: str) -> str | None:
    """Why ``path`` may not be removed as the overlay of the run ``tag``
    (None: it may): it must sit directly in the temp directory, be named
    ``genesis-overlay-<tag>-...``, and be a directory (not a link) of ours
    closed to others, as :func:`tempfile.mkdtemp` made it."""
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
        return "not an absolute path"
    parent, name = os.path.split(os.path.normpath(path))
    if os.path.realpath(parent) != os.path.realpath(tempfile.gettempdir()):
        return "not in the temp directory"
    if not tag or not name.startswith(f"{OVERLAY_PREFIX}{tag}-"):
        return "not named for its run"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    except OSError as exc:
        return str(exc)
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory (a link, a file)"
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return "not a private directory of ours"
    return None


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
