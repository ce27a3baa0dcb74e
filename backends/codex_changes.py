"""What a codex ``fileChange`` touches (the paths its approval is about), read
strictly: a shape codex 0.169 does not write is unreadable, and the request is
then denied unasked rather than guessed at."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Touched", "touched"]


#: The kinds of one file's change codex 0.169 reports (``PatchChangeKind``), and
#: the fields a change and its kind have: any other shape is not read as a write.
_CHANGE_KINDS = frozenset({"add", "delete", "update"})
_CHANGE_FIELDS = frozenset({"path", "kind", "diff"})
_KIND_FIELDS = frozenset({"type", "move_path"})


@dataclass(frozen=True, slots=True)
class Touched:
    """What one file change touches: every path (sources and destinations),
    the moves among them, or why it could not be read whole."""

    paths: tuple[str, ...] = ()
    moves: tuple[tuple[str, str], ...] = ()
    unreadable: str | None = None


def touched(changes: object, grant_root: object) -> Touched:
    """Every path a ``fileChange`` touches (each file added, changed or
    deleted; both ends of a move), and the root it asks writes under for the
    session (``grantRoot``) when it asks one; a shape codex 0.169 does not
    write is unreadable (the request is then denied, unasked)."""
    if not isinstance(changes, list):
        return Touched(unreadable="codex announced no list of changes for this file change")
    if not changes:
        return Touched(unreadable="the file change names no file")
    paths: dict[str, None] = {}  # ordered, without repeats
    moves: list[tuple[str, str]] = []
    for change in changes:
        if not isinstance(change, Mapping) or not change.keys() <= _CHANGE_FIELDS:
            return Touched(unreadable=f"a change of an unknown shape: {_shown(change)}")
        path, kind = change.get("path"), change.get("kind")
        if not isinstance(path, str) or not path:
            return Touched(unreadable=f"a change whose path is not a string: {_shown(path)}")
        if (
            not isinstance(kind, Mapping)
            or not kind.keys() <= _KIND_FIELDS
            or kind.get("type") not in _CHANGE_KINDS
        ):
            return Touched(unreadable=f"a change of an unknown kind: {_shown(kind)}")
        destination = kind.get("move_path")
        paths[path] = None
        if destination is None:
            continue
        if kind["type"] != "update" or not isinstance(destination, str) or not destination:
            return Touched(unreadable=f"a move of an unknown shape: {_shown(kind)}")
        paths[destination] = None
        moves.append((path, destination))
    if grant_root is not None:
        if not isinstance(grant_root, str) or not grant_root:
            return Touched(unreadable=f"a grantRoot that is not a path: {_shown(grant_root)}")
        paths[grant_root] = None
    return Touched(tuple(paths), tuple(moves))


def _shown(value: object) -> str:
    """A value quoted in a reason, short."""
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"
