"""coding-genesis: run coding-agent CLIs as supervised subprocesses and always
get a clear, structured answer back.

    from coding_genesis import CodingGenesisAgent
    agent = CodingGenesisAgent(backend="claude", timeout=300)
    result = agent.run_sync("Add a test for parse_date")
    result["status"], result["message"], result["tool_calls"]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The public names are imported on first use (PEP 562), so that
# ``import coding_genesis`` (and the ``genesis`` command's --help) stays cheap:
# the agent pulls in anyio, pydantic, psutil and orjson.  Type checkers and IDEs
# see the imports below.
if TYPE_CHECKING:
    from coding_genesis._failures.breaker import CircuitBreaker
    from coding_genesis._failures.report import format_failure_report, parse_failure_report
    from coding_genesis._observers.budget import Budget
    from coding_genesis._observers.runlog import RunLogObserver
    from coding_genesis._observers.transcript import TranscriptObserver
    from coding_genesis._pipeline.bus import EventStream, Subscription
    from coding_genesis._supervision.process import StopReason, SupervisorConfig
    from coding_genesis._util.clock import VirtualClock
    from coding_genesis._util.parser import JsonLinesParser
    from coding_genesis.agent import DEFAULT_TIMEOUT, CodingGenesisAgent
    from coding_genesis.backend import (
        Backend,
        BackendPluginError,
        CommandSpec,
        OptionSpec,
        RunRequest,
        Translator,
    )
    from coding_genesis.backends import available_backends, get_backend, register_backend
    from coding_genesis.backends.generic import GenericBackend, load_backends_file
    from coding_genesis.batch import RunSpec, run_many, run_many_sync
    from coding_genesis.config import AgentConfig
    from coding_genesis.errors import (
        AgentUsageError,
        ConfigError,
        GenesisError,
        InvalidCwdError,
        InvalidTimeoutError,
        UnknownBackendError,
    )
    from coding_genesis.events import (
        CliRetryEvent,
        ErrorEvent,
        Event,
        EventKind,
        ResultEvent,
        SessionEvent,
        TextEvent,
        ToolCallEvent,
        ToolResultEvent,
        UsageEvent,
    )
    from coding_genesis.observer import Observer, RunInfo, RunObserver
    from coding_genesis.result import ChildFailure, RunResult
    from coding_genesis.retry import RetryPolicy
    from coding_genesis.run_events import (
        EVENT_TYPES,
        AttemptEvent,
        RunEvent,
        RunFinishedEvent,
        RunStartedEvent,
        StateEvent,
        event_from_dict,
    )
    from coding_genesis.status import AgentState, ErrorCode, FailureCategory, Status

__version__ = "0.1.0"

#: Public name -> the submodule that defines it.
_EXPORTS: dict[str, str] = {
    "AgentConfig": "config",
    "AgentState": "status",
    "AgentUsageError": "errors",
    "AttemptEvent": "run_events",
    "BackendPluginError": "backend",
    "GenericBackend": "backends.generic",
    "load_backends_file": "backends.generic",
    "Backend": "backend",
    "Budget": "_observers.budget",
    "ChildFailure": "result",
    "CircuitBreaker": "_failures.breaker",
    "CliRetryEvent": "events",
    "CodingGenesisAgent": "agent",
    "CommandSpec": "backend",
    "ConfigError": "errors",
    "DEFAULT_TIMEOUT": "agent",
    "EVENT_TYPES": "run_events",
    "ErrorCode": "status",
    "ErrorEvent": "events",
    "Event": "events",
    "EventKind": "events",
    "EventStream": "_pipeline.bus",
    "FailureCategory": "status",
    "GenesisError": "errors",
    "InvalidCwdError": "errors",
    "InvalidTimeoutError": "errors",
    "JsonLinesParser": "_util.parser",
    "Observer": "observer",
    "OptionSpec": "backend",
    "ResultEvent": "events",
    "RetryPolicy": "retry",
    "RunEvent": "run_events",
    "RunFinishedEvent": "run_events",
    "RunInfo": "observer",
    "RunLogObserver": "_observers.runlog",
    "RunObserver": "observer",
    "RunRequest": "backend",
    "RunResult": "result",
    "RunSpec": "batch",
    "RunStartedEvent": "run_events",
    "SessionEvent": "events",
    "StateEvent": "run_events",
    "Status": "status",
    "StopReason": "_supervision.process",
    "Subscription": "_pipeline.bus",
    "SupervisorConfig": "_supervision.process",
    "TextEvent": "events",
    "ToolCallEvent": "events",
    "ToolResultEvent": "events",
    "TranscriptObserver": "_observers.transcript",
    "Translator": "backend",
    "UnknownBackendError": "errors",
    "UsageEvent": "events",
    "VirtualClock": "_util.clock",
    "available_backends": "backends",
    "event_from_dict": "run_events",
    "format_failure_report": "_failures.report",
    "get_backend": "backends",
    "parse_failure_report": "_failures.report",
    "register_backend": "backends",
    "run_many": "batch",
    "run_many_sync": "batch",
}

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENT_TYPES",
    "AgentConfig",
    "AgentState",
    "AgentUsageError",
    "AttemptEvent",
    "Backend",
    "BackendPluginError",
    "Budget",
    "ChildFailure",
    "CircuitBreaker",
    "CliRetryEvent",
    "CodingGenesisAgent",
    "CommandSpec",
    "ConfigError",
    "ErrorCode",
    "ErrorEvent",
    "Event",
    "EventKind",
    "EventStream",
    "FailureCategory",
    "GenericBackend",
    "GenesisError",
    "InvalidCwdError",
    "InvalidTimeoutError",
    "JsonLinesParser",
    "Observer",
    "OptionSpec",
    "ResultEvent",
    "RetryPolicy",
    "RunEvent",
    "RunFinishedEvent",
    "RunInfo",
    "RunLogObserver",
    "RunObserver",
    "RunRequest",
    "RunResult",
    "RunSpec",
    "RunStartedEvent",
    "SessionEvent",
    "StateEvent",
    "Status",
    "StopReason",
    "Subscription",
    "SupervisorConfig",
    "TextEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "TranscriptObserver",
    "Translator",
    "UnknownBackendError",
    "UsageEvent",
    "VirtualClock",
    "__version__",
    "available_backends",
    "event_from_dict",
    "format_failure_report",
    "get_backend",
    "load_backends_file",
    "parse_failure_report",
    "register_backend",
    "run_many",
    "run_many_sync",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolved once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
