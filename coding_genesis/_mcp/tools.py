"""The MCP tools: what a client may ask of the server's parts, each a small
handler over :class:`~coding_genesis._serve.service.Service`.

A tool's arguments are untrusted data.  ``run`` and ``open_session`` turn
theirs into a request body and hand it to the path every served request
takes (:mod:`coding_genesis._serve.actions`, which reads it under the one
untrusted-input list, with ``cwd`` under the root and the safe start); the
other tools take a few plain fields, each checked here.  Every answer is
built through the API's models and redacted as every response is; a request
refused, or arguments that are wrong, is a tool error in words.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coding_genesis._serve import models
from coding_genesis._serve.actions import Problem, open_session, send_turn, start_run
from coding_genesis._serve.inbox import Refusal
from coding_genesis._serve.runs import Entry
from coding_genesis._serve.service import Service
from coding_genesis._serve.sessions import Live
from coding_genesis._util.redact import Redactor
from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.events import Event

__all__ = ["TOOLS", "Progress", "Tool", "ToolError", "call"]

#: Reports progress: (how far, a message).  A no-op when the client asked none.
Progress = Callable[[float, str], Awaitable[None]]
#: The longest a tool waits for a run or a turn it did not start (seconds).
MAX_WAIT = 3600.0
#: Seconds a cancelled run or turn may take to stop its process tree.
STOP_WITHIN = 30.0


class ToolError(Exception):
    """Arguments that are wrong, or a request not taken: the words the client reads."""


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what it does, its arguments' and its answer's schemas."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output: type[BaseModel]
    handler: Callable[[Service, dict[str, Any], Progress], Awaitable[BaseModel]]

    @property
    def output_schema(self) -> dict[str, Any]:
        return self.output.model_json_schema(mode="serialization", by_alias=True)


# -- arguments ---------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _RunOnly(_Args):
    run: str = Field(min_length=1, max_length=100, description="its request id or run id")


class _RunRef(_RunOnly):
    wait: float = Field(
        0, ge=0, le=MAX_WAIT, description="seconds to wait for its end (0: answer at once)"
    )


class _RunFilter(_Args):
    state: models.RunState | None = None
    backend: str | None = Field(None, max_length=100)
    limit: int = Field(20, ge=1, le=1000)


class _SessionRef(_Args):
    session: str = Field(min_length=1, max_length=100, description="the session's id")


class _TurnArgs(models.TurnRequest):
    session: str = Field(min_length=1, max_length=100, description="the session's id")
    wait: bool = Field(True, description="answer once the turn ends (false: at once)")


class _ApprovalFilter(_Args):
    state: models.ApprovalState | None = Field("pending", description="null: every state")
    run: str | None = Field(None, max_length=100)
    session: str | None = Field(None, max_length=100)
    limit: int = Field(100, ge=1, le=1000)


class _AnswerArgs(models.Answer):
    approval: str = Field(min_length=1, max_length=100, description="the approval's full id")


def _args(model: type[_Args] | type[BaseModel], arguments: Mapping[str, Any]) -> Any:
    """The arguments read into ``model``, or a :class:`ToolError` in words."""
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        words = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ())) or 'arguments'}: {err.get('msg')}"
            for err in exc.errors()
        )
        raise ToolError(f"invalid arguments: {words}"[:2000]) from None


def _schema(model: type[BaseModel], **extra: Any) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    schema.setdefault("properties", {}).update(extra)
    return schema


def _refused(problem: Problem) -> ToolError:
    return ToolError(f"{problem.error}: {problem.message}")


# -- runs --------------------------------------------------------------------------------


def _run_view(service: Service, ref: str) -> models.Run:
    view = service.history.find(ref)
    if view is None:
        raise ToolError(f"not_found: no run {ref[:100]!r}")
    return models.Run.model_validate(view)


def _event_words(event: Event) -> str:
    """One event as a progress message: its type and, for a tool call, the tool."""
    data = event.to_dict()
    kind = str(data.get("type") or "event")
    tool = data.get("tool") or data.get("name")
    return f"{kind}: {tool}" if isinstance(tool, str) and tool else kind


async def _follow(
    agent: CodingGenesisAgent | None,
    done: anyio.Event,
    redactor: Redactor | None,
    first: str,
    progress: Progress,
) -> None:
    """Until ``done``, each event of ``agent`` (a run's, a session's) a
    progress report, after ``first``."""
    if agent is None:
        return
    send, receive = anyio.create_memory_object_stream[str](1000)
    unsubscribe = agent.subscribe(lambda event: _offer(send, _event_words(event)))
    count = 0
    try:
        async with anyio.create_task_group() as tg:

            async def ended() -> None:
                await done.wait()
                send.close()  # what was said before the end is still reported

            tg.start_soon(ended)
            await progress(count, first)
            async for words in receive:
                count += 1
                await progress(count, redactor.text(words) if redactor is not None else words)
    finally:
        unsubscribe()
        send.close()
        receive.close()


def _offer(send: Any, words: str) -> None:
    """A progress message offered (dropped when the client reads too slowly)."""
    with contextlib.suppress(
        anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError
    ):
        send.send_nowait(words)


async def _until_done(service: Service, entry: Entry, progress: Progress) -> None:
    """Wait for ``entry``'s end, reporting progress; the call cancelled (the
    client gave up, or went away), the run is cancelled and its tree stopped."""
    assert entry.done is not None
    try:
        first = f"run {entry.id}: {entry.state}"
        await _follow(entry.agent, entry.done, entry.redactor, first, progress)
        await entry.done.wait()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            service.runs.cancel(entry, "its MCP call was cancelled")
            with anyio.move_on_after(STOP_WITHIN):
                await entry.done.wait()
        raise


async def _run(service: Service, arguments: dict[str, Any], progress: Progress) -> BaseModel:
    wait = arguments.pop("wait", True)
    if not isinstance(wait, bool):
        raise ToolError(f"invalid arguments: wait must be true or false, got {wait!r}"[:300])
    started = start_run(service, orjson.dumps(arguments))
    if isinstance(started, Problem):
        raise _refused(started)
    if wait:
        await _until_done(service, started, progress)
    return _run_view(service, started.id)


async def _get_run(service: Service, arguments: dict[str, Any], progress: Progress) -> BaseModel:
    ref = _args(_RunRef, arguments)
    entry = service.runs.held(ref.run)
    if entry is not None and entry.done is not None and ref.wait > 0:
        with anyio.move_on_after(ref.wait):
            await entry.done.wait()
    return _run_view(service, ref.run)


async def _list_runs(service: Service, arguments: dict[str, Any], progress: Progress) -> BaseModel:
    asked = _args(_RunFilter, arguments)
    views = await service.history.listing(
        state=asked.state,
        backend=asked.backend,
        source=None,
        failed=None,
        since=None,
        limit=asked.limit,
    )
    return models.RunList(runs=[models.Run.model_validate(v) for v in views])


async def _cancel_run(service: Service, arguments: dict[str, Any], progress: Progress) -> BaseModel:
    ref = _args(_RunOnly, arguments)
    entry = service.runs.held(ref.run)
    if entry is None:
        _run_view(service, ref.run)  # not_found, or:
        raise ToolError("not_cancellable: that run is not held by this server (finished or lost)")
    if not service.runs.cancel(entry, "cancelled through MCP"):
        raise ToolError("not_cancellable: that run has finished")
    if entry.done is not None:
        with anyio.move_on_after(STOP_WITHIN):
            await entry.done.wait()
    return _run_view(service, entry.id)


# -- sessions ----------------------------------------------------------------------------


def _live(service: Service, ref: str) -> Live:
    live = service.sessions.find(ref)
    if live is None:
        raise ToolError(f"not_found: no session {ref[:100]!r}")
    return live


async def _open_session(
    service: Service, arguments: dict[str, Any], progress: Progress
) -> BaseModel:
    opened = await open_session(service, orjson.dumps(arguments))
    if isinstance(opened, Problem):
        raise _refused(opened)
    return models.SessionView.model_validate(opened.view())


async def _send_turn(service: Service, arguments: dict[str, Any], progress: Progress) -> BaseModel:
    asked = _args(_TurnArgs, arguments)
    live = _live(service, asked.session)
    sessions = service.sessions
    fields = asked.model_dump(exclude_none=True, exclude={"session", "wait"})
    turn = send_turn(service, live, fields)
    if isinstance(turn, Problem):
        raise _refused(turn)
    done = live.turn_done
    if asked.wait and done is not None:
        first = f"session {live.id}: turn {turn['turn']} running"
        try:
            await _follow(live.agent, done, live.redactor, first, progress)
            await done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                if live.running == turn["turn"]:
                    await sessions.interrupt(live)
                with anyio.move_on_after(STOP_WITHIN):
                    await done.wait()
            raise
    return models.Turn.model_validate(turn)


async def _close_session(
    service: Service, arguments: dict[str, Any], progress: Progress
) -> BaseModel:
    live = _live(service, _args(_SessionRef, arguments).session)
    await service.sessions.close(live, "closed through MCP")
    return models.SessionView.model_validate(live.view())


# -- approvals ---------------------------------------------------------------------------


async def _list_approvals(
    service: Service, arguments: dict[str, Any], progress: Progress
) -> BaseModel:
    asked = _args(_ApprovalFilter, arguments)
    views = service.inbox.listing(
        state=asked.state, run=asked.run, session=asked.session, limit=asked.limit
    )
    return models.ApprovalList(approvals=[models.Approval.model_validate(v) for v in views])


async def _answer_approval(
    service: Service, arguments: dict[str, Any], progress: Progress
) -> BaseModel:
    answer = _args(_AnswerArgs, arguments)
    try:
        view = service.inbox.answer(
            answer.approval,
            allow=answer.decision != "deny",
            always=answer.decision == "allow_always",
            message=answer.message,
            end_turn=answer.end_turn,
            by=answer.by,
            channel="mcp",
            via="mcp",
        )
    except Refusal as refusal:
        raise ToolError(f"{refusal.error}: {refusal.message}") from None
    return models.Approval.model_validate(view)


_WAIT = {"type": "boolean", "default": True, "description": "answer once the run ends"}

#: Every tool, in the order they are listed.
TOOLS: tuple[Tool, ...] = (
    Tool(
        "run",
        "Run a coding-agent CLI (claude, codex, gemini, opencode, qwen, failer) on a prompt "
        "under supervision and answer its result (status, error, message, usage, failure "
        "analysis). The arguments are one `genesis run-many` line, read as untrusted data; "
        "cwd lies under the server's root. Reports progress while it works.",
        _schema(models.RunRequest, wait=_WAIT),
        models.Run,
        _run,
    ),
    Tool(
        "get_run",
        "One run by its request id or run id, with its result once finished "
        "(wait: at most this many seconds for its end).",
        _RunRef.model_json_schema(),
        models.Run,
        _get_run,
    ),
    Tool(
        "list_runs",
        "Runs, newest first: this server's and every recorded run.",
        _RunFilter.model_json_schema(),
        models.RunList,
        _list_runs,
    ),
    Tool(
        "cancel_run",
        "Cancel a queued or running run: its process tree is stopped, its answer is status "
        "130 cancelled.",
        _RunOnly.model_json_schema(),
        models.Run,
        _cancel_run,
    ),
    Tool(
        "open_session",
        "Open a live session (one CLI process across turns): a run's settings without a "
        "prompt. Its tool calls wait in the approval inbox unless approvals is none.",
        _schema(models.SessionRequest),
        models.SessionView,
        _open_session,
    ),
    Tool(
        "send_turn",
        "Send a turn to an open session and (wait) answer it once it ends, with its result. "
        "model and permissions switch this turn and the next ones, output_schema shapes this "
        "turn's answer (permissions and output_schema need a trusted server); a switch the "
        "backend cannot make answers the turn 64.",
        _TurnArgs.model_json_schema(),
        models.Turn,
        _send_turn,
    ),
    Tool(
        "close_session",
        "Close a session: its turn ends, its CLI's process tree is stopped.",
        _SessionRef.model_json_schema(),
        models.SessionView,
        _close_session,
    ),
    Tool(
        "list_approvals",
        "The tool calls that wait in the approval inbox (state pending), or the settled ones.",
        _ApprovalFilter.model_json_schema(),
        models.ApprovalList,
        _list_approvals,
    ),
    Tool(
        "answer_approval",
        "Answer a pending approval by its full id: allow, allow_always or deny (with a "
        "message). The first answer wins.",
        _AnswerArgs.model_json_schema(),
        models.Approval,
        _answer_approval,
    ),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


async def call(
    service: Service, name: str, arguments: Mapping[str, Any] | None, progress: Progress
) -> dict[str, Any]:
    """Tool ``name`` called with ``arguments``: its answer as JSON, redacted
    (:class:`ToolError`: why not, in words)."""
    tool = _BY_NAME.get(name)
    if tool is None:
        raise ToolError(f"no tool {name[:100]!r}; the tools: {', '.join(_BY_NAME)}")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise ToolError("invalid arguments: expected an object")
    answer = await tool.handler(service, dict(arguments or {}), progress)
    data = answer.model_dump(mode="json", by_alias=True)
    redacted: dict[str, Any] = service.redactor.deep(data)
    return redacted
