"""Private files and directories: the one place that creates what we store.

Every directory we create is 0700, at every level we create (``Path.mkdir(
parents=True)`` makes the parents with the umask's mode: 0777 at umask 000);
every file is 0600, opened with ``os.open`` and an explicit mode, never
through a symlink.  A base directory we are given or create under must be
owned by us (or root) and must not be writable by others unless it has the
sticky bit (``/tmp``): in such a directory another user could replace or read
what we write, so it is refused with :class:`UnsafeDirectory`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
import threading
from pathlib import Path

log = logging.getLogger("coding_genesis._util.files")

__all__ = [
    "FILE_FLAGS",
    "READ_FLAGS",
    "NotARegularFile",
    "UnsafeDirectory",
    "check_base",
    "find_own_runtime_dir",
    "is_own_private",
    "new_private_dir",
    "open_own_dir",
    "open_regular",
    "own_runtime_dir",
    "owner_name",
    "private_dir",
    "read_regular",
]

#: Flags for a file we create and write: never through a symlink.
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


#: Flags for a file we read that someone else may have planted: a FIFO must
#: not block the open, a link is not followed.
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotARegularFile(OSError):
    """A file to read is a FIFO, a device, a directory, a link, too big, or
    (when asked) not private to us: reported, never read."""


def open_regular(
    path: str | os.PathLike[str],
    max_bytes: int | None = None,
    *,
    dir_fd: int | None = None,
    private: bool = False,
    follow: bool = False,
) -> int:
    """A descriptor of a regular file (of at most ``max_bytes``, when given),
    for a file someone else may have planted or replaced: opened with
    :data:`READ_FLAGS` and checked with ``fstat``, so a FIFO named like a
    record never blocks and a symlink to ``/dev/zero`` is never followed.
    ``private``: also ours and closed to others; ``follow``: a link is
    followed (a file the user named: their link is their choice, but a FIFO
    still is no file).  :class:`NotARegularFile` otherwise, or the
    ``OSError`` of the open (ELOOP for a link)."""
    flags = READ_FLAGS & ~os.O_NOFOLLOW if follow else READ_FLAGS
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"{os.fspath(path)} is not a regular file")
        if private and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            raise NotARegularFile(f"{os.fspath(path)} is not private to us")
        if max_bytes is not None and st.st_size > max_bytes:
            raise NotARegularFile(
                f"{os.fspath(path)} is too big ({st.st_size} bytes; at most {max_bytes})"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(
    path: str | os.PathLike[str],
    max_bytes: int,
    *,
    dir_fd: int | None = None,
    private: bool = False,
    follow: bool = False,
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see
    :func:`open_regular`; one that grows past the bound while read is too big
    as well)."""
    fd = open_regular(path, max_bytes, dir_fd=dir_fd, private=private, follow=follow)
    parts: list[bytes] = []
    try:
        left = max_bytes + 1
        while left > 0:
            data = os.read(fd, min(left, 1 << 20))
            if not data:
                break
            parts.append(data)
            left -= len(data)
    finally:
        os.close(fd)
    data = b"".join(parts)
    if len(data) > max_bytes:
        raise NotARegularFile(f"{os.fspath(path)} is too big (more than {max_bytes} bytes)")
    return data


class UnsafeDirectory(OSError):
    """A directory another user controls (or could): nothing is written there."""


def check_base(path: Path) -> None:
    """Refuse a directory owned by another user (root aside), or writable by
    others without the sticky bit."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{path} is not a directory")
    uid = os.getuid()
    if st.st_uid not in (uid, 0):
        raise UnsafeDirectory(
            f"refusing {path}: it is owned by uid {st.st_uid}, not by you (uid {uid}); "
            "another user could read or replace what is written there"
        )
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise UnsafeDirectory(
            f"refusing {path}: it is writable by every user and has no sticky bit "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); use a private directory"
        )


def private_dir(path: Path) -> Path:
    """``path`` as a directory to write in: the levels that are missing are
    created 0700 (each one, whatever the umask) under a checked base; an
    existing one is checked as a base (it is the user's; its mode is left)."""
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    check_base(current)
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            check_base(level)  # made meanwhile (another run of ours?): checked
            continue
        st = os.lstat(level)
        if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
            raise UnsafeDirectory(f"refusing {level}: it changed while being created")
    return path


def new_private_dir(path: Path) -> int:
    """Create ``path`` (it must not exist) 0700 and return an open descriptor
    of it (``O_DIRECTORY | O_NOFOLLOW``), checked to be ours and 0700: files
    are then opened relative to it, so nobody can swap the directory."""
    os.mkdir(path, 0o700)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise UnsafeDirectory(f"refusing {path}: it is not ours")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- per-user runtime directories in shared places ------------------------------------


def owner_name(uid: int) -> str:
    """``uid 1001 (alice)``: a directory's owner, for a warning."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def is_own_private(st: os.stat_result) -> bool:
    """A directory of ours that nobody else can read or write."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def open_own_dir(path: str | os.PathLike[str]) -> int:
    """A descriptor of ``path`` (``O_DIRECTORY | O_NOFOLLOW``: never through a
    link), checked to be ours and closed to others; :class:`UnsafeDirectory`
    (which names the owner) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise UnsafeDirectory(
                f"refusing {path}: it belongs to {owner_name(st.st_uid)}, not to us"
            )
        if st.st_mode & 0o077:
            raise UnsafeDirectory(
                f"refusing {path}: it is open to others (mode {stat.S_IMODE(st.st_mode):o})"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


_found: dict[tuple[str, str, int], Path] = {}
_found_lock = threading.Lock()


def find_own_runtime_dir(base: str, stem: str) -> Path | None:
    """:func:`own_runtime_dir` if one is there already (None: none, and none made)."""
    uid = os.getuid()
    with _found_lock:
        if (base, stem, uid) in _found:
            return _found[(base, stem, uid)]
    legacy = f"{stem}-{uid}"
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(base)):
            if name == legacy or name.startswith(f"{legacy}-"):
                with contextlib.suppress(OSError):
                    if is_own_private(os.lstat(os.path.join(base, name))):
                        return own_runtime_dir(base, stem)
    return None


def own_runtime_dir(base: str, stem: str, *, refresh: bool = False) -> Path:
    """Our private directory in the shared directory ``base`` (``/dev/shm``,
    the temp directory): a directory named ``<stem>-<uid>`` or
    ``<stem>-<uid>-<random>`` that is ours and closed to others (never
    through a link), else a new one made with a random name (``mkdtemp``,
    0700).  Anybody can make a directory with such a name, but nobody else
    can make one owned by us: one that is not ours or is open to others is
    never used, and named, with its owner, in a warning.  Found once per
    process (a listing of ``base``) and kept in memory."""
    uid = os.getuid()
    key = (base, stem, uid)
    with _found_lock:
        if not refresh and key in _found:
            return _found[key]
        legacy = f"{stem}-{uid}"
        prefix = f"{legacy}-"
        ours: list[str] = []
        try:
            names = sorted(n for n in os.listdir(base) if n == legacy or n.startswith(prefix))
        except OSError:
            names = []
        for name in names:
            try:
                st = os.lstat(os.path.join(base, name))
            except OSError:
                continue
            if is_own_private(st):
                ours.append(name)
            else:
                why = (
                    "it is not a directory"
                    if not stat.S_ISDIR(st.st_mode)
                    else (
                        f"it belongs to {owner_name(st.st_uid)}"
                        if st.st_uid != uid
                        else f"it is open to others (mode {stat.S_IMODE(st.st_mode):o})"
                    )
                )
                log.warning(
                    "refusing %s (%s): nothing there is read or used; "
                    "a private directory of ours is used instead",
                    os.path.join(base, name),
                    why,
                )
        if not ours:
            made = tempfile.mkdtemp(prefix=prefix, dir=base)
            # Two processes may have made one each meanwhile: all settle on the first.
            with contextlib.suppress(OSError):
                for name in sorted(os.listdir(base)):
                    if name.startswith(prefix) and name != os.path.basename(made):
                        path = os.path.join(base, name)
                        if is_own_private(os.lstat(path)) and name < os.path.basename(made):
                            os.rmdir(made)
                            made = path
                            break
            ours.append(os.path.basename(made))
        found = Path(base) / (legacy if legacy in ours else ours[0])
        _found[key] = found
        return found
