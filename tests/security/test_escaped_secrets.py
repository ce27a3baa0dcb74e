"""Round three, finding 4: a secret written with any legal JSON escape
(``\\/``, Go's ``\\u0026 \\u003c \\u003e``, every character ``\\u``-escaped,
mixed) is masked in ``stdout.jsonl``; the rest of the line is kept byte for
byte, and with no secret the raw stdout is written untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_genesis._util.redact import MASK, Redactor
from tests.support import FakeCLI, present

#: A secret with the characters other JSON writers escape: ``/`` (``\/``),
#: ``& < >`` (Go's encoding/json), and non-ASCII (``\u`` in ASCII-only JSON).
SECRET = "sk-ant-Zq9/sec&ret<x>vé"


def go_style(text: str) -> str:
    return (
        json.dumps(text, ensure_ascii=False)[1:-1]
        .replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
    )


FORMS = {
    "solidus": json.dumps(SECRET, ensure_ascii=False)[1:-1].replace("/", "\\/"),
    "go": go_style(SECRET),
    "go-upper-hex": go_style(SECRET).replace("\\u003c", "\\u003C").replace("\\u003e", "\\u003E"),
    "all-u": "".join(f"\\u{ord(c):04x}" for c in SECRET),
    "mixed": "sk-\\u0061nt-Zq9\\/sec\\u0026ret<x\\u003e" + "v\\u00e9",
}


def line_with(form: str) -> str:
    return (
        '{"type":"assistant","message":{"content":[{"type":"text",'
        '"text":"a\\\\u0041 \\/ before ' + form + ' after \\u00e9"}]}}'
    )


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_escaped_form_is_masked_in_stdout_jsonl(tmp_path: Path, name: str) -> None:
    form = FORMS[name]
    line = line_with(form)
    assert SECRET in json.loads(line)["message"]["content"][0]["text"]  # a legal form of it
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"raw": line}, {"answer": "done"}])
    result = fake.agent(transcripts=tmp_path / "runs", env={"SERVICE_TOKEN": SECRET}).run_sync("x")
    assert result["status"] == 0, result
    raw = (Path(present(result["transcript"])) / "stdout.jsonl").read_text("utf-8")
    (masked,) = [text for text in raw.splitlines() if "before" in text]
    # The rest of the line is as it was, byte for byte.
    assert masked == line.replace(form, MASK)
    for text in raw.splitlines():
        assert SECRET not in json.dumps(json.loads(text), ensure_ascii=False)


def test_escaped_spans_cover_whole_escapes_and_only_secrets() -> None:
    redactor = Redactor({"API_KEY": SECRET})
    data = ("x\\\\u0041 " + FORMS["all-u"] + " y " + FORMS["go"] + "\\ud83d\\ude00 \\\\/").encode()
    spans = redactor.escaped_spans(data)
    assert [data[a:b].decode() for a, b in spans] == [FORMS["all-u"], FORMS["go"]]
    # An escaped backslash before "u0041" is no \u escape: nothing found there.
    assert redactor.escaped_spans(b"\\\\u0073k-ant \\/") == []
    assert Redactor({}).escaped_spans(data) == []
    # A character beyond the BMP, as a surrogate pair, is one character.
    astral = Redactor({"API_KEY": "token-\U0001d49c-value"})
    data = b'"token-\\ud835\\udc9c-value"'
    assert [data[a:b] for a, b in astral.escaped_spans(data)] == [data[1:-1]]


def test_a_run_without_secrets_writes_stdout_untouched(tmp_path: Path) -> None:
    line = line_with(FORMS["all-u"])
    fake = FakeCLI(tmp_path, "claude")
    fake.script([{"init": True}, {"raw": line}, {"answer": "done"}])
    result = fake.agent(transcripts=tmp_path / "runs").run_sync("x")
    raw = (Path(present(result["transcript"])) / "stdout.jsonl").read_text("utf-8")
    assert line in raw.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["all-u", "mixed"])
def test_an_escaped_secret_split_across_reads_is_masked(tmp_path: Path, name: str) -> None:
    """The line arrives in pieces (the CLI pauses inside the escaped secret,
    after a long start): each piece is a read of its own."""
    form = FORMS[name]
    line = line_with(form).replace("before ", "before " + "\\u001b[0m" * 20_000)
    split = line.index(form) + len(form) // 2
    fake = FakeCLI(tmp_path, "claude")
    fake.script(
        [
            {"init": True},
            {"raw": line[:split], "nl": False},
            {"sleep": 0.3},
            {"raw": line[split:]},
            {"answer": "done"},
        ]
    )
    result = fake.agent(transcripts=tmp_path / "runs", env={"SERVICE_TOKEN": SECRET}).run_sync("x")
    raw = (Path(present(result["transcript"])) / "stdout.jsonl").read_text("utf-8")
    (masked,) = [text for text in raw.splitlines() if "before" in text]
    assert masked == line.replace(form, MASK)


def test_a_long_unfinished_line_cut_inside_an_escaped_secret_masks_it_whole(
    tmp_path: Path,
) -> None:
    """A line longer than the writer holds is written in pieces, the last
    bytes a secret could span kept back; a secret fully ``\\u``-escaped (6
    bytes per character) that starts before such a cut is masked whole."""
    from coding_genesis._observers.transcript import _MAX_HOLD, _RawFile

    form = FORMS["all-u"].encode()
    redactor = Redactor({"API_KEY": SECRET})
    head = b'{"type":"x","t":"' + b"y" * (_MAX_HOLD + 1000)
    for back in (1, 60, len(form) - 1):  # how far before the cut the secret starts
        writer = _RawFile(os.open(tmp_path, os.O_RDONLY), f"out-{back}", redactor)
        # One read: the head, the secret, then filler so that the cut (the
        # read's length - what is kept back) falls `back` bytes into the secret.
        pad = b"w" * (writer._keep + back - len(form))
        writer.write(head + form + pad)
        writer.write(b' end"}\n')
        writer.close()
        written = (tmp_path / f"out-{back}").read_bytes()
        assert written == head + MASK.encode() + pad + b' end"}\n', back
