"""JSON-RPC 2.0 as the two-way protocols speak it (``codex app-server``, the
Agent Client Protocol): what kind of message one object is, an id, an error
answer.  Pure helpers, one truth for both codecs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from coding_genesis.control import Incoming, Outgoing, ProtocolFault

__all__ = [
    "INVALID_PARAMS",
    "NOT_SERVED",
    "dispatch",
    "envelope",
    "error_answer",
    "valid_id",
]

#: The error code a request we do not serve is answered with ("method not found").
NOT_SERVED = -32601
#: The error code of a request whose params we cannot read.
INVALID_PARAMS = -32602

#: What a fault quotes of a bad value, at most.
_QUOTED = 200


def valid_id(value: object) -> bool:
    """A JSON-RPC id: a string or an integer (a bool is not one)."""
    return isinstance(value, str) or type(value) is int


def error_answer(rid: Any, code: int, message: str) -> Outgoing:
    """The error answer to the peer's request ``rid``."""
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def envelope(
    obj: object,
) -> Literal["response", "request", "notification"] | ProtocolFault:
    """What kind of JSON-RPC 2.0 message ``obj`` is (a ``"jsonrpc"`` member may be
    left out, as codex 0.169 does), or the fault that it is none: a response has
    no ``method``; a request has a ``method`` and an ``id``; a notification a
    ``method`` only."""
    if not isinstance(obj, Mapping):
        return ProtocolFault(f"not a JSON-RPC message: {type(obj).__name__}")
    version = obj.get("jsonrpc", "2.0")
    if version != "2.0":
        return ProtocolFault(f"not JSON-RPC 2.0: jsonrpc={repr(version)[:_QUOTED]}")
    method = obj.get("method")
    if method is None:
        return "response"
    if not isinstance(method, str):
        return ProtocolFault(f"a method that is not a string: {repr(method)[:_QUOTED]}")
    return "request" if "id" in obj else "notification"


#: A handler of a response, or of a request or notification with its method.
Handler = Callable[[Mapping[str, Any]], Sequence[Incoming]]
MethodHandler = Callable[[Mapping[str, Any], str], Sequence[Incoming]]


def dispatch(
    obj: dict[str, Any], response: Handler, request: MethodHandler, notification: MethodHandler
) -> Sequence[Incoming]:
    """``obj`` read by the codec's handler of its kind (:func:`envelope`), or
    the fault that it is no JSON-RPC message: each codec's ``receive``."""
    kind = envelope(obj)
    if isinstance(kind, ProtocolFault):
        return (kind,)
    if kind == "response":
        return response(obj)
    return (request if kind == "request" else notification)(obj, obj["method"])
