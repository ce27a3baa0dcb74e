"""Every installed backend's name, for ``genesis run --help`` and ``doctor``,
found without importing the backends (the help must stay light): the built-in
names are read from ``backends/__init__.py``'s ``_REGISTRY`` table, the
plug-ins' from their entry points."""

from __future__ import annotations

import ast
import importlib.util
from importlib.metadata import entry_points

__all__ = ["ENTRY_POINT_GROUP", "all_names", "builtin_names"]

#: The same as ``coding_genesis.backend.ENTRY_POINT_GROUP`` (a test keeps them equal).
ENTRY_POINT_GROUP = "coding_genesis.backends"


def builtin_names() -> list[str]:
    """The keys of the built-in ``_REGISTRY`` table, read without importing it."""
    spec = importlib.util.find_spec("coding_genesis.backends")
    origin = spec.origin if spec is not None else None
    if not origin:
        return []
    try:
        with open(origin, encoding="utf-8") as file:
            tree = ast.parse(file.read(), origin)
    except (OSError, SyntaxError):
        return []
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Name)
            and target.id == "_REGISTRY"
            and isinstance(value, ast.Dict)
        ):
            return sorted(
                k.value
                for k in value.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
    return []


def all_names() -> list[str]:
    """Built-in and installed plug-in backends (not those registered in code)."""
    return sorted({*builtin_names(), *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
