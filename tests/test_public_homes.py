"""Every public name reports a public home, and no user-facing text names a
private path (docs/architecture.md, "The public line").

A name defined in a private module has its ``__module__`` rewritten to
``coding_genesis`` (``_util/homes.py``): ``help()``, tracebacks and pickle name
the public home, and pickle finds the class again through the package's lazy
``__getattr__`` (Ray ships results and options by pickle).
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import re
from pathlib import Path

import pytest

import coding_genesis
from coding_genesis import (
    Budget,
    RetryPolicy,
    RunSpec,
    StopReason,
    SupervisorConfig,
    VirtualClock,
)

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = re.compile(r"coding_genesis\._[a-z][\w.]*")
#: The public modules, whose docstrings a user reads (``help()``, the API pages).
PUBLIC_MODULES = [
    "agent",
    "approval",
    "backend",
    "backends",
    "backends.generic",
    "batch",
    "breaker",
    "budget",
    "config",
    "control",
    "errors",
    "events",
    "graph",
    "hooks",
    "observer",
    "options",
    "pool",
    "request",
    "result",
    "retry",
    "run_events",
    "session",
    "status",
    "testing",
    "testing.acp",
    "tools",
    "usage",
]


def _public_objects() -> list[tuple[str, object]]:
    return [(name, getattr(coding_genesis, name)) for name in coding_genesis.__all__]


@pytest.mark.parametrize(("name", "obj"), _public_objects(), ids=lambda v: str(v)[:40])
def test_every_public_name_reports_a_public_home(name: str, obj: object) -> None:
    home = getattr(obj, "__module__", None)
    if isinstance(home, str):
        assert not PRIVATE.match(home), f"{name}.__module__ is {home}"


CLASSES = [(n, o) for n, o in _public_objects() if inspect.isclass(o)]


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[n for n, _ in CLASSES])
def test_each_public_class_pickles_as_itself(name: str, cls: type) -> None:
    assert pickle.loads(pickle.dumps(cls)) is cls


@pytest.mark.parametrize(
    "value",
    [
        StopReason.TIMEOUT,
        SupervisorConfig(timeout=7.0),
        VirtualClock(),
        RetryPolicy.parse(3),
        Budget(max_cost_usd=1, per_run=True),
        RunSpec(prompt="hi", backend="failer", timeout=5),
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_of_rewritten_and_public_classes_round_trip(value: object) -> None:
    copy = pickle.loads(pickle.dumps(value))
    assert type(copy) is type(value)
    if not isinstance(value, VirtualClock | Budget):
        assert copy == value
    if isinstance(value, Budget):
        assert isinstance(copy, Budget) and copy.describe() == value.describe()


def _docstrings() -> list[tuple[str, str]]:
    found = []
    for short in PUBLIC_MODULES:
        module = importlib.import_module(f"coding_genesis.{short}")
        objects: list[tuple[str, object]] = [(short, module)]
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            objects.append((f"{short}.{name}", value))
            if inspect.isclass(value):
                objects += [
                    (f"{short}.{name}.{a}", m)
                    for a, m in vars(value).items()
                    if not a.startswith("_")
                ]
        for where, obj in objects:
            doc = (
                obj.__doc__
                if isinstance(obj, property) or callable(obj) or inspect.ismodule(obj)
                else None
            )
            if isinstance(doc, str):
                found.append((where, doc))
    return found


def test_no_public_docstring_names_a_private_path() -> None:
    named = [(where, PRIVATE.findall(doc)) for where, doc in _docstrings()]
    assert len(named) > 300
    assert not [(where, paths) for where, paths in named if paths]


def test_no_page_of_the_users_docs_names_a_private_path() -> None:
    """This architecture page is for maintainers; a ``:::`` line is a directive to
    the site's builder, not text a reader sees."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    found = []
    for page in pages:
        if page.name == "architecture.md":
            continue
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if not line.startswith(":::") and PRIVATE.search(line):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
