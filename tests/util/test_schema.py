"""``output_schema=`` checked at the door, and answers checked against it: a
pydantic model by pydantic, a dict by the validator of the JSON-Schema subset
(coding_genesis._util.schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, RootModel, field_validator

from coding_genesis._util.schema import (
    MAX_ERRORS,
    MAX_SCHEMA_BYTES,
    OutputSchema,
    output_schema,
    parse_answer,
    schema_errors,
)
from coding_genesis.errors import ConfigError

ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 1}, "tag": {"enum": ["a", "b"]}},
    "required": ["id"],
    "additionalProperties": False,
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Review",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "minLength": 2, "maxLength": 10, "pattern": "^[a-z]+$"},
        "score": {"type": "number", "exclusiveMaximum": 10, "exclusiveMinimum": 0},
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "maxItems": 2},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "kind": {"const": "review", "description": "always review"},
        "flag": {"type": ["boolean", "null"], "format": "anything"},
    },
    "required": ["verdict", "items"],
    "$defs": {"Item": ITEM},
}


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: str
    issues: list[str]

    @field_validator("verdict")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in ("ok", "bad"):
            raise ValueError("verdict must be ok or bad")
        return value


def errors(value: Any, schema: dict[str, Any] = SCHEMA) -> list[str]:
    return schema_errors(value, output_schema(schema).schema)


def test_a_valid_answer_has_no_error() -> None:
    value = {
        "verdict": "fine",
        "score": 9.5,
        "items": [{"id": 1, "tag": "a"}, {"id": 2.0}],
        "note": None,
        "kind": "review",
        "flag": None,
        "extra": {"anything": [1]},  # the root is open
    }
    assert errors(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"items": []}, "$: missing required property 'verdict'"),
        ({"verdict": 3, "items": []}, "$.verdict: expected string, got integer"),
        ({"verdict": "x", "items": []}, "$.verdict: at least 2 character(s) expected"),
        ({"verdict": "abcdefghijk", "items": []}, "$.verdict: at most 10 character(s) allowed"),
        ({"verdict": "Fine", "items": []}, "$.verdict: does not match the pattern '^[a-z]+$'"),
        ({"verdict": "ok", "items": [], "score": 10}, "$.score: must be < 10"),
        ({"verdict": "ok", "items": [], "score": 0}, "$.score: must be > 0"),
        ({"verdict": "ok", "items": [{}, {}, {}]}, "$.items: at most 2 item(s) allowed, got 3"),
        ({"verdict": "ok", "items": [{"id": 0}]}, "$.items[0].id: must be >= 1"),
        (
            {"verdict": "ok", "items": [{"id": True}]},
            "$.items[0].id: expected integer, got boolean",
        ),
        ({"verdict": "ok", "items": [{"id": 1.5}]}, "$.items[0].id: expected integer, got number"),
        (
            {"verdict": "ok", "items": [{"id": 1, "x": 1}]},
            "$.items[0]: property 'x' is not allowed",
        ),
        (
            {"verdict": "ok", "items": [{"id": 1, "tag": "c"}]},
            '$.items[0].tag: must be one of "a", "b"',
        ),
        ({"verdict": "ok", "items": [], "kind": "other"}, '$.kind: must be "review"'),
        (
            {"verdict": "ok", "items": [], "flag": 0},
            "$.flag: expected boolean or null, got integer",
        ),
        (
            {"verdict": "ok", "items": [], "note": 1},
            "$.note: matches none of the 2 allowed shapes ($.note: expected string, got integer)",
        ),
        (["not", "an", "object"], "$: expected object, got array"),
    ],
)
def test_each_problem_is_named_with_its_place(value: Any, expected: str) -> None:
    assert expected in errors(value), errors(value)


def test_one_of_wants_exactly_one_and_all_of_every_one() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "s": {"allOf": [{"minLength": 2}, {"maxLength": 3}]},
        },
    }
    assert errors({"n": 1.5, "s": "ab"}, schema) == []
    assert errors({"n": 1, "s": "abcd"}, schema) == [
        "$.n: matches 2 of the oneOf shapes; exactly one is allowed",
        "$.s: at most 3 character(s) allowed",
    ]


def test_errors_are_capped_and_a_self_naming_ref_does_not_recurse() -> None:
    wide = {"type": "object", "required": [f"p{i}" for i in range(50)]}
    assert len(errors({}, wide)) == MAX_ERRORS
    loop = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/A"}},
    }
    assert errors({"a": 1}, loop) == ["$: too deeply nested to check"]
    assert schema_errors(True, {"type": "object", "additionalProperties": False}) == [
        "$: expected object, got boolean"
    ]
    assert schema_errors({"x": 1}, {"type": "object", "additionalProperties": False}) == [
        "$: property 'x' is not allowed"
    ]


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array", "items": {}}, "must describe an object"),
        ({"properties": {}}, "must describe an object"),
        ({"type": "object", "patternProperties": {}}, "uses patternProperties"),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "unknown type 'strin'"),
        ({"type": "object", "properties": {"a": 3}}, "a schema must be an object"),
        ({"type": "object", "properties": []}, "properties must be an object"),
        ({"type": "object", "required": "a"}, "required must be a list of names"),
        ({"type": "object", "properties": {"a": {"anyOf": []}}}, "anyOf must be a non-empty list"),
        ({"type": "object", "properties": {"a": {"enum": "ab"}}}, "enum must be a list"),
        (
            {"type": "object", "properties": {"a": {"minLength": -1}}},
            "minLength must be an integer",
        ),
        ({"type": "object", "properties": {"a": {"maximum": "9"}}}, "maximum must be a number"),
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "bad pattern"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}, "$ref '#/$defs/B'"),
        ({"type": "object", "properties": {"a": {"$ref": "http://x"}}}, "must name an entry"),
        ({"type": "object", "default": float("nan")}, "not JSON"),
        ({"type": "object", "x": object()}, "not JSON"),
        ({"type": "object", "description": "x" * MAX_SCHEMA_BYTES}, "at most 65536 are accepted"),
        ("not a schema", "must be a JSON Schema"),
        (dict, "got the class dict"),
    ],
)
def test_a_bad_schema_is_refused_at_the_door(schema: Any, words: str) -> None:
    with pytest.raises(ConfigError, match="output_schema"):
        output_schema(schema)
    with pytest.raises(ConfigError) as caught:
        output_schema(schema)
    assert words in str(caught.value)


def test_a_model_validates_with_pydantic_and_answers_an_instance() -> None:
    shape = output_schema(Review)
    assert shape.model is Review and shape.name == "Review"
    assert shape.schema["type"] == "object" and shape.schema["additionalProperties"] is False
    value, problems = shape.check('{"verdict": "ok", "issues": ["a"]}')
    assert problems == [] and value == Review(verdict="ok", issues=["a"])
    # what the schema cannot say (a validator) is checked too
    value, problems = shape.check('{"verdict": "maybe", "issues": [1]}')
    assert value is None
    assert problems == [
        "$.verdict: Value error, verdict must be ok or bad",
        "$.issues[0]: Input should be a valid string",
    ]
    assert output_schema(shape) is shape


def test_a_model_that_is_no_object_is_refused() -> None:
    class Names(RootModel[list[str]]):
        pass

    with pytest.raises(ConfigError, match="Names must describe an object"):
        output_schema(Names)


def test_a_dict_schema_answers_the_parsed_object() -> None:
    shape = output_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert isinstance(shape, OutputSchema) and shape.model is None
    assert shape.check('  {"a": 1}\n') == ({"a": 1}, [])
    assert shape.check('```json\n{"a": 2}\n```') == ({"a": 2}, [])
    assert shape.check('{"a": "1"}') == (None, ["$.a: expected integer, got string"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "the answer is empty"),
        ("```\n```", "the answer is empty"),
        ("Sure! Here it is", "the answer is not JSON"),
        ("x" * 300, "…"),
    ],
)
def test_an_answer_that_is_not_json_says_so(text: str, words: str) -> None:
    value, error = parse_answer(text)
    assert value is None and error is not None and words in error
    assert len(error) < 300


def test_the_schema_given_to_the_cli_is_plain_json() -> None:
    shape = output_schema(SCHEMA)
    assert json.loads(json.dumps(shape.schema)) == SCHEMA
