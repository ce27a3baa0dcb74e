"""Step definitions of tests/features/prompt_parts.feature: prompts with an
image and a file over the fake ACP agent, which records the content blocks it
got (``prompt_parts``; an image by its size and sha256).  The session's world
and its common steps are the ACP scenarios' (``tests/steps/acp_steps.py``)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from pytest_bdd import given, parsers, then, when

from coding_genesis import FileRef, Image
from coding_genesis.prompts import Part
from tests.steps.acp_steps import AcpWorld

#: A 1x1 PNG (a red pixel).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def transcripts(acp: AcpWorld) -> Path:
    return acp.tmp_path / "transcripts"


@given(parsers.parse('the ACP agent "{flavour}" that takes no image'))
def agent_without_images(acp: AcpWorld, flavour: str) -> None:
    acp.backend = flavour
    acp.settings["env"]["FAKE_ACP_NO_IMAGE"] = "1"


@given(parsers.parse('a file "{name}" in the working directory'))
def a_file(acp: AcpWorld, name: str) -> None:
    (acp.tmp_path / name).write_text("notes\n")
    acp.settings["transcripts"] = str(transcripts(acp))


def send_parts(acp: AcpWorld, *parts: Part) -> None:
    assert acp.session is not None, "no ACP session is open"
    acp.results.append(acp.portal.call(acp.session.send_result, list(parts)))


@when(parsers.parse('the ACP session is sent a 1x1 PNG and the file "{name}", asking "{text}"'))
def send_png_and_file(acp: AcpWorld, name: str, text: str) -> None:
    send_parts(acp, text, Image(data=PNG), FileRef(name))


@when(parsers.parse('the ACP session is sent a 1x1 PNG, asking "{text}"'))
def send_png(acp: AcpWorld, text: str) -> None:
    send_parts(acp, text, Image(data=PNG))


@when(parsers.parse('the ACP session is sent an image of {mib:d} MiB, asking "{text}"'))
def send_big(acp: AcpWorld, mib: int, text: str) -> None:
    send_parts(acp, text, Image(data=PNG + bytes(mib * 1024 * 1024)))


@then("the agent got the PNG as an image block, by its size and sha256")
def got_png(acp: AcpWorld) -> None:
    parts = [p for entry in acp.recorded("prompt_parts") for p in entry["prompt_parts"]]
    images = [p for p in parts if p["type"] == "image"]
    digest = hashlib.sha256(PNG).hexdigest()
    assert images == [
        {"type": "image", "mimeType": "image/png", "bytes": len(PNG), "sha256": digest}
    ], parts


@then(parsers.parse('the agent got a resource_link to "{name}"'))
def got_link(acp: AcpWorld, name: str) -> None:
    parts = [p for entry in acp.recorded("prompt_parts") for p in entry["prompt_parts"]]
    links = [p for p in parts if p["type"] == "resource_link"]
    path = acp.tmp_path / name
    assert links == [{"type": "resource_link", "uri": path.as_uri(), "name": name}], parts


@then("the agent got no prompt part")
def got_no_part(acp: AcpWorld) -> None:
    assert acp.recorded("prompt_parts") == []
    prompts = [e for e in acp.recorded("received") if e["received"] == "session/prompt"]
    assert all(len(e["params"]["prompt"]) == 1 for e in prompts), prompts


@then("no event record of the session holds the PNG's bytes")
def no_bytes(acp: AcpWorld) -> None:
    acp.close()  # the transcript is complete
    written = base64.b64encode(PNG).decode()
    records = [p.read_text() for p in sorted(transcripts(acp).rglob("events.jsonl"))]
    assert any('"type":"run_finished"' in said for said in records), records  # the turn
    assert not any(written in said for said in records)
    metas = [p.read_text() for p in sorted(transcripts(acp).rglob("meta.json"))]
    assert any('"prompt": "hello"' in meta for meta in metas), metas  # the text alone
    assert not any(written in meta for meta in metas)
    described = [json.loads(meta).get("parts") for meta in metas]
    image = {
        "type": "image",
        "path": None,
        "media_type": "image/png",
        "bytes": len(PNG),
        "sha256": hashlib.sha256(PNG).hexdigest(),
    }
    assert [image, {"type": "file", "path": str(acp.tmp_path / "notes.md")}] in described
