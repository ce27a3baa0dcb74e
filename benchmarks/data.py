"""Deterministic claude stream-json workloads, built from real recordings.

The recordings in ``templates/`` (copied from the real ``claude`` CLI's
output) give the shape of every line; this module varies ids and contents
with a seeded RNG so each run measures exactly the same bytes:

* most lines are 0.4–3 KiB (assistant text, Bash/Write ``tool_use`` and their
  ``tool_result``; sizes log-uniform, like a real session),
* a few are huge Bash tool results (1–20 MiB, the output appears twice, in
  ``content`` and in ``tool_use_result.stdout``, as claude writes it),
* contents hold code-like text with quotes, newlines and some non-ASCII, so
  the JSON has escapes to decode.

A stream is three files: ``head`` (the init line), ``body`` (the events) and
``tail`` (the result line), so a fake CLI can repeat the body to any size
without repeating the terminal event.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["MIB", "Stream", "generate", "line_with", "load_templates"]

MIB = 1024 * 1024
TEMPLATES = Path(__file__).with_name("templates")

_WORDS = [
    "def",
    "return",
    "self",
    "value",
    "result",
    "path",
    "import",
    "from",
    "class",
    "async",
    "await",
    "none",
    "true",
    "false",
    "for",
    "while",
    "if",
    "else",
    "elif",
    "try",
    "except",
    "finally",
    "raise",
    "with",
    "yield",
    "lambda",
    "data",
    "config",
    "parser",
    "event",
    "stream",
    "chunk",
    "buffer",
    "line",
    "error",
    "status",
    "process",
    "signal",
    "timeout",
    "agent",
    "tool",
    "call",
    "output",
    "input",
    "file",
    "test",
    "assert",
    "expected",
    "actual",
    "count",
    "index",
    "offset",
    "résumé",
    "naïve",
    "café",
    "—",
    "→",
    "λ",
    "中文",
    "✓",
]


@dataclass(frozen=True)
class Stream:
    """Where a generated stream lives and what is in it."""

    head: Path
    body: Path
    tail: Path
    #: JSON lines in head + body + tail.
    lines: int
    #: Bytes in head + body + tail.
    size: int
    #: Lines in the body alone (what one extra repetition of it adds).
    body_lines: int
    #: Bytes of the longest line.
    max_line: int

    def files(self, body_repeat: int = 1) -> str:
        """The ``BENCH_FAKE_FILES`` value that makes the fake CLI send this stream."""
        return f"{self.head}\n{self.body}*{body_repeat}\n{self.tail}"

    def params(self) -> dict[str, Any]:
        """JSON-ready description, as the figures take it."""
        return {
            "head": str(self.head),
            "body": str(self.body),
            "tail": str(self.tail),
            "lines": self.lines,
            "size": self.size,
            "body_lines": self.body_lines,
            "head_lines": 1,
            "max_line": self.max_line,
        }

    def read(self) -> bytes:
        return self.head.read_bytes() + self.body.read_bytes() + self.tail.read_bytes()


def load_templates() -> dict[str, dict[str, Any]]:
    """One parsed line per shape, from the real recordings."""
    bash = _lines(TEMPLATES / "claude_bash_allowed.jsonl")
    write = _lines(TEMPLATES / "claude_write.jsonl")
    return {
        "init": bash[0],
        "bash_use": bash[1],
        "bash_result": bash[2],
        "text": bash[3],
        "result": bash[4],
        "write_use": write[1],
        "write_result": write[2],
    }


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _text_pool(rng: random.Random, size: int) -> str:
    """Code-like text: indented lines of words, quotes, escapes and non-ASCII."""
    lines: list[str] = []
    total = 0
    while total < size:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 12))]
        indent = "    " * rng.randint(0, 3)
        if rng.random() < 0.2:
            words.append(f'"{rng.choice(_WORDS)}"')
        if rng.random() < 0.1:
            words.append("\t# \\n")
        line = indent + " ".join(words)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


class _Maker:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.raw = {kind: orjson.dumps(obj) for kind, obj in load_templates().items()}
        self.pool = _text_pool(self.rng, 256 * 1024)
        self.session = self._uuid()
        self.overhead: dict[str, int] = {}

    def _copy(self, kind: str) -> dict[str, Any]:
        obj: dict[str, Any] = orjson.loads(self.raw[kind])
        return obj

    def _uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def text(self, n: int) -> str:
        n = max(n, 1)
        if n <= len(self.pool):
            start = self.rng.randrange(0, len(self.pool) - n + 1)
            return self.pool[start : start + n]
        reps = n // len(self.pool) + 1
        start = self.rng.randrange(0, len(self.pool))
        return (self.pool * (reps + 1))[start : start + n]

    def target(self) -> int:
        """A line size, log-uniform between 400 B and 3 KiB."""
        return int(math.exp(self.rng.uniform(math.log(400), math.log(3072))))

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["session_id"] = self.session
        obj["uuid"] = self._uuid()
        return obj

    def _fit(self, kind: str, build: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """Build a line of about the target size: template overhead + content."""
        if kind not in self.overhead:
            self.overhead[kind] = len(orjson.dumps(build("")))
        return build(self.text(self.target() - self.overhead[kind]))

    def init(self) -> dict[str, Any]:
        return self._stamp(self._copy("init"))

    def assistant_text(self) -> dict[str, Any]:
        def build(text: str) -> dict[str, Any]:
            obj = self._copy("text")
            obj["message"]["content"][0]["text"] = text
            return self._stamp(obj)

        return self._fit("text", build)

    def tool_pair(self, big: int = 0) -> list[dict[str, Any]]:
        tool_id = f"toolu_{self.rng.getrandbits(64):016x}"
        if big or self.rng.random() < 0.7:
            use = self._copy("bash_use")
            block = use["message"]["content"][0]
            block["id"] = tool_id
            block["input"]["command"] = self.text(self.rng.randint(20, 300))

            def build(text: str) -> dict[str, Any]:
                obj = self._copy("bash_result")
                obj["message"]["content"][0]["tool_use_id"] = tool_id
                obj["message"]["content"][0]["content"] = text
                obj["tool_use_result"]["stdout"] = text
                return self._stamp(obj)

            if big:
                result = build(self.text(big // 2))
            else:
                # The output appears twice in the line: half the target each.
                self.overhead.setdefault("bash_result", len(orjson.dumps(build(""))))
                result = build(self.text((self.target() - self.overhead["bash_result"]) // 2))
        else:
            use = self._copy("write_use")
            block = use["message"]["content"][0]
            block["id"] = tool_id
            block["input"]["file_path"] = f"/work/repo/src/module_{self.rng.randrange(100)}.py"
            block["input"]["content"] = self.text(self.target() - 600)
            result = self._copy("write_result")
            result["message"]["content"][0]["tool_use_id"] = tool_id
            result["tool_use_result"]["filePath"] = block["input"]["file_path"]
        return [self._stamp(use), result]

    def result(self, turns: int) -> dict[str, Any]:
        obj = self._stamp(self._copy("result"))
        obj["num_turns"] = turns
        obj["result"] = "Done: the benchmark stream is complete."
        return obj


def generate(
    directory: Path, events: int, big_mib: tuple[float, ...] = (), seed: int = 7
) -> Stream:
    """Write a stream of about ``events`` body lines (plus ``big_mib`` huge tool
    results spread evenly through it) under ``directory``; same seed, same bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    maker = _Maker(seed)
    dumps = orjson.dumps
    head = directory / "head.jsonl"
    body = directory / "body.jsonl"
    tail = directory / "tail.jsonl"
    head.write_bytes(dumps(maker.init()) + b"\n")
    big_at = [(int((i + 1) * events / (len(big_mib) + 1)), mib) for i, mib in enumerate(big_mib)]
    count = 0
    turns = 0
    longest = 0
    out: list[bytes] = []
    with body.open("wb") as fh:
        while count < events:
            big = big_at.pop(0)[1] if big_at and count >= big_at[0][0] else None
            if big is not None:
                objs = maker.tool_pair(int(big * MIB))
            elif maker.rng.random() < 0.45:
                objs = [maker.assistant_text()]
            else:
                objs = maker.tool_pair()
            turns += 1
            for obj in objs:
                line = dumps(obj) + b"\n"
                longest = max(longest, len(line))
                out.append(line)
                count += 1
            if len(out) >= 4096:
                fh.write(b"".join(out))
                out.clear()
        fh.write(b"".join(out))
    tail.write_bytes(dumps(maker.result(turns)) + b"\n")
    size = head.stat().st_size + body.stat().st_size + tail.stat().st_size
    longest = max(longest, head.stat().st_size, tail.stat().st_size)
    return Stream(head, body, tail, lines=count + 2, size=size, body_lines=count, max_line=longest)


def line_with(kind: str, size: int = 0, seed: int = 11) -> bytes:
    """One line for the correctness checks: ``"big"`` (a valid Bash tool result
    of ``size`` bytes), ``"invalid_utf8"`` (a text line with one bad byte) or
    ``"broken"`` (an object cut after its first ``{``)."""
    maker = _Maker(seed)
    if kind == "big":
        return orjson.dumps(maker.tool_pair(size)[1]) + b"\n"
    if kind == "invalid_utf8":
        obj = maker.assistant_text()
        obj["message"]["content"][0]["text"] = "before \x00MARK after"
        return orjson.dumps(obj).replace(b"\\u0000MARK", b"\xff\xfe") + b"\n"
    if kind == "broken":
        return b'{"type":"assistant","message":{\n'
    raise ValueError(f"unknown line kind {kind!r}")
