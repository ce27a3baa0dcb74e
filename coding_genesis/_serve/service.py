"""What every route is handed: the server's settings and parts, one value.

Its own module, below the routes (``app.py``, ``session_routes.py``,
``inbox_routes.py``) and their replies, which all name it: none of them imports
another's module for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coding_genesis._serve.history import History
from coding_genesis._serve.hub import Hub
from coding_genesis._serve.inbox import Inbox
from coding_genesis._serve.requests import Rules
from coding_genesis._serve.runs import Runs
from coding_genesis._serve.sessions import Sessions
from coding_genesis._util.redact import Redactor

__all__ = ["Doctor", "Mount", "Service"]

#: ``genesis doctor``'s checks of these backends within a timeout, each a dict
#: of the API's ``Check`` (handed down by the command line, which owns them).
Doctor = Callable[[list[str], float], list[dict[str, Any]]]


@dataclass(frozen=True)
class Mount:
    """An application served beside the routes, behind the same guard, at
    ``path`` (and under it): ``make`` builds it of the server's parts and
    gives what runs while the server does (``/mcp``: handed down by the
    command line, which knows the extras)."""

    path: str
    make: Callable[[Service], tuple[Any, Callable[[], AbstractAsyncContextManager[Any]]]]


@dataclass
class Service:
    """Everything a route needs: the settings and the server's parts."""

    root: str
    trusted: bool
    defaults: Mapping[str, Any]
    fallback_backend: str
    version: str
    run_log: Path | None
    hub: Hub
    runs: Runs
    history: History
    redactor: Redactor
    token: str
    inbox: Inbox
    sessions: Sessions
    doctor: Doctor
    approval_timeout: float = 300.0
    #: ``request`` (a body chooses) or ``inbox`` (every call waits in the inbox).
    approvals: str = "request"
    #: The most turns a session of the server keeps.
    session_history: int = 1000
    doctor_backends: list[str] = field(default_factory=list)
    #: Each backend's CLI as the command line finds it (``Rules.cli_paths``).
    cli_paths: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def rules(self) -> Rules:
        """What every request is read under."""
        return Rules(
            self.trusted,
            self.root,
            self.defaults,
            self.fallback_backend,
            self.approval_timeout,
            self.approvals,
            self.cli_paths,
        )
