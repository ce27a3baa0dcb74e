"""What a served request may ask: the rules of an untrusted ``run-many`` line.

The one module of the server that reads a body.  What a body may set is the
house's one list (:data:`~coding_genesis.capabilities.UNTRUSTED`, asked through
``read_requests``, which applies
:func:`~coding_genesis.capabilities.untrusted_problem`); what its backend
cannot do is the one check (:func:`~coding_genesis.capabilities.check`, asked
by the agent's constructor and ``session()``), in its one wording; the rest of
the server asks :func:`read_run_request` and :func:`read_session_request` only.

A body is read exactly as a ``run-many`` line is: one JSON object, the same
refusals in the same words, the same defaults; then its ``cwd`` must lie under
the server's root (symlinks resolved), and it is validated as a
:class:`~coding_genesis.batch.RunSpec` and its agent built, so that a request
that could never run is refused (422) instead of queued.  Its request is built
once, by the agent it runs on (``Request.build``), as every call's is.

A served request may also set the one field no batch line has
(:data:`SERVED_FIELDS`): ``approvals`` (``"inbox"``: each tool call its CLI
asks about waits in the server's approval inbox; ``"none"``, the default: the
permission level decides).  It is no option of an agent but the name of the
server's own approver: data, never code.  Its deadline is the request option
``approval_timeout`` (data in ``UNTRUSTED``, whose check bounds it by a day).  A body
still cannot name an approver (even with ``--trusted-input``).  A live
session's tool calls wait in the inbox unless it says ``"approvals": "none"``;
it also sets ``keep_results`` (its bounded history, at most the server's bound)
and none of a run's one-shot fields (:data:`NOT_IN_A_SESSION`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from coding_genesis._lines import read_requests, with_safe_start
from coding_genesis._util.checks import required_seconds
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.approval import Approver
from coding_genesis.batch import InvalidRequest, RunSpec, coerce_request
from coding_genesis.capabilities import UNTRUSTED, untrusted_problem
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.session import Session

__all__ = [
    "NOT_IN_A_SESSION",
    "SERVED_FIELDS",
    "Accepted",
    "AcceptedSession",
    "InboxFor",
    "Refused",
    "Rules",
    "read_run_request",
    "read_session_request",
    "read_turn_request",
]

#: What a served request may set that no batch line has (see the module's doc):
#: no option of an agent (those are classified in ``capabilities.UNTRUSTED``).
SERVED_FIELDS = frozenset({"approvals"})
#: ... and what a session sets besides.
SESSION_FIELDS = SERVED_FIELDS | {"keep_results"}
#: A batch line's fields a live session does not take: a session opens
#: without a prompt (its turns bring them), a turn is never retried, and a
#: worktree's settings mean nothing without one.  (``isolation`` and
#: ``verify`` themselves are the capability check's to refuse, in its words:
#: a session runs in its working directory.)
NOT_IN_A_SESSION = (
    "prompt",
    "retry",
    "request_key",
    "isolation_base",
    "keep",
    "carry_uncommitted",
    "include_diff",
)
#: The inbox's approver of one request, given its deadline in seconds.
InboxFor = Callable[[float], Approver]


@dataclass(frozen=True, slots=True)
class Rules:
    """What the server reads every request under: ``trusted``
    (``--trusted-input``), the ``root`` every ``cwd`` lies under (absolute,
    resolved), the ``defaults`` of what a body leaves out, the backend of a
    body that names none, the inbox's deadline when a body sets none, and
    ``approvals``: ``"request"`` (a body chooses: a run's calls go to the
    inbox when it asks, a session's unless it says ``none``) or ``"inbox"``
    (``--approvals inbox``: every call of every request waits in the inbox;
    a body cannot opt out)."""

    trusted: bool
    root: str
    defaults: Mapping[str, Any]
    fallback_backend: str
    approval_timeout: float = 300.0
    approvals: str = "request"
    #: Each backend's CLI as the command line finds it (``cli_path``,
    #: ``node_path``: ``$GENESIS_<NAME>_PATH``...), for a body that sets none:
    #: only ``_cli`` reads the environment.
    cli_paths: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def mode(self, taken: Mapping[str, Any], default: str) -> str | Refused:
        """Where a request's tool calls are answered: ``inbox`` or ``none``."""
        asked = taken.get("approvals")
        if self.approvals == "inbox":
            if asked == "none":
                return Refused(
                    '"approvals": "none" refused: this server sends every tool call to its '
                    "approval inbox (genesis serve --approvals inbox)"
                )
            return "inbox"
        return str(asked or default)


@dataclass(frozen=True, slots=True)
class Accepted:
    """A request that may run: its spec and the agent that will run it."""

    spec: RunSpec
    agent: CodingGenesisAgent
    #: The working directory it runs in (absolute, symlinks resolved, under the root).
    cwd: str
    #: ``inbox`` (its tool calls wait in the approval inbox) or ``none``.
    approvals: str = "none"


@dataclass(frozen=True, slots=True)
class AcceptedSession:
    """A session that may open: its agent and the session, not yet entered."""

    agent: CodingGenesisAgent
    session: Session
    backend: str
    model: str | None
    cwd: str
    name: str | None
    approvals: str
    approval_timeout: float
    #: The turns it keeps (its results, and the server's list of its turns).
    keep: int
    #: The body's data fields (what a resume reads again, under the rules of
    #: that day: never a field only ``--trusted-input`` accepts).
    data: dict[str, Any]


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


def _served(
    body: bytes, names: frozenset[str] = SERVED_FIELDS
) -> tuple[bytes, dict[str, Any]] | Refused:
    """The body without the served fields ``names``, and those fields checked,
    with the inbox's deadline (``approval_timeout``, left in the body: an
    option like any other, checked where every option is) (a body that is no
    JSON object is left as it is, for the batch line's words)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body, {}
    if not isinstance(value, dict):
        return body, {}
    taken = {k: value.pop(k) for k in names if k in value}
    if value.get("approval_timeout") is not None:
        taken["approval_timeout"] = value["approval_timeout"]
    approvals = taken.get("approvals")
    if approvals is not None and approvals not in ("inbox", "none"):
        return Refused(f'approvals must be "inbox" or "none", got {approvals!r}'[:300])
    return orjson.dumps(value), taken


def _line(body: bytes, trusted: bool, root: str) -> tuple[dict[str, Any], str] | Refused:
    """The body read as one batch line, and its cwd under the root."""
    found = read_requests([body], trusted=trusted)
    if not found:
        return Refused('the body is empty: send a JSON object with at least "prompt"')
    value = found[0]
    if isinstance(value, InvalidRequest):
        return Refused(_line_words(value.reason))
    cwd = _under(root, value.get("cwd"))
    if isinstance(cwd, Refused):
        return cwd
    return dict(value), cwd


def _settings(
    value: dict[str, Any], cwd: str, rules: Rules, owned: Mapping[str, Any]
) -> dict[str, Any] | Refused:
    """A line's settings with the server's defaults, its own settings
    (``owned``), the CLI paths and (untrusted) the safe start."""
    value = {**value, "cwd": cwd}
    value = {**rules.defaults, **{k: v for k, v in value.items() if v is not None}, **owned}
    fallback = rules.fallback_backend
    value.setdefault("backend", fallback)
    if value.get("cli_path") is None:  # as `genesis run-many` finds a line's CLI
        found = rules.cli_paths.get(str(value["backend"]), {})
        value.update({k: v for k, v in found.items() if value.get(k) is None})
    [value] = with_safe_start([value], fallback, rules.trusted)
    if isinstance(value, InvalidRequest):
        return Refused(value.reason)
    return dict(value)


def _approval_settings(
    taken: Mapping[str, Any], mode: str, default_timeout: float, inbox: InboxFor | None
) -> dict[str, Any] | Refused:
    """The approver and deadline of a request whose calls wait in the inbox
    (the server's own settings: over anything of the body's; the deadline
    checked by the option's own check, before the approver is made of it)."""
    if mode != "inbox" or inbox is None:
        return {}
    given = taken.get("approval_timeout")
    try:
        timeout = default_timeout if given is None else required_seconds("approval_timeout", given)
    except ConfigError as exc:
        return Refused(str(exc)[:300])
    return {"approver": inbox(timeout), "approval_timeout": timeout}


def read_run_request(
    body: bytes,
    rules: Rules,
    *,
    owned: Mapping[str, Any],
    inbox: InboxFor | None = None,
) -> Accepted | Refused:
    """One request body read as a ``run-many`` line under the same rules
    (:class:`Rules`), with ``owned``, the server's own settings (its
    observers), over anything; ``inbox``: the approval inbox's approver, for
    ``"approvals": "inbox"``."""
    served = _served(body)
    if isinstance(served, Refused):
        return served
    body, taken = served
    line = _line(body, rules.trusted, rules.root)
    if isinstance(line, Refused):
        return line
    value, cwd = line
    mode = rules.mode(taken, "none")
    if isinstance(mode, Refused):
        return mode
    approving = _approval_settings(taken, mode, rules.approval_timeout, inbox)
    if isinstance(approving, Refused):
        return approving
    settings = _settings(value, cwd, rules, {**owned, **approving})
    if isinstance(settings, Refused):
        return settings
    spec = coerce_request(0, settings)
    if isinstance(spec, dict):
        return Refused(str(spec.get("message") or "invalid request"))
    try:  # the one capability check (the inbox's approver on a one-way backend too)
        agent = CodingGenesisAgent(spec.backend, **spec.agent_kwargs())
    except ConfigError as exc:
        return Refused(str(exc))
    except TypeError as exc:  # a setting of the wrong shape (trusted input)
        return Refused(f"invalid request: {exc}")
    return Accepted(spec, agent, cwd, mode)


def read_session_request(
    body: bytes,
    rules: Rules,
    *,
    inbox: InboxFor | None,
    history: int,
    resume: str | None = None,
) -> AcceptedSession | Refused:
    """A session's body (its options: a batch line's, under the same rules,
    without a prompt or the one-shot fields) read as :func:`read_run_request`
    reads a run's; its calls wait in the inbox unless ``"approvals": "none"``;
    it keeps at most ``history`` turns; ``resume``: the CLI session it
    continues (over the body's)."""
    served = _served(body if body.strip() else b"{}", SESSION_FIELDS)
    if isinstance(served, Refused):
        return served
    body, taken = served
    try:
        given = orjson.loads(body)
    except orjson.JSONDecodeError:
        given = None
    if isinstance(given, dict):
        named = [k for k in NOT_IN_A_SESSION if k in given]
        if named:
            return Refused(
                f"refused field(s) {', '.join(named)}: a live session opens without a prompt "
                "(each turn brings one: POST /sessions/{id}/turns) and takes none of a run's "
                "one-shot fields (retry, request_key, a worktree's settings)"
            )
    line = _line(body, rules.trusted, rules.root)
    if isinstance(line, Refused):
        return line
    value, cwd = line
    keep = taken.get("keep_results", min(history, 100))
    if type(keep) is not int or not 0 <= keep <= history:
        return Refused(
            f"keep_results must be a whole number from 0 to {history} (this server keeps at "
            f"most {history} turns of a session), got {keep!r}"[:300]
        )
    mode = rules.mode(taken, "inbox")
    if isinstance(mode, Refused):
        return mode
    approving = _approval_settings(taken, mode, rules.approval_timeout, inbox)
    if isinstance(approving, Refused):
        return approving
    settings = _settings(value, cwd, rules, approving)
    if isinstance(settings, Refused):
        return settings
    value = settings
    backend = value.pop("backend")
    asked = value.pop("resume", None)
    forking = {k: value.pop(k) for k in ("fork", "resume_at") if k in value}
    try:
        agent = CodingGenesisAgent(backend, **value)
        session = agent.session(keep_results=keep, resume=resume or asked, **forking)
    except (ConfigError, AgentUsageError) as exc:
        return Refused(str(exc))
    except TypeError as exc:  # an unknown setting or one of the wrong shape (trusted input)
        return Refused(f"invalid request: {exc}")
    data = {k: v for k, v in (given or {}).items() if UNTRUSTED.get(k) == "data"}
    data.update({k: v for k, v in taken.items() if v is not None})
    model, name = value.get("model"), value.get("name")
    return AcceptedSession(
        agent=agent,
        session=session,
        backend=str(backend),
        model=model if isinstance(model, str) else None,
        cwd=cwd,
        name=name if isinstance(name, str) else None,
        approvals=mode,
        approval_timeout=float(approving.get("approval_timeout") or agent.config.approval_timeout),
        keep=keep,
        data=data,
    )


def read_turn_request(fields: Mapping[str, Any], rules: Rules) -> dict[str, Any] | Refused:
    """A session turn's fields (its prompt and the options of ``send()``,
    None left out) checked as a body's are, by the one untrusted-input list:
    what ``send()`` is then given (what the session's backend cannot switch
    is the capability check's, which answers the turn 64)."""
    asked = {k: v for k, v in fields.items() if v is not None}
    problem = untrusted_problem(asked, trusted=rules.trusted)
    if problem is not None:
        return Refused(problem)
    return asked


def root_path(root: str | os.PathLike[str]) -> str:
    """The server's root as requests are checked against it: absolute, resolved."""
    return os.path.realpath(Path(root).expanduser())
