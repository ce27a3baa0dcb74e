"""A small JSON Schema (draft-07) checker for the generated protocol schemas in
``backends/schemas/``: the keywords those files use (``$ref`` to ``#/definitions``
or ``#/$defs``,
``type``, ``const``, ``enum``, ``required``, ``properties``, ``additionalProperties``,
``items``, ``anyOf``, ``oneOf``, ``allOf``).  ``jsonschema`` is not a
dependency; ``format`` and number bounds are not checked."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["load", "problems"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


def load(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return type(value) is int
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES.get(name, ()))


def problems(
    schema: Any, value: Any, root: Mapping[str, Any] | None = None, at: str = "$"
) -> list[str]:
    """Why ``value`` does not match ``schema`` (``root``: the file holding its
    definitions); empty when it matches."""
    root = schema if root is None else root
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{at}: nothing is allowed here"]
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]  # #/definitions/X or #/$defs/X
        found = problems((root.get("definitions") or root["$defs"])[name], value, root, at)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return found + (problems(rest, value, root, at) if rest else [])
    out: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, name) for name in names):
            return [f"{at}: {value!r:.80} is not {names}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: {value!r:.80} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r:.80} not in {schema['enum']}")
    for part in schema.get("allOf", ()):
        out += problems(part, value, root, at)
    if "anyOf" in schema and all(problems(p, value, root, at) for p in schema["anyOf"]):
        out.append(f"{at}: matches none of anyOf")
    if "oneOf" in schema:
        matching = sum(not problems(p, value, root, at) for p in schema["oneOf"])
        if matching != 1:
            out.append(f"{at}: matches {matching} of oneOf, not one")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [
            f"{at}: {name!r} is required"
            for name in schema.get("required", ())
            if name not in value
        ]
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += problems(props[key], item, root, f"{at}.{key}")
            elif extra is False:
                out.append(f"{at}: {key!r} is not allowed")
            elif isinstance(extra, dict):
                out += problems(extra, item, root, f"{at}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict | bool):
        for i, item in enumerate(value):
            out += problems(schema["items"], item, root, f"{at}[{i}]")
    return out
