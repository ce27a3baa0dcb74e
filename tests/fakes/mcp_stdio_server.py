"""A tiny MCP server over stdio (newline-delimited JSON-RPC), for the real CLIs.

``python3 mcp_stdio_server.py NAME [MARKER]``: when started, it appends its
name to the file MARKER (if given: the proof that a CLI started it), and the
value of ``FAKE_MCP_SECRET`` after it when that is set (the proof that the
server's own environment reached it); it
answers ``initialize``, ``tools/list`` (one tool, ``echo``) and ``tools/call``
(``echo`` answers ``<NAME> echoes: <text>``); it exits when stdin closes.
Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

ECHO_TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(request_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "fake"
    if len(sys.argv) > 2:
        with open(sys.argv[2], "a", encoding="utf-8") as marker:
            secret = os.environ.get("FAKE_MCP_SECRET")
            marker.write(name + (f" {secret}" if secret else "") + "\n")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue  # a notification
        method = message.get("method")
        if method == "initialize":
            params = message.get("params") or {}
            answer(
                message["id"],
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": name, "version": "1.0"},
                },
            )
        elif method == "tools/list":
            answer(message["id"], {"tools": [ECHO_TOOL]})
        elif method == "tools/call":
            text = ((message.get("params") or {}).get("arguments") or {}).get("text", "")
            answer(message["id"], {"content": [{"type": "text", "text": f"{name} echoes: {text}"}]})
        else:
            answer(message["id"], {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
