"""The two-way control contract: how a backend speaks to a CLI kept running
across turns (a *live session*).

A backend that can hold a session returns a :class:`ControlProtocol` from
:meth:`Backend.control() <coding_genesis.backend.Backend.control>`.  Like the
rest of a backend, a protocol is pure: it turns our intents (open, a turn, an
answer to an approval request, interrupt, steer, close) into the JSON objects
to write on the CLI's stdin, and says what each object the CLI writes means
(:data:`Incoming`): the model's call of one of the caller's functions
(``tools=``) included, which the session runs and :meth:`ControlProtocol.answer_tool`
answers.  It never touches the process: the session machinery
writes, reads, times, stops and reaps, as for a one-shot run.

One protocol object serves one session (it may keep state: ids of our
requests, the thread and turn ids).  Every method returns the objects to
write, in order (each becomes one JSON line).  The three protocols it is
made for: claude's stream-json control protocol, codex's app-server JSON-RPC
and the Agent Client Protocol.

Hooks (``hooks=``, :mod:`coding_genesis.hooks`) plug in the same way: a
protocol that reports hook points says so in :attr:`ControlProtocol.hook_effects`,
turns each into a :class:`HookCall` and answers it in
:meth:`ControlProtocol.answer_hook`; one that reports none needs nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, final

from coding_genesis._util.renamed import old_names
from coding_genesis._util.schema import OutputSchema
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.hooks import HookEffect, HookEvent, HookInput, HookResult
from coding_genesis.request import Request
from coding_genesis.result import ContextUsage

if TYPE_CHECKING:
    from coding_genesis.events import Translator
    from coding_genesis.questions import UserAnswer, UserQuestion
    from coding_genesis.request import CommandSpec
    from coding_genesis.tools import ToolResult

__all__ = [
    "FORWARD",
    "Answered",
    "ControlIntent",
    "ControlProtocol",
    "Forward",
    "HookCall",
    "Incoming",
    "McpServer",
    "Opening",
    "Outgoing",
    "PermissionAsk",
    "ProtocolFault",
    "QuestionAsked",
    "Ready",
    "Reply",
    "ToolCall",
    "TurnBegan",
    "TurnEnded",
    "Unknown",
    "UnparsedLine",
]

#: One JSON object to write on the CLI's stdin (one line).
Outgoing: TypeAlias = dict[str, Any]


# -- what a line from the CLI means ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Forward:
    """An ordinary line: decode it with the protocol's translator (text, tool
    calls, usage, the turn's result).  ``obj``: decode this object instead
    (what :meth:`ControlProtocol.unparsed` could read of a line that could
    not be parsed)."""

    obj: Mapping[str, Any] | None = None


#: The Forward of the line itself.
FORWARD = Forward()


@dataclass(frozen=True, slots=True)
class Ready:
    """The opening handshake is done (``session_id``: the CLI's session or
    thread id, when this message names it)."""

    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """The CLI asks to make a tool call and waits for :meth:`ControlProtocol.answer`.

    ``key`` is the protocol's own handle of the question (a request id);
    ``request`` the typed question, whose run, turn and cwd fields the session
    fills in.
    """

    key: Any
    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class HookCall:
    """The CLI reached a hook point: the session runs its hooks of
    ``input.event`` and answers with :meth:`ControlProtocol.answer_hook`.

    ``key`` is the protocol's own handle (a request id; None when the CLI only
    told us and waits for nothing: its hooks observe, whatever the event's
    :attr:`ControlProtocol.hook_effects`); ``input`` the typed hook input, whose run,
    turn, cwd and backend fields the session fills in.  ``ask``: the same
    point also asks the approver (claude's ``PreToolUse`` when ``approver=`` is
    set): it is asked after the hooks, with the input they changed, unless
    they block.
    """

    key: Any
    input: HookInput
    ask: PermissionAsk | None = None


@dataclass(frozen=True, slots=True)
class QuestionAsked:
    """The CLI asks the user ``question`` and waits for
    :meth:`ControlProtocol.answer_question` (only when ``asks_questions``);
    ``key`` is the protocol's own handle of it (a CLI asking several questions
    at once asks them as one each, answered together by the protocol)."""

    key: Any
    question: UserQuestion


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model calls one of the caller's functions (``tools=``) and the CLI
    waits for :meth:`ControlProtocol.answer_tool`.

    ``key`` is the protocol's own handle of the call; ``call_id`` the tool
    call's id in the CLI's stream, when known.  ``reported``: the CLI's own
    stream reports the call and its result as for any tool (claude, codex),
    so the session adds no event of its own; when False the session emits the
    :class:`~coding_genesis.events.ToolCallEvent` and
    :class:`~coding_genesis.events.ToolResultEvent` itself.
    """

    key: Any
    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None
    reported: bool = True


@dataclass(frozen=True, slots=True)
class TurnBegan:
    """The CLI began a turn of its own between ours (codex compacting its
    thread, a thread goal, a background terminal): the session starts its
    turn of the CLI's (``trigger="cli"``) at once, which ends at the CLI's
    :class:`TurnEnded` and takes an interrupt or a steer meanwhile; a
    caller's next turn waits for it."""


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The running turn is over.

    ``how``: ``completed`` (the CLI answered; its result line, if any, is
    forwarded too), ``interrupted`` (after :meth:`ControlProtocol.interrupt`,
    or an answer whose decision has ``end_turn``: ``message`` is its message),
    ``failed`` (the CLI says the turn failed: ``message`` says why).
    """

    how: Literal["completed", "interrupted", "failed"] = "completed"
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Answered:
    """The CLI answered a call of ours (:meth:`ControlProtocol.call`): ``key``
    is the call's, ``result`` its answer, ``error`` why it failed (None: it
    did not).  An answer nobody waits for any more (its deadline passed) is
    let go."""

    key: Any
    result: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """Objects the protocol must write now, unasked by us (a request of the CLI
    we do not serve answered with an error, a ping answered, a question the
    protocol settles itself: a call an "always" decision covers)."""

    objects: tuple[Outgoing, ...]


@dataclass(frozen=True, slots=True)
class ProtocolFault:
    """A control message that breaks the protocol (malformed, an answer to an id
    we never used, an error answer to our request): the running turn (or the
    opening) ends with this failure.  ``fatal``: the session cannot go on."""

    message: str
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class Unknown:
    """A message type the protocol does not know: ignored and counted."""

    type: str = ""


@dataclass(frozen=True, slots=True)
class UnparsedLine:
    """A line from the CLI that could not be parsed (nested deeper than the
    parser takes, too costly to hold, not JSON), as far as its head and its
    tail could be read: the scalar members written before the part that
    could not be (each by its path of keys: ``fields[("request",
    "subtype")]``; a member of an array is not kept) and the outermost
    object's scalar members written after it.  A message's envelope is
    among them, enough to answer a request the CLI waits for (see
    :meth:`ControlProtocol.unparsed`)."""

    fields: Mapping[tuple[str, ...], str | int | float | bool | None]
    #: The line is JSON too deep or too large to hold (its text complete);
    #: False: not JSON at all (garbled, or cut short by the CLI's death):
    #: a request it holds is still refused, but nothing else it seems to say
    #: (a turn's end, an answer) is taken from it.
    whole: bool = True

    def get(self, *path: str) -> str | int | float | bool | None:
        """The member at ``path`` (None: not read)."""
        return self.fields.get(path)


#: What one object from the CLI means (a line may mean several: claude's
#: ``result`` is forwarded *and* ends the turn).
Incoming: TypeAlias = (
    Forward
    | Ready
    | PermissionAsk
    | HookCall
    | ToolCall
    | QuestionAsked
    | TurnBegan
    | TurnEnded
    | Answered
    | Reply
    | ProtocolFault
    | Unknown
)


@dataclass(frozen=True, slots=True)
class ControlIntent:
    """Something we ask the CLI between or during turns that has an answer
    (:meth:`ControlProtocol.call`): ``name`` says what (``set_model``,
    ``set_permissions``, ``context_usage``, ``compact``, ``mcp_status``...;
    each protocol knows its own), ``params`` its arguments."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class McpServer:
    """A stdio MCP server the CLI launches for its session (ACP's
    ``mcpServers``): how the caller's functions reach a CLI that takes tools
    only over MCP.  The session serves it (:attr:`ControlProtocol.tools_over_mcp`)
    and hands it to the protocol before :meth:`ControlProtocol.begin`."""

    name: str
    command: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Opening:
    """How a session starts: the CLI's command, then what is written once it
    runs (:meth:`ControlProtocol.begin`)."""

    command: CommandSpec
    greeting: list[Outgoing]


class ControlProtocol(ABC):
    """One live session's protocol, pure: intents in, objects to write out;
    objects read in, their meaning out.

    ``can_steer``: :meth:`steer` adds input to a running turn.  ``name`` is
    the protocol's name in errors and docs.  ``hook_effects``: the hook
    events the protocol reports, and what a hook of each can do there (an
    empty set: it observes); an event left out is never reported.
    ``can_host_tools``: the protocol declares ``Request.tools`` to the
    CLI and says :class:`ToolCall` when the model calls one.
    ``changes_input``: an allow's changed input (``Decision.allow(input)``)
    reaches the CLI, which runs the call with it; where it cannot, the call
    runs as asked and the approval's record says the change was not applied.
    ``resume_refusal``: why ``resume=`` cannot continue a session over this
    protocol (None: it can): the capability check refuses such a request
    before anything starts (gemini's ACP ``session/load`` wipes the session
    it was asked to continue).
    ``tools_over_mcp``: the CLI takes ``Request.tools`` only from an MCP
    server it launches: the session serves one for the session and sets
    :attr:`mcp_servers` before :meth:`begin`; the protocol declares them to
    the CLI (its calls never reach :meth:`receive`: the session answers them).
    ``schema_in_prompt``: the protocol has no field for an output schema
    (ACP), so ``output_schema=`` reaches the CLI in each turn's prompt (the
    session adds it, worded once) and the answer is validated by us.

    What a protocol can do beyond that, each "cannot" by default and read by
    the capability check alone (a request that needs one a protocol lacks is
    refused, in the check's words, before anything is written):
    ``turn_options``: the options one turn may set for itself
    (``Request.turn_options``, of :data:`~coding_genesis.request.TURN_OPTIONS`),
    which :meth:`start_turn` sends; ``prompt_parts``: the kinds of prompt parts
    beside text it maps ("image", "file"); ``can_fork``: a new session from
    this one's history; ``deltas``: text and thinking as they are written;
    ``can_compact``: compaction on demand; ``context_usage``: the context's
    use now; ``asks_questions``: the CLI's questions to the user reach the
    session; ``takes_mcp_servers``: the caller's MCP servers are declared to
    the CLI; ``fixed_levels`` and ``turn_schema_in_prompt``: what a session's
    opening fixed for its turns (claude's argv).  A switch a turn makes by a
    control request is one of :meth:`turn_calls`, awaited before its prompt.
    """

    name: ClassVar[str] = ""
    can_steer: ClassVar[bool] = False
    schema_in_prompt: ClassVar[bool] = False
    changes_input: ClassVar[bool] = False
    hook_effects: ClassVar[Mapping[HookEvent, frozenset[HookEffect]]] = {}
    can_host_tools: ClassVar[bool] = False
    resume_refusal: str | None = None
    tools_over_mcp: ClassVar[bool] = False
    turn_options: frozenset[str] = frozenset()  # an ACP agent's differ: per instance
    prompt_parts: ClassVar[frozenset[str]] = frozenset()
    can_fork: ClassVar[bool] = False
    deltas: ClassVar[bool] = False
    can_compact: ClassVar[bool] = False
    context_usage: ClassVar[bool] = False
    asks_questions: ClassVar[bool] = False
    takes_mcp_servers: ClassVar[bool] = False
    #: By the permission level a session opened at, the levels a turn cannot
    #: switch to (the CLI fixed the opening level's rules at start): the
    #: ``turn`` row refuses them.
    fixed_levels: ClassVar[Mapping[str, frozenset[str]]] = {}
    #: A turn's own ``output_schema=`` goes in its prompt, worded once and
    #: validated by us (no per-turn field: claude's ``--json-schema`` is the
    #: process's); a session opened with a schema keeps it (the ``turn`` row
    #: refuses another).
    turn_schema_in_prompt: ClassVar[bool] = False
    #: With ``can_compact``: the prompt of a turn that compacts (claude's
    #: ``/compact``); None: compaction is a :meth:`call` of ``compact``,
    #: whose work is a turn the CLI begins by itself (codex).
    compact_prompt: ClassVar[str | None] = None
    #: The MCP servers the session serves for the CLI (``tools_over_mcp``).
    mcp_servers: tuple[McpServer, ...] = ()
    #: The session's request, kept by :meth:`begin` (None before it): the one
    #: place a protocol records what the session was started with.
    request: Request | None = None

    @property
    def hooked(self) -> Collection[str]:
        """The events the session has hooks for (the request :meth:`begin` kept)."""
        return self.request.hooks.keys() if self.request is not None else ()

    @final
    def begin(self, request: Request) -> Opening:
        """Start the session: keep ``request``, then :meth:`command`, then
        :meth:`opening` (in that order, so a protocol that still records
        state in either sees the same order as before).  The session calls
        only this."""
        self.request = request
        return Opening(command=self.command(request), greeting=self.opening(request))

    @abstractmethod
    def command(self, request: Request) -> CommandSpec:
        """The argv tail, environment and overlay to start the CLI with (its
        ``stdin`` must be None: the session owns stdin)."""

    @abstractmethod
    def translator(self) -> Translator:
        """The translator of the lines :meth:`receive` forwards."""

    def opening(self, request: Request) -> list[Outgoing]:
        """Written once the CLI runs (an initialize request).  When it writes
        anything, the session waits for :class:`Ready` before the first turn;
        none by default: ready at once."""
        return []

    @abstractmethod
    def begin_turn(self, prompt: str) -> list[Outgoing]:
        """Start a turn with the user's ``prompt``."""

    def start_turn(self, turn: Request) -> list[Outgoing]:
        """Start the turn ``turn`` asks (the session's request with the turn's
        prompt, timeout and the options it set for itself: ``turn.turn_options``,
        only ever those of :attr:`turn_options`).  The session calls only this;
        by default :meth:`begin_turn` with its prompt (a protocol that takes no
        option of its own for a turn defines that one alone)."""
        return self.begin_turn(turn.prompt)

    def turn_calls(self, turn: Request) -> list[ControlIntent]:
        """The calls to make, each answered, before :meth:`start_turn` writes
        the turn (a switch of model or permission mode the CLI takes by a
        control request, not with the prompt).  An error answer fails the turn
        in the CLI's words before its prompt is sent.  None by default."""
        return []

    def turn_refusal(self, turn: Request) -> str | None:
        """Why this CLI, as it answered at the opening, cannot take ``turn``
        (None: it can): what no class fact can say before the CLI runs (an ACP
        agent's ``promptCapabilities``).  The turn answers 64 in these words,
        nothing is written, and the session lives on."""
        return None

    @abstractmethod
    def interrupt(self) -> list[Outgoing]:
        """End the running turn (it ends with :class:`TurnEnded` ``interrupted``).
        A protocol that needs an id it has not been told yet (codex's turn id)
        keeps the wish and writes it through a :class:`Reply` when the id comes."""

    def call(self, intent: ControlIntent) -> tuple[Any, list[Outgoing]]:
        """Ask the CLI ``intent``: the call's key (what its :class:`Answered`
        will carry; unique while the call is pending) and the objects to
        write.  The session waits for the answer, bounded by a deadline.  A
        protocol without such a call raises NotImplementedError (the
        capability check refuses the intent before it gets here)."""
        raise NotImplementedError(f"{self.name or type(self).__name__} cannot {intent.name}")

    def context_said(self) -> ContextUsage | None:
        """The context's use as the CLI last told it, for a protocol that
        knows it from what the CLI reports by itself (codex's token usage,
        an ACP agent's ``usage_update``).  None (the default): it is asked,
        by a :meth:`call` of ``context_usage`` (claude)."""
        return None

    def steer(self, text: str) -> list[Outgoing]:
        """Add ``text`` to the running turn (only when ``can_steer``)."""
        raise NotImplementedError(f"{self.name or type(self).__name__} cannot steer a turn")

    @abstractmethod
    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        """The answer to one :class:`PermissionAsk`."""

    def answer_hook(self, call: HookCall, result: HookResult) -> list[Outgoing]:
        """The answer to one :class:`HookCall` (``result`` holds only what
        :attr:`hook_effects` allows).  A call with an ``ask`` that ``result``
        does not block is answered by :meth:`answer` after the approver: keep
        ``result`` for it and write nothing.  None by default (observed only)."""
        return []

    def answer_tool(self, call: ToolCall, result: ToolResult) -> list[Outgoing]:
        """The answer to one :class:`ToolCall` (only when ``can_host_tools``)."""
        raise NotImplementedError(f"{self.name or type(self).__name__} cannot call host tools")

    def answer_question(
        self, ask: QuestionAsked, answer: UserAnswer | None, refusal: str | None
    ) -> list[Outgoing]:
        """The answer to one :class:`QuestionAsked` (only when
        ``asks_questions``): ``answer``, or, when ``refusal`` is given (nobody
        answered, or the user declined), those words for the model."""
        raise NotImplementedError(f"{self.name or type(self).__name__} asks no questions")

    @abstractmethod
    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        """What one object from the CLI means (never raises: a bad message is a
        :class:`ProtocolFault`, an unknown one :class:`Unknown`)."""

    def unparsed(self, head: UnparsedLine) -> Sequence[Incoming]:
        """What a line that could not be parsed means, from its head: a
        request the CLI waits for is answered (a refusal: it cannot be read,
        so nothing may allow it), a turn's end still ends the turn.  Nothing
        by default (the line is counted as skipped).  Never raises."""
        return ()

    def closing(self) -> list[Outgoing]:
        """Written before stdin is closed at the end of the session (none by default)."""
        return []


# -- 0.1's names ----------------------------------------------------------------------


def _session_start(
    *, approvals: bool = False, hooks: Iterable[str] = (), hook_wait: object = None, **fields: Any
) -> Request:
    """``SessionStart(cwd=..., approvals=..., hooks=...)`` as it was spelled:
    the session's :class:`~coding_genesis.request.Request` (its prompt empty)."""
    if hook_wait is not None:
        raise TypeError(
            "SessionStart(hook_wait=) is gone: the request says it from its hooks and "
            "hook_timeout= (Request.hook_wait)"
        )
    if approvals:
        fields["approver"] = _ask_nobody
    if hooks:
        fields["hooks"] = {event: () for event in hooks}
    schema = fields.get("output_schema")
    if schema is not None and not isinstance(schema, OutputSchema):
        fields["output_schema"] = OutputSchema(schema)
    for name in ("extra_args", "tools", "setting_sources"):
        if fields.get(name) is not None:
            fields[name] = tuple(fields[name])
    return Request(prompt="", **fields)


def _ask_nobody(request: ApprovalRequest) -> Decision:
    """The approver of a ``SessionStart(approvals=True)``: it refuses."""
    return Decision.deny("no approver was given (SessionStart(approvals=True))")


__getattr__ = old_names(
    __name__,
    {
        "SessionStart": (
            "a protocol is given the session's coding_genesis.request.Request",
            lambda: _session_start,
        )
    },
)
