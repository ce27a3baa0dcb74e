"""A prompt's parts (:mod:`coding_genesis.prompts`) in each protocol's content
blocks: one encoder per CLI, pure, called by the control protocol's
``start_turn`` (a prompt with parts always runs live: ``Backend.runs_live``).

The text comes last, after the images and files it speaks of (the order the
model APIs recommend).  What each CLI was measured to do with them (claude
2.1.330, codex 0.169, qwen 0.24.4 against the fake model server,
``tests/real_cli/test_prompt_parts.py``):

- claude: a user message's ``image`` block (base64) reaches the model as it
  is.  A file is the text ``@<path>``, which the model reads with its tools
  (claude does not expand it in stream-json input; a ``document`` block would
  carry a text or PDF file's content, not a reference).
- codex: an ``image`` input with a ``data:`` URL reaches the model as an
  ``input_image`` of the same URL (the bytes checked at the door are the bytes
  sent: the file is never read again).  A file is a ``text`` input
  ``@<path>``: codex's ``mention {name, path}`` input of a file reached the
  model not at all (it is for codex's apps and skills), a silent drop.
- ACP: an ``image`` content block only where the agent's ``initialize``
  answer says ``promptCapabilities.image`` (else the turn is refused in those
  words); a file is a ``resource_link`` (``file://``), which every agent takes.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coding_genesis.prompts import Image

if TYPE_CHECKING:
    from coding_genesis.prompts import FileRef
    from coding_genesis.request import Request

__all__ = ["acp_prompt", "claude_content", "codex_input", "file_mention"]


def file_mention(ref: FileRef) -> str:
    """A file as the text claude and codex read as a mention of it."""
    return f"@{ref.path}"


def _base64(image: Image) -> str:
    return base64.b64encode(image.data or b"").decode("ascii")


def claude_content(turn: Request) -> list[dict[str, Any]]:
    """The content of claude's user message: the parts, then the text."""
    blocks: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, Image):
            source = {"type": "base64", "media_type": part.media_type, "data": _base64(part)}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append({"type": "text", "text": file_mention(part)})
    blocks.append({"type": "text", "text": turn.prompt})
    return blocks


def codex_input(turn: Request) -> list[dict[str, Any]]:
    """``turn/start``'s ``input``: the parts, then the text."""
    items: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, Image):
            items.append({"type": "image", "url": f"data:{part.media_type};base64,{_base64(part)}"})
        else:
            items.append({"type": "text", "text": file_mention(part), "text_elements": []})
    items.append({"type": "text", "text": turn.prompt, "text_elements": []})
    return items


def acp_prompt(turn: Request) -> list[dict[str, Any]]:
    """``session/prompt``'s content blocks: the parts, then the text."""
    blocks: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, Image):
            blocks.append({"type": "image", "data": _base64(part), "mimeType": part.media_type})
        else:
            name = os.path.basename(part.path) or part.path
            blocks.append({"type": "resource_link", "uri": Path(part.path).as_uri(), "name": name})
    blocks.append({"type": "text", "text": turn.prompt})
    return blocks
