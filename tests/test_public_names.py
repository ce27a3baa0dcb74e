"""The public names are listed once: ``coding_genesis._EXPORTS`` (name → module)
drives ``__all__`` and the lazy ``__getattr__``; the ``TYPE_CHECKING`` imports
that type checkers and IDEs read say the same; the version is the package's."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
from pathlib import Path

import coding_genesis

INIT = Path(coding_genesis.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.dump(node)
        assert node.module.startswith("coding_genesis."), node.module
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: write `X as X` (a re-export)"
            assert alias.name not in found, f"{alias.name} imported twice"
            found[alias.name] = node.module.removeprefix("coding_genesis.")
    return found


def test_the_type_checking_block_matches_the_one_mapping() -> None:
    assert _type_checking_imports() == coding_genesis._EXPORTS


def test_all_is_the_exported_names() -> None:
    assert sorted(coding_genesis.__all__) == sorted([*coding_genesis._EXPORTS, "__version__"])
    assert len(set(coding_genesis.__all__)) == len(coding_genesis.__all__)


def test_every_exported_name_resolves_to_the_object_its_module_defines() -> None:
    for name, module in coding_genesis._EXPORTS.items():
        value = getattr(coding_genesis, name)
        assert value is getattr(importlib.import_module(f"coding_genesis.{module}"), name)


def test_the_version_is_the_package_metadata() -> None:
    assert coding_genesis.__version__ == importlib.metadata.version("coding-genesis")
