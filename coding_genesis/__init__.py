"""coding-genesis: run coding-agent CLIs as supervised subprocesses and always
get a clear, structured answer back.

    from coding_genesis import CodingGenesisAgent
    agent = CodingGenesisAgent(backend="claude", timeout=300)
    result = agent.run_sync("Add a test for parse_date")
    result["status"], result["message"], result["tool_calls"]
"""

from __future__ import annotations

from .agent import DEFAULT_TIMEOUT, CodingGenesisAgent
from .backend import Backend, CommandSpec, OptionSpec, RunRequest, Translator
from .backends import available_backends, get_backend, register_backend
from .breaker import CircuitBreaker
from .clock import VirtualClock
from .config import AgentConfig
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
from .observers import Observer, RunInfo, RunLogObserver, RunObserver, TranscriptObserver
from .parser import JsonLinesParser
from .pool import RunSpec, run_many, run_many_sync
from .process import StopReason, SupervisorConfig
from .report import ChildFailure, format_failure_report, parse_failure_report
from .result import RunResult
from .retry import RetryPolicy
from .states import AgentState, ErrorCode, Status

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENT_TYPES",
    "AgentConfig",
    "AgentState",
    "AgentUsageError",
    "AttemptEvent",
    "Backend",
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
    "parse_failure_report",
    "register_backend",
    "run_many",
    "run_many_sync",
]
