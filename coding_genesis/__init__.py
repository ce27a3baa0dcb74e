"""coding-genesis: run coding-agent CLIs as supervised subprocesses and always
get a clear, structured answer back.

    from coding_genesis import CodingGenesisAgent
    agent = CodingGenesisAgent(backend="claude", timeout=300)
    result = agent.run_sync("Add a test for parse_date")
    result["status"], result["message"], result["tool_calls"]
"""

from __future__ import annotations

from .agent import DEFAULT_TIMEOUT, CodingGenesisAgent
from .backend import Backend, CommandSpec, RunRequest, Translator
from .errors import (
    AgentUsageError,
    ConfigError,
    GenesisError,
    InvalidCwdError,
    InvalidTimeoutError,
    UnknownBackendError,
)
from .events import (
    EVENT_TYPES,
    AttemptEvent,
    CliRetryEvent,
    ErrorEvent,
    Event,
    EventKind,
    EventStream,
    ResultEvent,
    RunEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SessionEvent,
    StateEvent,
    Subscription,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    event_from_dict,
)
from .failures import FailureCategory
from .parser import JsonLinesParser
from .process import StopReason, SupervisorConfig
from .report import ChildFailure, format_failure_report, parse_failure_report
from .result import RunResult
from .states import AgentState, Status

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENT_TYPES",
    "AgentState",
    "AgentUsageError",
    "AttemptEvent",
    "Backend",
    "ChildFailure",
    "CliRetryEvent",
    "CodingGenesisAgent",
    "CommandSpec",
    "ConfigError",
    "ErrorEvent",
    "Event",
    "EventKind",
    "EventStream",
    "FailureCategory",
    "GenesisError",
    "InvalidCwdError",
    "InvalidTimeoutError",
    "JsonLinesParser",
    "ResultEvent",
    "RunEvent",
    "RunFinishedEvent",
    "RunRequest",
    "RunResult",
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
    "Translator",
    "UnknownBackendError",
    "UsageEvent",
    "__version__",
    "event_from_dict",
    "format_failure_report",
    "parse_failure_report",
]
