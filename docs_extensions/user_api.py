"""The API reference for users: a griffe extension mkdocstrings runs (``mkdocs.yml``).

* **Sphinx roles render as links.**  Docstrings keep their roles (``:meth:`Session.send```,
  ``:class:`~coding_genesis.control.ControlProtocol```), which read well in ``help()``;
  on the site each becomes a cross-reference (autorefs) to the object's section, its
  text the name as written (``~``: the last part; ``<target>``: the title given).  A
  target in a private module (``coding_genesis._...``) links to where the package
  exports it, or is plain code: no private path is ever shown.
* **Internals are left out.**  A public module's page shows what its ``__all__`` names
  (not its logger, not the helpers it imports), minus the paths listed in ``hide``:
  names other modules of the package need, not the users.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: ``:role:`text```, ``:role:`~path```, ``:role:`title <path>```.
_ROLE = re.compile(
    r":(?:py:)?(?P<role>meth|class|mod|func|data|attr|exc|obj|const):"
    r"`(?P<tilde>~?)(?P<text>[^`<]*?)\s*(?:<(?P<target>[^`>]+)>)?`"
)


def _private(path: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in path.split("."))


class UserAPI(griffe.Extension):
    """See the module's docstring; ``hide``: dotted paths of internals to leave out."""

    def __init__(self, hide: list[str] | None = None) -> None:
        super().__init__()
        self.hide = set(hide or ())

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._exported = self._exports(pkg)
        self._walk(pkg, pkg)

    @staticmethod
    def _exports(pkg: griffe.Module) -> dict[str, str]:
        """Where the package exports what a private module defines: its path -> ``pkg.NAME``."""
        found: dict[str, str] = {}
        for name, member in pkg.members.items():
            if isinstance(member, griffe.Alias) and not name.startswith("_"):
                found[member.target_path] = f"{pkg.path}.{name}"
        return found

    def _walk(self, obj: griffe.Object, pkg: griffe.Module) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(lambda m: self._link(m, obj), obj.docstring.value)
        if obj.is_module and obj is not pkg and not _private(obj.path):
            self._trim(obj)  # type: ignore[arg-type]
        for name, member in list(obj.members.items()):
            if member.is_alias:
                continue
            if member.path in self.hide:
                obj.del_member(name)
                continue
            self._walk(member, pkg)  # type: ignore[arg-type]

    @staticmethod
    def _trim(module: griffe.Module) -> None:
        exports = module.exports
        if exports is None:
            return
        named = {e if isinstance(e, str) else e.name for e in exports}
        for name, member in list(module.members.items()):
            if name not in named and (member.is_alias or not member.is_module):
                module.del_member(name)

    def _target(self, text: str, obj: griffe.Object, role: str) -> str | None:
        """The full path ``text`` names, seen from ``obj`` (None: not found)."""
        name = text.rstrip("()")
        if name.startswith("."):  # relative to the object's module (or its package)
            module = obj.module
            for base in (module.path, module.parent.path if module.parent else ""):
                relative = f"{base}{name}" if base else name.lstrip(".")
                if self._find(obj, relative) is not None:
                    return relative
            return None
        head, _, rest = name.partition(".")
        path: str | None
        try:
            path = obj.resolve(head) if obj.parent is not None or obj.is_module else head
        except (griffe.NameResolutionError, ValueError):
            path = head if head == obj.package.name else None
        if path is None:
            return None
        return f"{path}.{rest}" if rest else path

    @staticmethod
    def _find(obj: griffe.Object, path: str) -> griffe.Object | griffe.Alias | None:
        try:
            found: griffe.Object | griffe.Alias = obj.modules_collection.get_member(path)
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        return found

    def _link(self, match: re.Match[str], obj: griffe.Object) -> str:
        text, target = match["text"].strip(), match["target"]
        path = target.strip() if target else self._target(text.lstrip("~"), obj, match["role"])
        if target:
            title = text
        elif match["tilde"] or _private(text):
            title = text.rsplit(".", 1)[-1]
        else:
            title = text
        if path is not None and _private(path):
            found = self._find(obj, path)
            canonical = found.canonical_path if found is not None else path
            path = self._exported.get(canonical)
        if not title or _private(title):
            title = title.rsplit(".", 1)[-1] if title else (path or text).rsplit(".", 1)[-1]
        if path is None or path in self.hide:
            return f"`{title}`"
        return f'<autoref identifier="{path}" optional><code>{title}</code></autoref>'
