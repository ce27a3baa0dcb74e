"""Prompts with parts through the real CLIs against the fake model server: the
model request each CLI makes carries the image's exact bytes (claude: an
``image`` block; codex: an ``input_image`` data URL; qwen: a chat
``image_url`` part), and a file reference in each CLI's form; the image's
bytes appear in no event and in no event record of the transcript."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent, FileRef, Image
from coding_genesis.prompts import Part
from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_claude_codex import Recorder, Rig, explain, hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import MoreRig, more_rig

__all__ = ["hermetic_env"]  # the autouse fixture of the real-CLI tests, active here too

pytestmark = pytest.mark.timeout(120)

#: A 1x1 PNG (a red pixel).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
B64 = base64.b64encode(PNG).decode()


@pytest.fixture(params=["claude", "codex"])
def rig(request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path) -> Rig:
    cli = request.getfixturevalue(f"real_{request.param}")  # skips when not installed
    return Rig(request.param, cli, model_server, tmp_path)


def images_in(body: Any) -> list[Any]:
    """Every object of a model request that carries an image."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") in ("image", "input_image", "image_url"):
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return found


def assert_no_bytes(result: dict[str, Any], events: Recorder) -> None:
    """The image's base64 is in no event, and not in the transcript's events."""
    assert B64 not in json.dumps(events.events)
    transcript = result.get("transcript")
    if transcript:
        for record in Path(transcript).glob("events*"):
            assert B64 not in record.read_text(errors="replace")


def test_an_image_and_a_file_reach_the_model(rig: Rig) -> None:
    notes = rig.work / "notes.md"
    notes.write_text("SECRET-NOTE-42\n")
    agent = rig.agent_with(transcripts=rig.tmp / "transcripts")
    events = Recorder(agent)
    prompt: list[Part] = [
        "What is in the image? SCENARIO:text a red pixel",
        Image(data=PNG),
        FileRef("notes.md"),
    ]
    result = dict(agent.run_sync(prompt))
    assert result["status"] == 0, explain(result, events)
    assert result["message"] == "a red pixel"
    asked = [r for r in rig.server.model_requests() if "What is in the image" in json.dumps(r.body)]
    assert asked, [r.body for r in rig.server.model_requests()]
    body = asked[-1].body
    images = images_in(body)
    if rig.backend == "claude":
        assert images == [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}
        ], images
    else:
        assert [i.get("image_url") for i in images] == [f"data:image/png;base64,{B64}"], images
    # the file reference reaches the model in each CLI's form: its path
    assert str(notes) in json.dumps(body), body
    assert_no_bytes(result, events)


def test_an_image_by_path_in_a_session_turn(rig: Rig) -> None:
    (rig.work / "pixel.bin").write_bytes(PNG)  # the type comes from the bytes, not the name
    agent = rig.agent_with()

    async def go() -> list[dict[str, Any]]:
        async with agent.session() as s:
            first = await s.send("SCENARIO:text first")
            second = await s.send(["Describe. SCENARIO:text seen", Image(path="pixel.bin")])
            return [dict(first), dict(second)]

    first, second = anyio.run(go)
    assert (first["status"], second["status"]) == (0, 0), explain(second)
    assert second["message"] == "seen"
    asked = [r for r in rig.server.model_requests() if "Describe." in json.dumps(r.body)]
    assert asked and images_in(asked[-1].body), [r.body for r in rig.server.model_requests()]
    assert B64 in json.dumps(images_in(asked[-1].body))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_qwen_sends_the_image_as_a_chat_image_url_and_the_file_as_its_link(
    request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig: MoreRig = more_rig("qwen", request, model_server, tmp_path)
    notes = rig.work / "notes.md"
    notes.write_text("SECRET-NOTE-42\n")
    # qwen 0.24.4 sends an image only to a model it knows sees them (its
    # MODALITY_PATTERNS: gpt-*, claude-*, gemini-*...); to "fake-model" it
    # sends the text "[image: image/png]" instead, its own choice
    env = rig.env(OPENAI_MODEL="gpt-4o")
    agent = CodingGenesisAgent(
        "qwen", cli_path=rig.cli, cwd=rig.work, env=env, ledger=False, timeout=90.0
    )
    events = Recorder(agent)
    result = dict(
        await agent.run(["Look. SCENARIO:text a red pixel", Image(data=PNG), FileRef(str(notes))])
    )
    assert result["status"] == 0, explain(result, events)
    asked = [r for r in model_server.model_requests() if "Look." in json.dumps(r.body)]
    assert asked, [r.body for r in model_server.model_requests()]
    body = asked[-1].body
    urls = [i.get("image_url") for i in images_in(body)]
    assert {"url": f"data:image/png;base64,{B64}"} in urls or f"data:image/png;base64,{B64}" in urls
    # the resource_link: qwen reads the file and sends its content, named by its path
    said = json.dumps(body)
    assert "SECRET-NOTE-42" in said and f"Content from {notes}" in said, body
    assert_no_bytes(result, events)
