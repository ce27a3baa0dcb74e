"""A batch line read as data: what ``genesis run-many`` and ``genesis serve``
both read a line (a request body) with, below either of them.

:func:`read_requests` decodes each line and refuses what the one
untrusted-input list (:func:`~coding_genesis.capabilities.untrusted_problem`)
refuses; :func:`with_safe_start` gives an untrusted line's CLI the user's
settings alone.  What the command line finds in the environment (the CLI
paths, the defaults) it adds itself: only ``_cli`` reads environment variables.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_requests", "with_safe_start"]


def read_requests(lines: list[bytes], *, trusted: bool = False) -> list[Any]:
    """One request per non-blank line: the decoded object, or an
    :class:`~coding_genesis.batch.InvalidRequest` saying what is wrong with it
    (unless ``trusted``, a line setting more than the data
    :data:`~coding_genesis.capabilities.UNTRUSTED` allows)."""
    import orjson

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.batch import InvalidRequest
    from coding_genesis.capabilities import untrusted_problem

    requests: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            requests.append(InvalidRequest(reason=f"line {number}: invalid JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            requests.append(
                InvalidRequest(
                    reason=f"line {number}: expected a JSON object, got {type(value).__name__}"
                )
            )
            continue
        problem = untrusted_problem(value, trusted=trusted)
        if problem is not None:
            requests.append(InvalidRequest(reason=f"line {number}: {problem}"))
            continue
        requests.append(value)
    return requests


def with_safe_start(requests: list[Any], fallback: str, trusted: bool) -> list[Any]:
    """Each untrusted batch line's CLI told to read the user's settings alone
    (its cwd is the file's to choose): ``setting_sources=("user",)`` for a
    backend that can be told, which is every built-in CLI (opencode and qwen,
    whose default reads the project's, included); a line cannot set it.  A
    line on a backend that cannot be told (codex-acp) is refused
    (:func:`~coding_genesis.capabilities.untrusted_backend_problem`), whether
    the line or the fallback names it.  ``trusted`` (``--trusted-input``):
    the lines as they are."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends import get_backend
    from coding_genesis.batch import InvalidRequest
    from coding_genesis.capabilities import untrusted_backend_problem

    if trusted:
        return requests
    out: list[Any] = []
    for request in requests:
        if isinstance(request, dict):
            name = request.get("backend") or fallback
            try:
                backend = get_backend(name)
            except Exception:  # noqa: BLE001  (an unknown backend: the line fails on its own)
                backend = None
            problem = None if backend is None else untrusted_backend_problem(backend)
            if problem is not None:
                request = InvalidRequest(reason=problem)
            elif backend is not None and ("user",) in backend.setting_sources:
                request = {**request, "setting_sources": ("user",)}
        out.append(request)
    return out
