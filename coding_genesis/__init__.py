"""coding-genesis: run coding-agent CLIs as supervised subprocesses and always
get a clear, structured answer back.

    from coding_genesis import CodingGenesisAgent
    agent = CodingGenesisAgent(backend="claude", timeout=300)
    result = agent.run_sync("Add a test for parse_date")
    result["status"], result["message"], result["tool_calls"]

The public names are listed once, in ``_EXPORTS`` (name → the module that
defines it); ``__all__`` and the lazy ``__getattr__`` are made from it, and a
test checks the ``TYPE_CHECKING`` imports below against it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

# The public names are imported on first use (PEP 562), so that
# ``import coding_genesis`` (and the ``genesis`` command's --help) stays cheap:
# the agent pulls in anyio, pydantic, psutil and orjson.  Type checkers and IDEs
# see the imports below (``X as X``: an explicit re-export).
if TYPE_CHECKING:
    from coding_genesis._failures.report import (
        format_failure_report as format_failure_report,
        parse_failure_report as parse_failure_report,
    )
    from coding_genesis._observers.runlog import (
        RunLogObserver as RunLogObserver,
    )
    from coding_genesis._observers.transcript import (
        TranscriptObserver as TranscriptObserver,
    )
    from coding_genesis._pipeline.bus import (
        EventStream as EventStream,
        Subscription as Subscription,
    )
    from coding_genesis._supervision.values import (
        StopReason as StopReason,
        SupervisorConfig as SupervisorConfig,
    )
    from coding_genesis._util.clock import (
        VirtualClock as VirtualClock,
    )
    from coding_genesis._util.parser import (
        JsonLinesParser as JsonLinesParser,
    )
    from coding_genesis.agent import (
        DEFAULT_TIMEOUT as DEFAULT_TIMEOUT,
        CodingGenesisAgent as CodingGenesisAgent,
    )
    from coding_genesis.approval import (
        ApprovalOption as ApprovalOption,
        ApprovalRequest as ApprovalRequest,
        Approver as Approver,
        Decision as Decision,
        ToolKind as ToolKind,
        Verdict as Verdict,
        allow_tools as allow_tools,
        chain as chain,
        deny_commands as deny_commands,
        writes_under as writes_under,
    )
    from coding_genesis.backend import (
        Backend as Backend,
        BackendPluginError as BackendPluginError,
        OptionSpec as OptionSpec,
        RepositoryFile as RepositoryFile,
    )
    from coding_genesis.backends import (
        available_backends as available_backends,
        get_backend as get_backend,
        register_backend as register_backend,
    )
    from coding_genesis.backends.acp_generic import (
        AcpBackend as AcpBackend,
    )
    from coding_genesis.backends.generic import (
        GenericBackend as GenericBackend,
        load_backends_file as load_backends_file,
    )
    from coding_genesis.batch import (
        BatchItem as BatchItem,
        BatchSettings as BatchSettings,
        ExecutorName as ExecutorName,
        RunSpec as RunSpec,
        run_many as run_many,
        run_many_sync as run_many_sync,
    )
    from coding_genesis.breaker import (
        CircuitBreaker as CircuitBreaker,
    )
    from coding_genesis.budget import (
        Budget as Budget,
    )
    from coding_genesis.config import (
        AgentConfig as AgentConfig,
        AgentSettings as AgentSettings,
        BreakerSetting as BreakerSetting,
    )
    from coding_genesis.control import (
        ControlProtocol as ControlProtocol,
    )
    from coding_genesis.errors import (
        AgentUsageError as AgentUsageError,
        ConfigError as ConfigError,
        GenesisError as GenesisError,
        InvalidCwdError as InvalidCwdError,
        InvalidTimeoutError as InvalidTimeoutError,
        RefusedError as RefusedError,
        UnknownBackendError as UnknownBackendError,
    )
    from coding_genesis.events import (
        CliRetryEvent as CliRetryEvent,
        CompactionEvent as CompactionEvent,
        ErrorEvent as ErrorEvent,
        Event as Event,
        EventKind as EventKind,
        McpServerEvent as McpServerEvent,
        PlanEvent as PlanEvent,
        ResultEvent as ResultEvent,
        SessionEvent as SessionEvent,
        TextDeltaEvent as TextDeltaEvent,
        TextEvent as TextEvent,
        ThoughtDeltaEvent as ThoughtDeltaEvent,
        ThoughtEvent as ThoughtEvent,
        ToolCallEvent as ToolCallEvent,
        ToolResultEvent as ToolResultEvent,
        Translator as Translator,
        UsageEvent as UsageEvent,
    )
    from coding_genesis.hooks import (
        Hook as Hook,
        HookEvent as HookEvent,
        HookInput as HookInput,
        HookResult as HookResult,
        Hooks as Hooks,
    )
    from coding_genesis.observer import (
        Observer as Observer,
        RunInfo as RunInfo,
        RunObserver as RunObserver,
    )
    from coding_genesis.options import (
        AGENT_DEFAULT as AGENT_DEFAULT,
        Isolation as Isolation,
        Keep as Keep,
        MessageUsage as MessageUsage,
        Permissions as Permissions,
        SettingSource as SettingSource,
    )
    from coding_genesis.pool import (
        PoolStats as PoolStats,
        SessionPool as SessionPool,
        SyncSessionPool as SyncSessionPool,
    )
    from coding_genesis.prompts import (
        FileRef as FileRef,
        Image as Image,
        Prompt as Prompt,
    )
    from coding_genesis.questions import (
        UserAnswer as UserAnswer,
        UserQuestion as UserQuestion,
    )
    from coding_genesis.request import (
        CallOptions as CallOptions,
        CommandSpec as CommandSpec,
        LiveOptions as LiveOptions,
        Request as Request,
        RequestOptions as RequestOptions,
        RetrySetting as RetrySetting,
        RunOptions as RunOptions,
        SendOptions as SendOptions,
    )
    from coding_genesis.result import (
        ChildFailure as ChildFailure,
        ContextUsage as ContextUsage,
        CostSource as CostSource,
        RunResponse as RunResponse,
        RunResult as RunResult,
    )
    from coding_genesis.retry import (
        RetryPolicy as RetryPolicy,
    )
    from coding_genesis.run_events import (
        EVENT_TYPES as EVENT_TYPES,
        ApprovalEvent as ApprovalEvent,
        AttemptEvent as AttemptEvent,
        QuestionEvent as QuestionEvent,
        RunEvent as RunEvent,
        RunFinishedEvent as RunFinishedEvent,
        RunStartedEvent as RunStartedEvent,
        StateEvent as StateEvent,
        event_from_dict as event_from_dict,
    )
    from coding_genesis.session import (
        Session as Session,
        SyncSession as SyncSession,
        TurnStream as TurnStream,
    )
    from coding_genesis.status import (
        AgentState as AgentState,
        ErrorCode as ErrorCode,
        FailureCategory as FailureCategory,
        Status as Status,
    )
    from coding_genesis.subagents import Subagent as Subagent
    from coding_genesis.tools import (
        HostTool as HostTool,
        McpServerSpec as McpServerSpec,
        ToolResult as ToolResult,
        tool as tool,
    )

#: Public name -> the module (under coding_genesis) that defines it.
_EXPORTS: dict[str, str] = {
    "Image": "prompts",
    "FileRef": "prompts",
    "Prompt": "prompts",
    "HostTool": "tools",
    "McpServerSpec": "tools",
    "UserQuestion": "questions",
    "UserAnswer": "questions",
    "ToolResult": "tools",
    "tool": "tools",
    "SessionPool": "pool",
    "SyncSessionPool": "pool",
    "ContextUsage": "result",
    "PoolStats": "pool",
    "TurnStream": "session",
    "SyncSession": "session",
    "Session": "session",
    "RequestOptions": "request",
    "Request": "request",
    "CallOptions": "request",
    "LiveOptions": "request",
    "SendOptions": "request",
    "ControlProtocol": "control",
    "ApprovalEvent": "run_events",
    "QuestionEvent": "run_events",
    "CompactionEvent": "events",
    "McpServerEvent": "events",
    "ThoughtDeltaEvent": "events",
    "TextDeltaEvent": "events",
    "AGENT_DEFAULT": "options",
    "AgentConfig": "config",
    "AgentSettings": "config",
    "AgentState": "status",
    "AgentUsageError": "errors",
    "RefusedError": "errors",
    "ApprovalOption": "approval",
    "ApprovalRequest": "approval",
    "Approver": "approval",
    "AttemptEvent": "run_events",
    "Backend": "backend",
    "BackendPluginError": "backend",
    "BatchItem": "batch",
    "BatchSettings": "batch",
    "BreakerSetting": "config",
    "Budget": "budget",
    "ChildFailure": "result",
    "CircuitBreaker": "breaker",
    "CliRetryEvent": "events",
    "CodingGenesisAgent": "agent",
    "CommandSpec": "request",
    "ConfigError": "errors",
    "CostSource": "result",
    "DEFAULT_TIMEOUT": "agent",
    "Decision": "approval",
    "EVENT_TYPES": "run_events",
    "ErrorCode": "status",
    "ErrorEvent": "events",
    "Event": "events",
    "EventKind": "events",
    "EventStream": "_pipeline.bus",
    "ExecutorName": "batch",
    "FailureCategory": "status",
    "GenericBackend": "backends.generic",
    "AcpBackend": "backends.acp_generic",
    "GenesisError": "errors",
    "Hook": "hooks",
    "HookEvent": "hooks",
    "HookInput": "hooks",
    "HookResult": "hooks",
    "Hooks": "hooks",
    "InvalidCwdError": "errors",
    "InvalidTimeoutError": "errors",
    "Isolation": "options",
    "JsonLinesParser": "_util.parser",
    "Keep": "options",
    "MessageUsage": "options",
    "Observer": "observer",
    "OptionSpec": "backend",
    "Permissions": "options",
    "PlanEvent": "events",
    "RepositoryFile": "backend",
    "ResultEvent": "events",
    "RetryPolicy": "retry",
    "RetrySetting": "request",
    "SettingSource": "options",
    "RunEvent": "run_events",
    "RunFinishedEvent": "run_events",
    "RunInfo": "observer",
    "RunLogObserver": "_observers.runlog",
    "RunObserver": "observer",
    "RunOptions": "request",
    "RunResponse": "result",
    "RunResult": "result",
    "RunSpec": "batch",
    "RunStartedEvent": "run_events",
    "SessionEvent": "events",
    "StateEvent": "run_events",
    "Status": "status",
    "StopReason": "_supervision.values",
    "Subagent": "subagents",
    "Subscription": "_pipeline.bus",
    "SupervisorConfig": "_supervision.values",
    "TextEvent": "events",
    "ThoughtEvent": "events",
    "ToolCallEvent": "events",
    "ToolKind": "approval",
    "ToolResultEvent": "events",
    "TranscriptObserver": "_observers.transcript",
    "Translator": "events",
    "UnknownBackendError": "errors",
    "UsageEvent": "events",
    "Verdict": "approval",
    "VirtualClock": "_util.clock",
    "allow_tools": "approval",
    "available_backends": "backends",
    "chain": "approval",
    "deny_commands": "approval",
    "event_from_dict": "run_events",
    "format_failure_report": "_failures.report",
    "get_backend": "backends",
    "load_backends_file": "backends.generic",
    "parse_failure_report": "_failures.report",
    "register_backend": "backends",
    "run_many": "batch",
    "run_many_sync": "batch",
    "writes_under": "approval",
}

#: Public names that were renamed or moved: old name -> (the module that
#: answers it, the name it has there, what to use instead).  Still answered,
#: with a ``DeprecationWarning`` each time; not in ``__all__``.
_DEPRECATED: dict[str, tuple[str, str, str]] = {
    "SessionOptions": ("request", "CallOptions", "request.CallOptions"),
    "TurnOptions": ("request", "RequestOptions", "request.RequestOptions"),
    "AttemptRequest": ("backend", "AttemptRequest", "request.Request"),
    "RunRequest": ("backend", "RunRequest", "request.Request"),
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from coding_genesis._util.version import version  # lazy: the metadata, read on demand

        value: Any = version()
    elif name in _DEPRECATED:
        home, new, use = _DEPRECATED[name]
        warnings.warn(
            f"coding_genesis.{name} is deprecated: use coding_genesis.{use}",
            DeprecationWarning,
            stacklevel=2,
        )
        with warnings.catch_warnings():  # said once, here
            warnings.simplefilter("ignore", DeprecationWarning)
            return getattr(importlib.import_module(f"coding_genesis.{home}"), new)
    else:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"coding_genesis.{module}"), name)
    globals()[name] = value  # resolved once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
