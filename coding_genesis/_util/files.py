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

import os
import stat
from pathlib import Path

__all__ = ["FILE_FLAGS", "UnsafeDirectory", "check_base", "new_private_dir", "private_dir"]

#: Flags for a file we create and write: never through a symlink.
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


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
