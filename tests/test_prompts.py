"""Prompts with parts (``coding_genesis.prompts``): checked at the door (an
image read once, held to 20 MiB, its type sniffed from its bytes; a file made
absolute), kept beside the request's text, held by the capability check's
``parts`` row to what the backend's protocol sends, refused in a line of
untrusted data when a part names a path, and encoded once per CLI
(``backends/parts.py``)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from operator import itemgetter
from pathlib import Path

import pytest

from coding_genesis import CodingGenesisAgent, FileRef, Image
from coding_genesis._lines import read_requests
from coding_genesis.backends import get_backend
from coding_genesis.backends.parts import acp_prompt, claude_content, codex_input
from coding_genesis.batch import InvalidRequest
from coding_genesis.capabilities import backends_that, check, untrusted_problem
from coding_genesis.control import ControlProtocol
from coding_genesis.errors import ConfigError
from coding_genesis.prompts import MAX_IMAGE_BYTES, checked_prompt, described, sniff
from tests.session.twoway import one_way_backend
from tests.support import cli_request
from tests.terminal import genesis

#: A 1x1 PNG (a red pixel).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
B64 = base64.b64encode(PNG).decode()
JPEG = b"\xff\xd8\xff\xe0" + bytes(16)


def test_a_string_is_the_prompt_as_before_and_a_list_of_strings_its_text() -> None:
    assert checked_prompt("do it", "/w") == ("do it", ())
    assert checked_prompt(["first", "  ", "then"], "/w") == ("first\n\nthen", ())
    with pytest.raises(ConfigError, match="prompt is empty"):
        checked_prompt([], "/w")
    with pytest.raises(ConfigError, match="prompt must be a string or a sequence of parts"):
        checked_prompt(b"bytes", "/w")


def test_an_image_is_read_at_the_door_its_type_from_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(JPEG)  # a JPEG named .png
    text, parts = checked_prompt(["look", Image(path="shot.png")], str(tmp_path))
    (image,) = parts
    assert isinstance(image, Image)
    assert (text, image.path, image.data, image.media_type) == (
        "look",
        str(tmp_path / "shot.png"),
        JPEG,
        "image/jpeg",
    )
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(ConfigError, match="is not a PNG, JPEG, GIF or WebP image"):
        checked_prompt(["look", Image(path="notes.png")], str(tmp_path))
    with pytest.raises(ConfigError, match="cannot be read"):
        checked_prompt(["look", Image(path="absent.png")], str(tmp_path))
    os.mkfifo(tmp_path / "fifo.png")  # opened without blocking: never a hang at the door
    for odd in ("fifo.png", "/dev/zero", str(tmp_path)):
        with pytest.raises(ConfigError, match="is not a regular file"):
            checked_prompt(["look", Image(path=odd)], str(tmp_path))
    assert [sniff(b"GIF89a..."), sniff(b"RIFF\0\0\0\0WEBPVP8 ")] == ["image/gif", "image/webp"]


def test_an_image_over_20_mib_is_refused_a_file_by_its_size_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as fh:  # sparse: its size says it all
        fh.write(PNG)
        fh.truncate(MAX_IMAGE_BYTES + 1)
    with pytest.raises(ConfigError, match=r"is 20971521 bytes; .* at most 20971520 bytes"):
        checked_prompt(["look", Image(path=str(big))], str(tmp_path))
    with pytest.raises(ConfigError, match=r"image \(bytes\) is 20971521 bytes"):
        checked_prompt(["look", Image(data=PNG + bytes(MAX_IMAGE_BYTES + 1 - len(PNG)))], "/")
    exact = PNG + bytes(MAX_IMAGE_BYTES - len(PNG))
    assert checked_prompt(["look", Image(data=exact)], "/")[1][0] == Image(data=exact)


def test_a_file_is_made_absolute_and_must_exist(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("n")
    assert checked_prompt(["read", FileRef("notes.md")], str(tmp_path)) == (
        "read",
        (FileRef(str(tmp_path / "notes.md")),),
    )
    with pytest.raises(ConfigError, match="is not a file"):
        checked_prompt(["read", FileRef(".")], str(tmp_path))


def test_parts_need_text_and_a_known_type() -> None:
    with pytest.raises(ConfigError, match="prompt has parts but no text"):
        checked_prompt([Image(data=PNG)], "/")
    with pytest.raises(ConfigError, match="a prompt part must be a str, Image or FileRef, got int"):
        checked_prompt(["x", 3], "/")
    with pytest.raises(ConfigError, match="Image needs path= or data="):
        Image()
    with pytest.raises(ConfigError, match="NUL"):
        checked_prompt(["x\0", Image(data=PNG)], "/")


def test_the_json_form_of_a_part(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a")
    _, parts = checked_prompt(
        ["x", {"type": "image", "data": B64}, {"type": "file", "path": "a.md"}], str(tmp_path)
    )
    assert parts == (Image(data=PNG), FileRef(str(tmp_path / "a.md")))
    for bad, words in (
        ({"type": "image", "data": "%%%"}, "not valid base64"),
        ({"type": "file", "data": B64}, "base64"),
        ({"type": "video", "path": "a"}, "a prompt part object is"),
        ({"type": "image", "path": "a", "data": B64}, "a prompt part object is"),
        ({"type": "image", "url": "http://x"}, "a prompt part object is"),
    ):
        with pytest.raises(ConfigError, match=words):
            checked_prompt(["x", bad], str(tmp_path))


def test_an_images_bytes_are_never_in_its_repr_nor_its_record() -> None:
    shown = repr(Image(data=PNG))
    assert B64 not in shown and repr(PNG) not in shown
    digest = hashlib.sha256(PNG).hexdigest()
    assert shown == f"Image(path=None, 70 bytes, sha256 {digest})"
    assert described(Image(path="/a.png", data=PNG)) == {
        "type": "image",
        "path": "/a.png",
        "media_type": "image/png",
        "bytes": 70,
        "sha256": digest,
    }
    assert described(FileRef("/a.md")) == {"type": "file", "path": "/a.md"}


def test_the_request_keeps_the_text_as_its_prompt_and_the_parts_beside_it(
    tmp_path: Path,
) -> None:
    session = cli_request(cwd=str(tmp_path))
    plain = session.for_turn("look")
    turn = session.for_turn(["look", Image(data=PNG)])
    assert (turn.prompt, turn.parts, turn.request_key) == (
        "look",
        (Image(data=PNG),),
        plain.request_key,
    )
    assert plain.parts == ()


def test_the_parts_row_refuses_a_backend_that_cannot_send_them() -> None:
    one_way = one_way_backend()
    run = cli_request(cwd="/w").for_turn(["look", Image(data=PNG)])
    refused = check(one_way, run)
    assert refused is not None and refused.option == "parts"
    assert refused.message == (
        "backend 'oneway' cannot send a prompt's image part (Image), which the prompt holds; "
        f"backends that can: {', '.join(backends_that('parts image'))}"
    )
    assert {"claude", "codex", "failer", "gemini", "qwen", "opencode"} <= set(
        backends_that("parts image")
    )
    for name in ("claude", "codex", "failer", "qwen"):
        backend = get_backend(name)
        assert check(backend, run) is None and check(backend, run, "turn") is None
        assert backend.runs_live(run), name  # a prompt with parts is a live turn
    assert check(one_way, cli_request(cwd="/w").for_turn("look")) is None


def test_untrusted_input_may_not_name_a_path_in_its_prompt() -> None:
    for part in ({"type": "image", "path": "/etc/passwd"}, {"type": "file", "path": "x"}):
        problem = untrusted_problem({"prompt": ["hi", part], "backend": "failer"})
        assert problem is not None and problem.startswith("refused prompt part(s) naming a path")
        assert "--trusted-input" in problem
        assert untrusted_problem({"prompt": ["hi", part]}, trusted=True) is None
    assert untrusted_problem({"prompt": ["hi", {"type": "image", "data": B64}]}) is None
    assert untrusted_problem({"prompt": ["hi", FileRef("x")]}) is not None
    lines = [
        json.dumps({"prompt": ["hi", {"type": "image", "path": "x.png"}], "backend": "failer"}),
        json.dumps({"prompt": ["hi", {"type": "image", "data": B64}], "backend": "failer"}),
    ]
    refused, kept = read_requests([line.encode() for line in lines])
    assert isinstance(refused, InvalidRequest) and "naming a path ('x.png')" in refused.reason
    assert isinstance(kept, dict)
    assert all(isinstance(r, dict) for r in read_requests([lines[0].encode()], trusted=True))


def test_each_cli_gets_the_parts_in_its_own_blocks(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a")
    turn = cli_request(cwd=str(tmp_path)).for_turn(["look", Image(data=PNG), FileRef("a.md")])
    path = str(tmp_path / "a.md")
    assert claude_content(turn) == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
        {"type": "text", "text": f"@{path}"},
        {"type": "text", "text": "look"},
    ]
    assert codex_input(turn) == [
        {"type": "image", "url": f"data:image/png;base64,{B64}"},
        {"type": "text", "text": f"@{path}", "text_elements": []},
        {"type": "text", "text": "look", "text_elements": []},
    ]
    assert acp_prompt(turn) == [
        {"type": "image", "data": B64, "mimeType": "image/png"},
        {"type": "resource_link", "uri": Path(path).as_uri(), "name": "a.md"},
        {"type": "text", "text": "look"},
    ]


def test_each_control_protocol_starts_a_turn_with_its_blocks() -> None:
    turn = cli_request(cwd="/w").for_turn(["look", Image(data=PNG)])
    claude = get_backend("claude").control()
    codex = get_backend("codex").control()
    acp = get_backend("qwen").control()
    assert claude is not None and codex is not None and acp is not None
    assert claude.start_turn(turn)[0]["message"]["content"] == claude_content(turn)
    assert codex.start_turn(turn)[0]["params"]["input"] == codex_input(turn)
    assert acp.start_turn(turn)[0]["params"]["prompt"] == acp_prompt(turn)
    plain = cli_request(cwd="/w").for_turn("look")
    assert claude.start_turn(plain)[0]["message"]["content"] == "look"


def test_an_acp_agent_whose_initialize_takes_no_image_refuses_the_turn() -> None:
    turn = cli_request(cwd="/w").for_turn(["look", Image(data=PNG)])

    def opened(caps: Mapping[str, object]) -> ControlProtocol:
        acp = get_backend("qwen").control()
        assert acp is not None
        acp.begin(cli_request(cwd="/w"))
        answer = {"protocolVersion": 1, "agentCapabilities": caps}
        acp.receive({"jsonrpc": "2.0", "id": 1, "result": answer})
        return acp

    assert opened({"promptCapabilities": {"image": True}}).turn_refusal(turn) is None
    for caps in ({}, {"promptCapabilities": {"image": False}}):
        acp = opened(caps)
        assert acp.turn_refusal(turn) == (
            "qwen takes no image in a prompt (its initialize answer's "
            "agentCapabilities.promptCapabilities.image is not true); send the text and "
            "files alone"
        )
        assert acp.turn_refusal(cli_request(cwd="/w").for_turn("look")) is None


@pytest.mark.slow
def test_a_run_with_an_image_on_the_failer_and_an_oversized_one(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", cwd=str(tmp_path), timeout=20, ledger=False)
    ok = agent.run_sync(["hello", Image(data=PNG)])
    assert ok["status"] == 0, ok
    big = agent.run_sync(["hello", Image(data=PNG + bytes(MAX_IMAGE_BYTES))])
    assert (big["status"], big["error"]) == (64, "invalid_request")
    assert big["message"] == (
        f"image (bytes) is {MAX_IMAGE_BYTES + len(PNG)} bytes; a prompt's image may be at most "
        f"{MAX_IMAGE_BYTES} bytes (20 MiB)"
    )
    assert (big["session_id"], big["tool_calls"]) == (None, 0)  # nothing ran


RECORDINGS = Path(__file__).parent / "fakes" / "recordings" / "acp"


@pytest.mark.parametrize("agent", ["gemini", "qwen", "opencode", "claude_code", "codex"])
def test_every_recorded_acp_agent_takes_an_image(agent: str) -> None:
    """Each agent's recorded initialize answer (gemini 0.61, qwen 0.24.4,
    opencode 1.18.33, claude-agent-acp, codex-acp) says promptCapabilities.image."""
    lines = (RECORDINGS / f"{agent}_acp_tool.jsonl").read_text().splitlines()
    answer = next(
        json.loads(line)["msg"]["result"] for line in lines if "promptCapabilities" in line
    )
    acp = get_backend("qwen").control()
    assert acp is not None
    acp.begin(cli_request(cwd="/w"))
    acp.receive({"jsonrpc": "2.0", "id": 1, "result": answer})
    assert acp.turn_refusal(cli_request(cwd="/w").for_turn(["look", Image(data=PNG)])) is None


@pytest.mark.slow
def test_a_one_shot_acp_run_with_an_image_its_agent_refuses_answers_64(tmp_path: Path) -> None:
    fake = str(Path(__file__).parent / "fakes" / "bin" / "gemini")
    record = tmp_path / "record.jsonl"

    def run(**env: str) -> dict[str, object]:
        agent = CodingGenesisAgent(
            "gemini",
            cli_path=fake,
            cwd=str(tmp_path),
            ledger=False,
            timeout=20,
            env={"FAKE_CLI_RECORD": str(record), **env},
        )
        return dict(agent.run_sync(["hello", Image(data=PNG)]))

    refused = run(FAKE_ACP_NO_IMAGE="1")
    assert (refused["status"], refused["error"]) == (64, "invalid_request")
    assert str(refused["message"]).startswith("gemini takes no image in a prompt")
    said = [json.loads(line) for line in record.read_text().splitlines()]
    assert not [e for e in said if e.get("received") == "session/prompt"]  # nothing written
    ok = run()
    assert (ok["status"], ok["message"]) == (0, "fake gemini got: hello")
    said = [json.loads(line) for line in record.read_text().splitlines()]
    (parts,) = [e["prompt_parts"] for e in said if "prompt_parts" in e]
    assert parts == [
        {
            "type": "image",
            "mimeType": "image/png",
            "bytes": len(PNG),
            "sha256": hashlib.sha256(PNG).hexdigest(),
        }
    ]


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True])
def test_run_many_refuses_a_path_part_without_trusted_input(tmp_path: Path, trusted: bool) -> None:
    (tmp_path / "pixel.png").write_bytes(PNG)
    lines = [
        {"prompt": ["look", {"type": "image", "path": str(tmp_path / "pixel.png")}]},
        {"prompt": ["look", {"type": "image", "data": B64}]},
        {"prompt": ["look", {"type": "image", "data": base64.b64encode(b"GIF8").decode()}]},
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({**line, "backend": "failer"}) + "\n" for line in lines))
    proc = genesis(["run-many", str(batch), *(["--trusted-input"] if trusted else [])])
    results = sorted(
        (json.loads(line) for line in proc.stdout.splitlines()), key=itemgetter("index")
    )
    assert b"Traceback" not in proc.stderr
    statuses = [r["status"] for r in results]
    assert statuses == [0 if trusted else 64, 0, 64], results
    if not trusted:
        assert "refused prompt part(s) naming a path" in results[0]["message"]
    assert "is not a PNG, JPEG, GIF or WebP image" in results[2]["message"]
