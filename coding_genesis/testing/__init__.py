"""The conformance kit: does a backend translate its CLI's output and survive its failures?

For a plug-in author (or a backend of ours), given a backend and recordings of
its CLI (``<name>_<case>.jsonl`` with ``.rc`` and ``.stderr`` beside it)::

    from coding_genesis.testing import check_backend

    def test_my_backend_conforms():
        check_backend(MyBackend(), "tests/recordings")

Plain functions that raise :class:`AssertionError` with a message saying what
is wrong, in which recording; no pytest magic (``pytest_params`` is an optional
helper).  What is checked:

* **the contract** (:func:`check_contract`): the backend is a
  :class:`~coding_genesis.backend.Backend` (a plug-in of 0.1.0's Protocol is
  checked as the adapter it is wrapped in), each member of the base class has its
  declared type, and its translator is a :class:`~coding_genesis.events.Translator`.
* **translation** (:func:`check_translation`), per case name: ``text*`` ends in
  success with a session id, a non-empty final text and usage; ``tool*``,
  ``shell*``, ``bash*``, ``write*`` show tool calls with names, and their results
  when the run completed; ``resume*`` has a session id; every tool result
  answers a tool call; every recording decodes without an error of the translator.
* **bad and unknown lines** (:func:`check_bad_lines`): the translator never raises
  on unknown types or fields of the wrong type (each recorded line mutated), and
  garbage lines between the recorded ones are skipped and counted without
  changing the result.
* **failure hints** (:func:`check_failure_hint`): a case named for an HTTP status
  (``401``, ``429``...) fails with the expected category (:data:`CATEGORIES`,
  extend it with ``categories=``); ``<status>once`` is a recovery by the CLI itself.
* **the stop path** (:func:`check_stop_path`): a fake CLI replays a recording up
  to (not including) its terminal line, starts a "tool" in its own session and
  hangs; the run must end in a timeout with the partial result (session id,
  tool calls) and no process of the run left alive or unreaped.

An ACP backend (an agent speaking the Agent Client Protocol) is checked by
:func:`check_acp_backend` against the kit's fake ACP agent
(:mod:`coding_genesis.testing.acp`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from coding_genesis.backend import Backend, as_backend, is_factory
from coding_genesis.events import Translator
from coding_genesis.status import FailureCategory
from coding_genesis.testing.acp import FAKE_ACP_AGENT, check_acp_backend

__all__ = [
    "CATEGORIES",
    "FAKE_ACP_AGENT",
    "Recording",
    "check_acp_backend",
    "check_backend",
    "check_bad_lines",
    "check_contract",
    "check_failure_hint",
    "check_stop_path",
    "check_translation",
    "find_recordings",
    "pytest_params",
]

#: Expected failure category of a recording named for an HTTP status.
CATEGORIES: Mapping[str, str] = {
    "401": "auth",
    "403": "auth",
    "429": "rate_limit",
    "500": "agent_error",
}

_STATUS_CASE = re.compile(r"^(\d{3})(once)?$")
_TOOL_CASES = ("tool", "shell", "bash", "write", "edit")
#: Lines that are not JSON objects, put between the recorded ones.
_GARBAGE = (
    b"not json at all",
    b"{truncated",
    b"[1, 2, 3]",
    b'"a string"',
    b"\xff\xfe binary \x00",
)
#: Objects of types no CLI prints.
_UNKNOWN = (
    b'{"type": "zz_unknown_type", "payload": {"a": 1}}',
    b'{"no_type_at_all": true}',
    b'{"type": 42}',
)


@dataclass(frozen=True)
class Recording:
    """One recorded run of a CLI: its stdout, exit code and stderr."""

    name: str
    case: str
    stdout: bytes
    returncode: int = 0
    stderr: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str], backend: str | None = None) -> Recording:
        """``path`` (a ``.jsonl``) with its ``.rc`` and ``.stderr`` if present."""
        file = Path(path)
        rc_file, err_file = file.with_suffix(".rc"), file.with_suffix(".stderr")
        rc = int(rc_file.read_text().strip() or 0) if rc_file.exists() else 0
        stderr = err_file.read_text(errors="replace") if err_file.exists() else ""
        prefix = f"{backend}_" if backend else ""
        stem = file.stem
        case = stem[len(prefix) :] if prefix and stem.startswith(prefix) else stem
        return cls(stem, case, file.read_bytes(), rc, stderr)


def find_recordings(directory: str | os.PathLike[str], backend: str) -> list[Recording]:
    """The recordings ``<backend>_<case>.jsonl`` in ``directory``."""
    return [
        Recording.load(path, backend) for path in sorted(Path(directory).glob(f"{backend}_*.jsonl"))
    ]


# -- helpers ---------------------------------------------------------------------


def _fail(recording: Recording | None, what: str) -> AssertionError:
    where = f"recording {recording.name!r}: " if recording is not None else ""
    return AssertionError(where + what)


def _agent(backend: Backend, **settings: Any) -> Any:
    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis.agent import CodingGenesisAgent

    settings.setdefault("ledger", False)
    settings.setdefault("circuit_breaker", None)
    return CodingGenesisAgent(backend, **settings)


def _replay(backend: Backend, recording: Recording, stdout: bytes | None = None) -> dict[str, Any]:
    result: dict[str, Any] = _agent(backend).replay(
        recording.stdout if stdout is None else stdout,
        returncode=recording.returncode,
        stderr=recording.stderr,
        cwd=tempfile.gettempdir(),
    )
    return result


def _decode(backend: Backend, data: bytes) -> Any:
    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally

    return Decoder(backend.translator(), RunTally(tempfile.gettempdir())).feed_all(data)


def _is_tool_case(case: str) -> bool:
    return case.startswith(_TOOL_CASES)


def _category(result: Mapping[str, Any]) -> str | None:
    failure = result.get("failure")
    return failure.get("category") if isinstance(failure, Mapping) else None


# -- the checks ------------------------------------------------------------------


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the declared type ``hint`` (the types the base class uses)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin is None:
        return isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    if not isinstance(value, origin):
        return False
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return all(_conforms(item, args[0]) for item in value)
    if origin is tuple:
        return len(value) == len(args) and all(map(_conforms, value, args))
    if origin in (frozenset, set, list, Sequence) and args:
        return not isinstance(value, str) and all(_conforms(item, args[0]) for item in value)
    if isinstance(value, Mapping) and len(args) == 2:
        return all(_conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items())
    return True


def _typed(owner: str, obj: object, hints: Mapping[str, Any]) -> list[str]:
    wrong = []
    for member, hint in hints.items():
        value = getattr(obj, member, _UNSET)
        if value is _UNSET:
            wrong.append(f"{owner} has no {member}")
        elif not _conforms(value, hint):
            wrong.append(f"{owner}.{member} is {value!r}, not {hint}")
    return wrong


_UNSET = object()


def check_contract(backend: Backend) -> None:
    """``backend`` against the base class: a :class:`Backend` whose every member has
    its declared type, with a name, an executable and a :class:`Translator`."""
    if not isinstance(backend, Backend):
        raise _fail(None, f"{backend!r} is not a coding_genesis.backend.Backend")
    wrong = _typed("backend", backend, get_type_hints(Backend))
    if any(problem.startswith(("backend has no name", "backend.name ")) for problem in wrong):
        raise _fail(None, f"{type(backend).__name__} breaks the contract: " + "; ".join(wrong))
    if not backend.name:
        wrong.append("backend.name is empty")
    if "backend has no executable" not in wrong and not backend.executable:
        wrong.append("backend.executable is empty")
    program = backend.default_program()
    if not _conforms(program, Sequence[str] | None):
        wrong.append(f"backend.default_program() is {program!r}, not strings or None")
    if not isinstance(backend.install_hint(), str):
        wrong.append("backend.install_hint() is not a string")
    translator = backend.translator()
    if isinstance(translator, Translator):
        wrong += _typed("translator", translator, get_type_hints(Translator))
    else:
        wrong.append(f"backend.translator() is {translator!r}, not a Translator")
    if wrong:
        raise _fail(None, f"backend {backend.name!r} breaks the contract: " + "; ".join(wrong))


def check_translation(backend: Backend, recording: Recording, *, usage: bool = True) -> None:
    """The recording's events and result are what its case says (see the module)."""
    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally
    from coding_genesis.events import ToolCallEvent, ToolResultEvent

    events: list[Any] = []
    decoder = Decoder(
        backend.translator(), RunTally(tempfile.gettempdir()), on_event=events.append
    ).feed_all(recording.stdout)
    if decoder.errors:
        raise _fail(recording, f"the translator raised on {decoder.errors} line(s)")
    calls = {e.id for e in events if isinstance(e, ToolCallEvent)}
    for event in events:
        if isinstance(event, ToolResultEvent) and event.id not in calls:
            raise _fail(recording, f"tool result {event.id!r} answers no tool call")
    result = _replay(backend, recording)
    case = recording.case
    if case.startswith("text"):
        if result["status"] != 0:
            raise _fail(recording, f"expected success, got {_summary(result)}")
        if not result["session_id"]:
            raise _fail(recording, "no session id (the CLI's session/thread line)")
        if not str(result["message"]).strip():
            raise _fail(recording, "no final text")
        if usage and not result["usage"]:
            raise _fail(recording, "no usage (pass usage=False if the CLI reports none)")
    if _is_tool_case(case):
        named = [e for e in events if isinstance(e, ToolCallEvent)]
        if not named or not all(e.name and e.name != "unknown" for e in named):
            raise _fail(recording, f"expected named tool calls, got {result['tool_usage']}")
        if result["status"] == 0 and not any(isinstance(e, ToolResultEvent) for e in events):
            raise _fail(recording, "the run completed but no tool result was translated")
    if case.startswith("resume") and not result["session_id"]:
        raise _fail(recording, "no session id in a resumed run")


def check_failure_hint(
    backend: Backend, recording: Recording, categories: Mapping[str, str] | None = None
) -> None:
    """A case named for an HTTP status fails with the expected category; its
    ``once`` variant is a success the CLI recovered to by itself."""
    match = _STATUS_CASE.match(recording.case)
    if match is None:
        return
    result = _replay(backend, recording)
    if match.group(2):
        if result["status"] != 0:
            raise _fail(recording, f"expected the CLI's own recovery, got {_summary(result)}")
        if result["cli_retries"] < 1:
            raise _fail(recording, "the CLI's retry is not visible (cli_retries is 0)")
        return
    expected = {**CATEGORIES, **(categories or {})}.get(match.group(1))
    if expected in ("internal", "not_found"):
        expected = FailureCategory(expected).value  # a name before 0.2 reads as its new one
    if result["status"] == 0:
        raise _fail(recording, "an API error was reported as a success")
    if expected is not None and _category(result) != expected:
        raise _fail(
            recording,
            f"failure category {_category(result)!r}, expected {expected!r} "
            f"(message: {str(result['message'])[:200]!r})",
        )


def _mutations(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    odd: tuple[Any, ...] = (None, [], {}, "", 0, True, "x" * 3, [None], {"type": None})
    for key in obj:
        for value in odd:
            yield {**obj, key: value}
    for key, value in obj.items():
        if isinstance(value, dict):
            for inner in value:
                for bad in odd:
                    yield {**obj, key: {**value, inner: bad}}
        elif isinstance(value, list):
            yield {**obj, key: [*value, None, 1, "s", []]}


def check_bad_lines(backend: Backend, recording: Recording) -> None:
    """Unknown and malformed input is skipped and counted, never fatal."""
    import json

    for raw in recording.stdout.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for mutated in _mutations(obj):
            try:
                backend.translator().translate(mutated)
            except Exception as exc:  # noqa: BLE001  (the conformance kit reports whatever a translator raised)
                shown = json.dumps(mutated, default=str)[:300]
                raise _fail(
                    recording,
                    f"the translator raised {type(exc).__name__}: {exc} on {shown}",
                ) from None
    clean = _replay(backend, recording)
    lines = recording.stdout.splitlines(keepends=True)
    noisy = bytearray()
    for i, line in enumerate(lines):
        noisy += _GARBAGE[i % len(_GARBAGE)] + b"\n"
        noisy += _UNKNOWN[i % len(_UNKNOWN)] + b"\n"
        noisy += line if line.endswith(b"\n") else line + b"\n"
    dirty = _replay(backend, recording, bytes(noisy))
    for key in ("status", "session_id", "tool_calls", "message", "cli_retries"):
        if dirty[key] != clean[key]:
            raise _fail(
                recording,
                f"garbage lines changed {key}: {clean[key]!r} became {dirty[key]!r}",
            )
    garbage = len(lines)  # one garbage line before each recorded one
    if dirty["skipped_lines"] - clean["skipped_lines"] < garbage:
        raise _fail(
            recording,
            f"{garbage} garbage lines were not all counted as skipped "
            f"(skipped_lines {clean['skipped_lines']} -> {dirty['skipped_lines']})",
        )


def _partial(backend: Backend, data: bytes) -> bytes:
    """The recorded stdout up to, not including, the line that ends the run."""
    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis._pipeline.decode import Decoder
    from coding_genesis._pipeline.tally import RunTally

    decoder = Decoder(backend.translator(), RunTally(tempfile.gettempdir()))
    kept = bytearray()
    for line in data.splitlines(keepends=True):
        if decoder.feed(line if line.endswith(b"\n") else line + b"\n"):
            break
        kept += line if line.endswith(b"\n") else line + b"\n"
    return bytes(kept)


def _run_processes(run_id: str) -> list[str]:
    import psutil

    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis._supervision.childenv import RUN_MARKER_ENV

    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.environ().get(RUN_MARKER_ENV) == run_id:
                found.append(f"{proc.pid} ({proc.info['status']})")
        except (psutil.Error, OSError):
            continue
    return found


def check_stop_path(
    backend: Backend,
    recording: Recording | None = None,
    *,
    program: Sequence[str] | None = None,
    prompt: str = "conformance",
    timeout: float = 2.0,
) -> dict[str, Any]:
    """A run that hangs mid-way (after the recording's lines but its terminal
    one, with a tool in its own session) is stopped at ``timeout``: status
    124, the partial result kept, no process of the run left.  ``program``
    (with ``prompt``) runs a CLI of the backend's own that hangs by itself
    instead of the kit's replayer.  Returns the response."""
    if (recording is None) == (program is None):
        raise ValueError("give either a recording or a program")
    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis.run_events import RunStartedEvent

    workdir = tempfile.mkdtemp(prefix="genesis-conformance-")
    try:
        expected: dict[str, Any] | None = None
        if recording is not None:
            partial = _partial(backend, recording.stdout)
            stdout_file = os.path.join(workdir, "stdout.jsonl")
            with open(stdout_file, "wb") as file:
                file.write(partial)
            replayer = str(Path(__file__).with_name("_replayer.py"))
            program = [sys.executable, replayer, stdout_file]
            decoded = _decode(backend, partial)
            expected = {
                "session_id": decoded.tally.session_id,
                "tool_calls": decoded.tally.tool_calls,
            }
        assert program is not None
        agent = _agent(backend, cli_path=list(program), timeout=timeout, grace=0.5, cwd=workdir)
        started: list[RunStartedEvent] = []

        def seen(event: Any) -> None:
            if isinstance(event, RunStartedEvent):
                started.append(event)

        agent.subscribe(seen)
        result: dict[str, Any] = agent.run_sync(prompt)
        label = recording.name if recording is not None else " ".join(program)
        where = f"stop path of {label!r}: "
        if result["status"] != 124 or result["error"] != "timeout":
            raise AssertionError(where + f"expected a timeout (124), got {_summary(result)}")
        if result["completed"]:
            raise AssertionError(where + "a run stopped before its result is marked completed")
        if expected is not None:
            for key, value in expected.items():
                if result[key] != value:
                    raise AssertionError(
                        where + f"partial result lost: {key} is {result[key]!r}, expected {value!r}"
                    )
        run_id = result.get("run_id") or ""
        left = _wait_gone(run_id)
        if left:
            raise AssertionError(where + f"processes of the run left behind: {left}")
        for event in started:
            if _alive(event.pid):
                raise AssertionError(where + f"the CLI (pid {event.pid}) was not reaped")
        return result
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != "dead"
    except psutil.Error:
        return False


def _wait_gone(run_id: str, within: float = 5.0) -> list[str]:
    """Processes of the run still there after ``within`` seconds (a stopped
    process may take a moment to be reaped by its new parent)."""
    deadline = time.monotonic() + within
    while True:
        left = _run_processes(run_id) if run_id else []
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _summary(result: Mapping[str, Any]) -> str:
    return (
        f"status {result.get('status')} ({result.get('error')}), "
        f"category {_category(result)!r}, message {str(result.get('message'))[:200]!r}"
    )


def check_backend(
    backend: Backend | Callable[[], Backend],
    recordings: str | os.PathLike[str] | Iterable[Recording],
    *,
    categories: Mapping[str, str] | None = None,
    usage: bool = True,
    stop_path: bool = True,
) -> list[str]:
    """Every check on every recording; one AssertionError listing every
    problem found.  Returns what was checked."""
    instance: Backend = _instance(backend)
    if isinstance(recordings, str | os.PathLike):
        found = find_recordings(recordings, instance.name)
        if not found:
            raise AssertionError(
                f"no recordings {instance.name}_<case>.jsonl in {os.fspath(recordings)!r}"
            )
    else:
        found = list(recordings)
    problems: list[str] = []
    checked: list[str] = []

    def attempt(what: str, check: Callable[[], object]) -> None:
        try:
            check()
            checked.append(what)
        except AssertionError as exc:
            problems.append(str(exc))

    attempt("contract", partial(check_contract, instance))
    for rec in found:
        attempt(f"{rec.name}: translation", partial(check_translation, instance, rec, usage=usage))
        attempt(f"{rec.name}: bad lines", partial(check_bad_lines, instance, rec))
        attempt(f"{rec.name}: failure hint", partial(check_failure_hint, instance, rec, categories))
    if stop_path and found:
        pick = _stop_path_recording(found)
        attempt(f"{pick.name}: stop path", lambda: check_stop_path(instance, pick))
    if problems:
        raise AssertionError(
            f"backend {instance.name!r} does not conform ({len(problems)} problem(s)):\n- "
            + "\n- ".join(problems)
        )
    return checked


def _instance(backend: Backend | Callable[[], Backend]) -> Backend:
    """A backend, made if ``backend`` makes one; a plug-in of 0.1.0's Protocol is
    wrapped as the registry wraps it."""
    return as_backend(backend() if is_factory(backend) else backend)  # type: ignore[operator]


def _stop_path_recording(found: Sequence[Recording]) -> Recording:
    for rec in found:
        if _is_tool_case(rec.case):
            return rec
    for rec in found:
        if rec.case.startswith("text"):
            return rec
    return found[0]


def pytest_params(backends: Iterable[str], directory: str | os.PathLike[str]) -> list[Any]:
    """``pytest.param(backend_name, recording, id=...)`` for every recording of
    every backend, for ``@pytest.mark.parametrize(("name", "recording"), ...)``."""
    import pytest

    return [
        pytest.param(name, rec, id=rec.name)
        for name in backends
        for rec in find_recordings(directory, name)
    ]
