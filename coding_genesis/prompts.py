"""Prompts with parts: text, images and file references.

A prompt is a string, or a sequence of parts: strings (its text), an
:class:`Image` (a file's or bytes') and a :class:`FileRef` (a file the agent is
pointed at and reads with its own tools).  Each part is checked at the door
(:func:`checked_prompt`): an image is read once, held to
:data:`MAX_IMAGE_BYTES`, and its media type is sniffed from its bytes, never
from its name.  The request keeps the text as its prompt (the run log, the
request key and the transcripts are unchanged) and the other parts beside it;
a backend maps them to its CLI's content blocks, or the capability check
refuses them in its words.  An image's bytes are never in an event or a log:
its size and sha256 stand for it (``repr()``).

A line of data (a ``run-many`` line, a served request) writes a part as a
JSON object: ``{"type": "image", "data": "<base64>"}``, ``{"type": "image",
"path": "x.png"}`` or ``{"type": "file", "path": "notes.md"}``; a part with a
path reads a local file and sends it to the model, so only trusted input may
name one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from coding_genesis._util.checks import check_prompt
from coding_genesis.errors import ConfigError

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_BYTES",
    "FileRef",
    "Image",
    "Part",
    "Prompt",
    "checked_prompt",
    "described",
    "part_kind",
    "path_parts",
    "sniff",
    "text_of",
]

#: The largest image a prompt may carry (the APIs' own limits are near it).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: The image types every CLI's model API takes, by their first bytes.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff(data: bytes) -> str | None:
    """The media type of an image's bytes (None: none of :data:`IMAGE_TYPES`)."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True, slots=True)
class Image:
    """An image in a prompt: a file's (``path=``, read at the door) or bytes
    (``data=``).  Its media type is sniffed from the bytes."""

    path: str | None = None
    data: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.path is None and self.data is None:
            raise ConfigError("Image needs path= or data=")
        if self.path is not None:
            object.__setattr__(self, "path", os.fspath(self.path))
        if self.data is not None:
            if not isinstance(self.data, bytes | bytearray | memoryview):
                raise ConfigError(f"Image data= must be bytes, got {type(self.data).__name__}")
            object.__setattr__(self, "data", bytes(self.data))

    @property
    def media_type(self) -> str | None:
        """Sniffed from the bytes (None before they are read, or not an image)."""
        return sniff(self.data) if self.data is not None else None

    @property
    def sha256(self) -> str:
        """What stands for the bytes in events and logs."""
        return hashlib.sha256(self.data or b"").hexdigest()

    def __repr__(self) -> str:
        held = "unread" if self.data is None else f"{len(self.data)} bytes, sha256 {self.sha256}"
        return f"Image(path={self.path!r}, {held})"


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file the agent is pointed at (it reads it with its own tools); a
    relative path is the request's working directory's."""

    path: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", os.fspath(self.path))


#: One part of a prompt.
Part: TypeAlias = str | Image | FileRef
#: What ``run()`` and ``send()`` take: text, or text with images and files.
Prompt: TypeAlias = str | Sequence[Part]


def part_kind(part: Image | FileRef) -> str:
    """The kind a protocol declares it maps (``ControlProtocol.prompt_parts``)."""
    return "image" if isinstance(part, Image) else "file"


def described(part: Image | FileRef) -> dict[str, object]:
    """A part as a record shows it: an image by its type, size and sha256,
    never its bytes; a file by its path."""
    if isinstance(part, FileRef):
        return {"type": "file", "path": part.path}
    size = len(part.data) if part.data is not None else None
    return {
        "type": "image",
        "path": part.path,
        "media_type": part.media_type,
        "bytes": size,
        "sha256": part.sha256 if part.data is not None else None,
    }


def _of_json(value: Mapping[object, object]) -> Image | FileRef:
    """A part a line of data wrote as an object (see the module's docstring)."""
    kind, path, data = value.get("type"), value.get("path"), value.get("data")
    extra = sorted(str(k) for k in value if k not in ("type", "path", "data"))
    if extra or kind not in ("image", "file") or (path is None) == (data is None):
        raise ConfigError(
            f"a prompt part object is {{'type': 'image', 'data': base64}}, {{'type': 'image', "
            f"'path': ...}} or {{'type': 'file', 'path': ...}}, got keys {sorted(map(str, value))}"
        )
    if path is not None:
        if not isinstance(path, str) or not path:
            raise ConfigError(f"a prompt part's path must be a non-empty string, got {path!r}")
        return Image(path=path) if kind == "image" else FileRef(path)
    if kind != "image" or not isinstance(data, str):
        raise ConfigError("a prompt part's data is an image's bytes in base64 (a string)")
    try:
        return Image(data=base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise ConfigError("a prompt part's data is not valid base64") from None


def path_parts(prompt: object) -> list[str]:
    """The parts of a line of data's prompt that name a local path (what
    untrusted input may not send to a model)."""
    if isinstance(prompt, str) or not isinstance(prompt, Sequence):
        return []
    named: list[str] = []
    for part in prompt:
        if isinstance(part, Image | FileRef) and part.path is not None:
            named.append(part.path)
        elif isinstance(part, Mapping) and part.get("path") is not None:
            named.append(str(part.get("path")))
    return named


def _where(path: str, cwd: str) -> str:
    if "\0" in path or not path:
        raise ConfigError(f"a prompt part's path is not a file name: {path!r}")
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def _loaded(image: Image, cwd: str) -> Image:
    """``image`` with its bytes, held to the cap and sniffed."""
    data, path = image.data, image.path
    if data is None:
        assert path is not None
        path = _where(path, cwd)
        data = _read(path)
    name = repr(path) if path is not None else "(bytes)"
    if len(data) > MAX_IMAGE_BYTES:
        raise ConfigError(_too_big(name, len(data)))
    if sniff(data) is None:
        raise ConfigError(
            f"image {name} is not a PNG, JPEG, GIF or WebP image (by its first bytes, "
            "whatever its name says)"
        )
    return Image(path=path, data=data)


def _read(path: str) -> bytes:
    """A regular file's bytes, up to the cap: opened without blocking (a FIFO
    or a device would hold the door open forever), refused unless regular."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"image {path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"image {path!r} is not a regular file")
        if info.st_size > MAX_IMAGE_BYTES:
            raise ConfigError(_too_big(repr(path), info.st_size))
        chunks: list[bytes] = []
        left = MAX_IMAGE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"image {path!r} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _too_big(name: str, size: int) -> str:
    return (
        f"image {name} is {size} bytes; a prompt's image may be at most "
        f"{MAX_IMAGE_BYTES} bytes (20 MiB)"
    )


def _file(ref: FileRef, cwd: str) -> FileRef:
    path = _where(ref.path, cwd)
    if not os.path.isfile(path):
        raise ConfigError(f"file {path!r} of the prompt is not a file (or does not exist)")
    return FileRef(path)


def text_of(prompt: object) -> str:
    """A prompt's text, unchecked: a string as it is, a sequence's text parts
    joined by blank lines (its other parts left out: what a listing of
    requests shows, never an image's bytes)."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, Sequence) or isinstance(prompt, bytes | bytearray):
        return ""
    return "\n\n".join(part for part in prompt if isinstance(part, str) and part.strip())


def checked_prompt(prompt: object, cwd: str) -> tuple[str, tuple[Image | FileRef, ...]]:
    """The prompt's text and its other parts, checked at the door: a string,
    or a sequence of strings, :class:`Image`, :class:`FileRef` (and their JSON
    objects).  Its text is the text parts joined by blank lines (it must say
    what to do); an image is read and held to :data:`MAX_IMAGE_BYTES`, a path
    is made absolute against ``cwd`` (a file must exist)."""
    if isinstance(prompt, str):
        return check_prompt(prompt), ()
    if not isinstance(prompt, Sequence) or isinstance(prompt, bytes | bytearray):
        raise ConfigError(
            "prompt must be a string or a sequence of parts (str, Image, FileRef), "
            f"got {type(prompt).__name__}"
        )
    texts: list[str] = []
    parts: list[Image | FileRef] = []
    for part in prompt:
        if isinstance(part, str):
            texts.append(part)
            continue
        if isinstance(part, Mapping):
            part = _of_json(part)
        if isinstance(part, Image):
            parts.append(_loaded(part, cwd))
        elif isinstance(part, FileRef):
            parts.append(_file(part, cwd))
        else:
            raise ConfigError(
                f"a prompt part must be a str, Image or FileRef, got {type(part).__name__}"
            )
    text = text_of(texts)
    if parts and not text:
        raise ConfigError("prompt has parts but no text: say what the agent should do with them")
    return check_prompt(text), tuple(parts)
