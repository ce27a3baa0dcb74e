"""Structured output: the shape an answer must have (``output_schema=``),
checked once at the door, and an answer checked against it.

A shape is a JSON Schema (a dict) or a pydantic model class.  The CLI is
given the JSON Schema (claude ``--json-schema``, codex ``--output-schema``
and the app-server's ``outputSchema``); the answer is validated here whatever
the CLI did, since codex does not validate it and a pydantic model may say
more than its schema (a validator).  A model validates with pydantic and
answers an instance of itself; a dict schema validates with
:func:`schema_errors`, a small validator of the subset of JSON Schema the CLIs
use (no third-party validator is a dependency): any keyword outside that
subset is refused at the door, so validation is never silently weaker than
the schema.  pydantic is imported on first use only (fast start).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from coding_genesis.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["MAX_SCHEMA_BYTES", "OutputSchema", "output_schema", "parse_answer", "schema_errors"]

#: The largest schema accepted, as compact JSON: claude takes it in one argv
#: argument (Linux caps one at 128 KiB).
MAX_SCHEMA_BYTES = 64 * 1024
#: Validation errors kept (the first ones: a prompt quotes them).
MAX_ERRORS = 20

_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
#: Keywords that say nothing about validity (``format`` included: not checked).
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "format",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
    }
)
_CHECKED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
_REF = re.compile(r"^#/(\$defs|definitions)/([^/]+)$")


class OutputSchema(dict[str, Any]):
    """The shape an answer must have: the JSON Schema the CLI is given (this
    mapping itself: it is what a backend reads as ``request.output_schema``)
    and, for a pydantic model, the model that validates (and answers) it.
    Read-only: one checked schema is shared by every request that names it."""

    __slots__ = ("model",)

    def __init__(self, schema: Mapping[str, Any], model: type[BaseModel] | None = None) -> None:
        super().__init__(schema)
        #: The pydantic model it came from (None: a dict schema).
        self.model = model

    def _read_only(self, *args: object, **kwargs: object) -> None:
        raise TypeError("an output schema is read-only (it was checked as it is)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]
    __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(
        self,
    ) -> tuple[type[OutputSchema], tuple[dict[str, Any], type[BaseModel] | None]]:
        return (OutputSchema, (dict(self), self.model))

    def __repr__(self) -> str:
        return (
            f"OutputSchema({dict.__repr__(self)}{', ' + self.model.__name__ if self.model else ''})"
        )

    @property
    def schema(self) -> Mapping[str, Any]:
        """The JSON Schema (an object at its root: both CLIs require one)."""
        return self

    @property
    def name(self) -> str:
        return self.model.__name__ if self.model is not None else "output_schema"

    def check(self, answer: str) -> tuple[Any, list[str]]:
        """``(output, errors)``: the validated object (a dict, or an instance of
        the model) and no error, or None and what is wrong (at most
        :data:`MAX_ERRORS` lines, each naming where)."""
        value, error = parse_answer(answer)
        if error is not None:
            return None, [error]
        if self.model is None:
            errors = schema_errors(value, self.schema)
            return (None, errors) if errors else (value, [])
        from pydantic import ValidationError  # lazy: pydantic on first use only

        try:
            return self.model.model_validate_json(json.dumps(value)), []
        except ValidationError as exc:
            return None, [
                f"{_where(e.get('loc', ()))}: {e.get('msg', 'invalid')}"
                for e in exc.errors()[:MAX_ERRORS]
            ]


def output_schema(value: object) -> OutputSchema:
    """``output_schema=`` checked: a JSON Schema dict of the supported subset
    whose root is an object, or a pydantic model class.  Raises
    :class:`ConfigError` saying what is wrong."""
    if isinstance(value, OutputSchema):
        return value
    if isinstance(value, type):
        from pydantic import BaseModel  # lazy: pydantic on first use only

        if not issubclass(value, BaseModel):
            raise ConfigError(
                f"output_schema must be a JSON Schema (dict) or a pydantic model class, "
                f"got the class {value.__name__}"
            )
        try:
            schema = value.model_json_schema()
        except Exception as exc:  # noqa: BLE001 (pydantic raises several kinds)
            raise ConfigError(
                f"output_schema: {value.__name__} has no JSON Schema: {exc}"
            ) from None
        _check_root(schema, value.__name__)
        _check_size(schema)
        return OutputSchema(schema, value)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"output_schema must be a JSON Schema (dict) or a pydantic model class, got {value!r}"
        )
    try:
        schema = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"output_schema is not JSON: {exc}") from None
    _check_root(schema, "output_schema")
    _check_size(schema)
    _SchemaCheck(schema).node(schema, "$")
    return OutputSchema(schema)


def _check_root(schema: Mapping[str, Any], name: str) -> None:
    if schema.get("type") != "object":
        raise ConfigError(
            f"{name} must describe an object (its root's type is 'object'): "
            "claude and codex take no other answer"
        )


def _check_size(schema: Mapping[str, Any]) -> None:
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise ConfigError(
            f"output_schema is {size} bytes as JSON; at most {MAX_SCHEMA_BYTES} are accepted"
        )


class _SchemaCheck:
    """Checks a dict schema is of the subset :func:`schema_errors` validates."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.seen: set[str] = set()

    def node(self, node: Any, where: str) -> None:  # noqa: C901
        if isinstance(node, bool):
            return  # true: anything; false: nothing
        if not isinstance(node, dict):
            raise ConfigError(f"output_schema at {where}: a schema must be an object")
        unknown = sorted(set(node) - _CHECKED - _ANNOTATIONS)
        if unknown:
            raise ConfigError(
                f"output_schema at {where} uses {', '.join(unknown)}, which is not checked "
                "here; use a pydantic model for it (validated by pydantic)"
            )
        kinds = node.get("type")
        for kind in [kinds] if isinstance(kinds, str) else kinds or []:
            if kind not in _TYPES:
                raise ConfigError(f"output_schema at {where}: unknown type {kind!r}")
        if kinds is not None and not isinstance(kinds, str | list):
            raise ConfigError(f"output_schema at {where}: type must be a name or a list")
        props = node.get("properties", {})
        if not isinstance(props, dict):
            raise ConfigError(f"output_schema at {where}: properties must be an object")
        for name, sub in props.items():
            self.node(sub, f"{where}.{name}")
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ConfigError(f"output_schema at {where}: required must be a list of names")
        for key in ("additionalProperties", "items"):
            if key in node:
                self.node(node[key], f"{where}.{key}")
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                subs = node[key]
                if not isinstance(subs, list) or not subs:
                    raise ConfigError(f"output_schema at {where}: {key} must be a non-empty list")
                for i, sub in enumerate(subs):
                    self.node(sub, f"{where}.{key}[{i}]")
        if "enum" in node and not isinstance(node["enum"], list):
            raise ConfigError(f"output_schema at {where}: enum must be a list")
        for key in ("minItems", "maxItems", "minLength", "maxLength"):
            if key in node and (type(node[key]) is not int or node[key] < 0):
                raise ConfigError(f"output_schema at {where}: {key} must be an integer >= 0")
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in node and (isinstance(node[key], bool) or not _is_number(node[key])):
                raise ConfigError(f"output_schema at {where}: {key} must be a number")
        if "pattern" in node:
            try:
                re.compile(str(node["pattern"]))
            except re.error as exc:
                raise ConfigError(f"output_schema at {where}: bad pattern: {exc}") from None
        if "$ref" in node:
            ref = node["$ref"]
            if ref not in self.seen:
                self.seen.add(ref)
                self.node(_resolve(self.root, ref, where), ref)


def _resolve(root: Mapping[str, Any], ref: object, where: str) -> Any:
    found = _REF.match(ref) if isinstance(ref, str) else None
    table = root.get(found.group(1)) if found else None
    if found is None or not isinstance(table, dict) or found.group(2) not in table:
        raise ConfigError(
            f"output_schema at {where}: $ref {ref!r} must name an entry of the root's "
            "$defs or definitions"
        )
    return table[found.group(2)]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _where(loc: object) -> str:
    path = "$"
    for part in loc if isinstance(loc, tuple | list) else ():
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def parse_answer(text: str) -> tuple[Any, str | None]:
    """The answer as JSON (a fenced ```json block is unwrapped), or the error."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rstrip().removesuffix("```").strip()
    if not body:
        return None, "$: the answer is empty, not a JSON object"
    try:
        return json.loads(body), None
    except ValueError as exc:
        shown = body if len(body) <= 200 else body[:200] + "…"
        return None, f"$: the answer is not JSON ({exc.args[0] if exc.args else exc}): {shown}"


# -- the validator of the subset ---------------------------------------------------


def schema_errors(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``value`` against ``schema`` (checked by
    :func:`output_schema`), at most :data:`MAX_ERRORS` lines; [] when valid."""
    errors: list[str] = []
    try:
        _validate(value, schema, schema, "$", errors)
    except RecursionError:  # a $ref that only names itself, or an absurdly deep answer
        errors.append("$: too deeply nested to check")
    return errors[:MAX_ERRORS]


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _is(value: Any, kind: str) -> bool:
    actual = _type_of(value)
    if kind == "number":
        return actual in ("number", "integer")
    if kind == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == kind


def _validate(value: Any, node: Any, root: Mapping[str, Any], at: str, out: list[str]) -> None:  # noqa: C901
    if len(out) >= MAX_ERRORS or node is True:
        return
    if node is False:
        out.append(f"{at}: no value is allowed here")
        return
    if not isinstance(node, dict):
        return
    if "$ref" in node:
        _validate(value, _resolve(root, node["$ref"], at), root, at, out)
    kinds = node.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in names):
            out.append(f"{at}: expected {' or '.join(names)}, got {_type_of(value)}")
            return
    if "const" in node and not _same(value, node["const"]):
        out.append(f"{at}: must be {json.dumps(node['const'])}")
    if "enum" in node and not any(_same(value, option) for option in node["enum"]):
        options = ", ".join(json.dumps(o) for o in node["enum"][:10])
        out.append(f"{at}: must be one of {options}")
    for key in ("anyOf", "oneOf"):
        if key in node:
            _one_of(value, node[key], root, at, out, exactly=key == "oneOf")
    for sub in node.get("allOf", ()):
        _validate(value, sub, root, at, out)
    if isinstance(value, dict):
        _object(value, node, root, at, out)
    elif isinstance(value, list):
        _array(value, node, root, at, out)
    elif isinstance(value, str):
        _string(value, node, at, out)
    elif _is_number(value):
        _number(value, node, at, out)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _one_of(
    value: Any, subs: list[Any], root: Mapping[str, Any], at: str, out: list[str], *, exactly: bool
) -> None:
    failures: list[list[str]] = []
    for sub in subs:
        errors: list[str] = []
        _validate(value, sub, root, at, errors)
        failures.append(errors)
    matched = sum(1 for errors in failures if not errors)
    if matched == 0:
        best = min(failures, key=len)
        out.append(f"{at}: matches none of the {len(subs)} allowed shapes ({best[0]})")
    elif exactly and matched > 1:
        out.append(f"{at}: matches {matched} of the oneOf shapes; exactly one is allowed")


def _object(
    value: dict[str, Any], node: dict[str, Any], root: Mapping[str, Any], at: str, out: list[str]
) -> None:
    props: dict[str, Any] = node.get("properties", {})
    for name in node.get("required", ()):
        if name not in value:
            out.append(f"{at}: missing required property {name!r}")
    extra = node.get("additionalProperties", True)
    for name, item in value.items():
        where = f"{at}.{name}"
        if name in props:
            _validate(item, props[name], root, where, out)
        elif extra is False:
            out.append(f"{at}: property {name!r} is not allowed")
        else:
            _validate(item, extra, root, where, out)


def _array(
    value: list[Any], node: dict[str, Any], root: Mapping[str, Any], at: str, out: list[str]
) -> None:
    if "minItems" in node and len(value) < node["minItems"]:
        out.append(f"{at}: at least {node['minItems']} item(s) expected, got {len(value)}")
    if "maxItems" in node and len(value) > node["maxItems"]:
        out.append(f"{at}: at most {node['maxItems']} item(s) allowed, got {len(value)}")
    if "items" in node:
        for i, item in enumerate(value):
            _validate(item, node["items"], root, f"{at}[{i}]", out)


def _string(value: str, node: dict[str, Any], at: str, out: list[str]) -> None:
    if "minLength" in node and len(value) < node["minLength"]:
        out.append(f"{at}: at least {node['minLength']} character(s) expected")
    if "maxLength" in node and len(value) > node["maxLength"]:
        out.append(f"{at}: at most {node['maxLength']} character(s) allowed")
    if "pattern" in node and re.search(str(node["pattern"]), value) is None:
        out.append(f"{at}: does not match the pattern {node['pattern']!r}")


def _number(value: float, node: dict[str, Any], at: str, out: list[str]) -> None:
    if "minimum" in node and value < node["minimum"]:
        out.append(f"{at}: must be >= {node['minimum']}")
    if "maximum" in node and value > node["maximum"]:
        out.append(f"{at}: must be <= {node['maximum']}")
    if "exclusiveMinimum" in node and value <= node["exclusiveMinimum"]:
        out.append(f"{at}: must be > {node['exclusiveMinimum']}")
    if "exclusiveMaximum" in node and value >= node["exclusiveMaximum"]:
        out.append(f"{at}: must be < {node['exclusiveMaximum']}")
