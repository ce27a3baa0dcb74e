"""A served request's prompt with parts: read as a ``run-many`` line (an image
as base64 data is data; a part naming a path needs ``--trusted-input``), and
listed by its text alone, never an image's bytes."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from coding_genesis._serve.requests import Accepted, Refused, Rules, read_run_request, root_path
from coding_genesis._serve.runs import prompt_head

pytest.importorskip("fastapi")

B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def read(tmp_path: Path, prompt: object, *, trusted: bool = False) -> Accepted | Refused:
    rules = Rules(trusted, root_path(tmp_path), {}, "failer")
    return read_run_request(orjson.dumps({"prompt": prompt}), rules, owned={})


def test_an_image_as_data_is_served_and_listed_by_its_text(tmp_path: Path) -> None:
    prompt = ["look\nat this", {"type": "image", "data": B64}]
    accepted = read(tmp_path, prompt)
    assert isinstance(accepted, Accepted), accepted
    assert accepted.spec.prompt == prompt
    assert prompt_head(accepted.spec.prompt) == "look"
    assert B64 not in prompt_head([{"type": "image", "data": B64}, B64[:10] + " x"])


def test_a_part_naming_a_path_needs_trusted_input(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(base64.b64decode(B64))
    prompt = ["look", {"type": "image", "path": "a.png"}]
    refused = read(tmp_path, prompt)
    assert isinstance(refused, Refused)
    assert "refused prompt part(s) naming a path ('a.png')" in refused.message
    assert isinstance(read(tmp_path, prompt, trusted=True), Accepted)
