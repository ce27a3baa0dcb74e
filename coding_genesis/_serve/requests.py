"""What a served request may ask: the rules of an untrusted ``run-many`` line.

The one module of the server that knows where those rules live today (the
command line's reading of a batch line: ``read_requests``, its untrusted-input
list, the approver fields, the safe start of an untrusted line, the CLI
paths).  When the house's one untrusted-input list lands, this file is what
changes; the rest of the server asks :func:`read_run_request` only.

A body is read exactly as a ``run-many`` line is: one JSON object, the same
refusals in the same words, the same defaults; then its ``cwd`` must lie under
the server's root (symlinks resolved), and it is validated as a
:class:`~coding_genesis.batch.RunSpec` and its agent built, so that a request
that could never run is refused (422) instead of queued.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coding_genesis._cli.approver_options import APPROVER_FIELDS
from coding_genesis._cli.repository import with_safe_start
from coding_genesis._cli.run_many import (
    UNTRUSTED_FIELDS,
    UNTRUSTED_OPTIONS,
    read_requests,
    with_cli_paths,
)
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.batch import InvalidRequest, RunSpec, coerce_request
from coding_genesis.errors import ConfigError

__all__ = [
    "APPROVER_FIELDS",
    "UNTRUSTED_FIELDS",
    "UNTRUSTED_OPTIONS",
    "Accepted",
    "Refused",
    "read_run_request",
]


@dataclass(frozen=True, slots=True)
class Accepted:
    """A request that may run: its spec and the agent that will run it."""

    spec: RunSpec
    agent: CodingGenesisAgent
    #: The working directory it runs in (absolute, symlinks resolved, under the root).
    cwd: str


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a request cannot run, in the words a ``run-many`` line gets."""

    message: str


def _line_words(reason: str) -> str:
    """A batch line's reason without its ``line 1:`` (a body is no line of a file)."""
    return reason.removeprefix("line 1: ")


def _under(root: str, cwd: object) -> str | Refused:
    """``cwd`` (relative: to the root) as a real directory under ``root``."""
    if cwd is None:
        return root
    if not isinstance(cwd, str) or not cwd or "\0" in cwd:
        return Refused(f"cwd must be a path (a string), got {cwd!r}"[:300])
    real = os.path.realpath(os.path.join(root, cwd))
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        return Refused(
            f"refused cwd {cwd[:200]!r}: it lies outside the server's root {root} "
            "(symlinks resolved); a served request runs only under --root"
        )
    if not os.path.isdir(real):
        return Refused(f"cwd {cwd[:200]!r} is not a directory under the server's root")
    return real


def read_run_request(
    body: bytes,
    *,
    trusted: bool,
    root: str,
    defaults: Mapping[str, Any],
    fallback_backend: str,
    owned: Mapping[str, Any],
) -> Accepted | Refused:
    """One request body read as a ``run-many`` line under the same rules
    (``trusted``: ``--trusted-input``), its ``cwd`` under ``root`` (an
    absolute, resolved path), ``defaults`` for what it does not set and
    ``owned``, the server's own settings (its observers), over anything."""
    found = read_requests([body], trusted=trusted)
    if not found:
        return Refused('the body is empty: send a JSON object with at least "prompt"')
    value = found[0]
    if isinstance(value, InvalidRequest):
        return Refused(_line_words(value.reason))
    cwd = _under(root, value.get("cwd"))
    if isinstance(cwd, Refused):
        return cwd
    value = {**value, "cwd": cwd}
    value = {**defaults, **{k: v for k, v in value.items() if v is not None}, **owned}
    value.setdefault("backend", fallback_backend)
    [value] = with_cli_paths([value], argparse.Namespace(backend=fallback_backend))
    [value] = with_safe_start([value], fallback_backend, trusted)
    spec = coerce_request(0, value)
    if isinstance(spec, dict):
        return Refused(str(spec.get("message") or "invalid request"))
    try:
        agent = CodingGenesisAgent(spec.backend, **spec.agent_kwargs())
    except ConfigError as exc:
        return Refused(str(exc))
    except TypeError as exc:  # a setting of the wrong shape (trusted input)
        return Refused(f"invalid request: {exc}")
    return Accepted(spec, agent, cwd)


def root_path(root: str | os.PathLike[str]) -> str:
    """The server's root as requests are checked against it: absolute, resolved."""
    return os.path.realpath(Path(root).expanduser())
