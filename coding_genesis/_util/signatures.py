"""Signatures that show what ``**keywords`` stand for.

An entry point typed ``**options: Unpack[SomeTypedDict]`` is checked by type
checkers key by key, but ``inspect.signature`` (``help()``, notebooks, IDEs
that read it) would show one opaque ``**options``.  :func:`show_keywords`
sets the function's ``__signature__`` to the keyword-only parameters the
keywords stand for, derived from the same definition, never copied.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, ForwardRef, ParamSpec, TypeVar

__all__ = ["blocking_twin", "keyword_parameters", "show_keywords"]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
T = TypeVar("T")


def keyword_parameters(
    annotations: Mapping[str, object], defaults: Mapping[str, object] | object = None
) -> list[inspect.Parameter]:
    """Keyword-only parameters named and typed by ``annotations`` (a TypedDict's),
    each with its default (one value for all, or a mapping by name)."""
    parameters = []
    for name, hint in annotations.items():
        text = hint.__forward_arg__ if isinstance(hint, ForwardRef) else hint
        default = defaults.get(name) if isinstance(defaults, Mapping) else defaults
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=text
            )
        )
    return parameters


def show_keywords(keywords: Iterable[inspect.Parameter]) -> Callable[[F], F]:
    """Decorator: ``**keywords`` of the function shown as these parameters."""
    shown = list(keywords)

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        func.__signature__ = signature.replace(parameters=[*kept, *shown])  # type: ignore[attr-defined]
        return func

    return decorate


def blocking_twin(
    coroutine_function: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[[Callable[..., T]], Callable[P, T]]:
    """Decorator: the blocking version of ``coroutine_function`` takes its
    parameters, declared once (for type checkers and ``inspect.signature``)."""

    def decorate(func: Callable[..., T]) -> Callable[P, T]:
        func.__signature__ = inspect.signature(coroutine_function)  # type: ignore[attr-defined]
        return func

    return decorate
