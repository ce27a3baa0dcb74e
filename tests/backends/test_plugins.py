"""Plug-in backends by entry point, without installing a package: the entry points are made up
here (the installed case is tests/backends/test_plugin_install.py)."""

from __future__ import annotations

import signal
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from coding_genesis import (
    BackendPluginError,
    CodingGenesisAgent,
    backend as base,
    backends as registry,
)
from coding_genesis._cli.backends import ENTRY_POINT_GROUP, builtin_names
from coding_genesis.backends import available_backends, get_backend
from coding_genesis.errors import ConfigError, UnknownBackendError
from coding_genesis.request import Request
from coding_genesis.testing import check_contract
from tests.support import present

GROUP = base.ENTRY_POINT_GROUP


class Echo:
    """A backend object for the ``tests.backends.test_plugins:ECHO`` entry point."""

    name = "echo"
    executable = "echo-cli"
    path_env_var = "GENESIS_ECHO_PATH"
    supports_resume = False
    options: dict[str, Any] = {}  # noqa: RUF012  (a 0.1.0 plug-in declares a plain class dict)

    def default_program(self) -> Any:
        return registry.FailerBackend().default_program()

    def build_command(self, request: Any) -> Any:
        return registry.FailerBackend().build_command(request)

    def translator(self) -> Any:
        return registry.FailerBackend().translator()

    def install_hint(self) -> str:
        return ""


ECHO = Echo()


def explode() -> None:
    raise RuntimeError("no config for echo")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [
        EntryPoint("echo", "tests.backends.test_plugins:ECHO", GROUP),
        EntryPoint("echoclass", "tests.backends.test_plugins:Echo", GROUP),
        EntryPoint("missing", "tests.no_such_module:Backend", GROUP),
        EntryPoint("notabackend", "builtins:object", GROUP),
        EntryPoint("explodes", "tests.backends.test_plugins:explode", GROUP),
        EntryPoint("claude", "tests.backends.test_plugins:ECHO", GROUP),  # a built-in name wins
    ]
    monkeypatch.setattr(base, "entry_points", lambda group: [p for p in points if p.group == group])


@pytest.mark.slow
@pytest.mark.usefixtures("installed")
def test_plugins_are_listed_and_loaded_by_name() -> None:
    assert {"echo", "echoclass", "missing", "claude", "failer"} <= set(available_backends())
    echo = get_backend("echo")
    assert isinstance(echo, base.ProtocolBackend) and echo.plugin is ECHO
    echoclass = get_backend("echoclass")
    assert isinstance(echoclass, base.ProtocolBackend) and isinstance(echoclass.plugin, Echo)
    assert get_backend("claude").executable == "claude"
    result = CodingGenesisAgent("echo").run_sync("hello")
    assert result["status"] == 0, result


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("missing", "failed to load: ModuleNotFoundError: No module named 'tests.no_such_module'"),
        ("notabackend", "is not a backend: it lacks name, executable, build_command, translator"),
        ("explodes", "failed to start: RuntimeError: no config for echo"),
    ],
)
def test_a_broken_plugin_is_a_clear_error_naming_it(name: str, says: str) -> None:
    with pytest.raises(BackendPluginError, match=f"backend plug-in {name!r}") as exc:
        CodingGenesisAgent(name)
    assert says in str(exc.value)
    # No traceback from inside the plug-in is chained to the error.
    error = exc.value
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.mark.usefixtures("installed")
def test_an_unknown_name_lists_every_backend() -> None:
    with pytest.raises(UnknownBackendError, match=r"available: .*echo.*failer"):
        get_backend("nope")


def test_the_command_line_lists_the_same_built_ins_without_importing_them() -> None:
    assert builtin_names() == registry.registered_backends()
    assert ENTRY_POINT_GROUP == GROUP


# -- a plug-in written against 0.1.0's Protocol, without subclassing Backend ---------


class OldTranslator:
    """A translator of 0.1.0: ``translate``, ``flush`` and ``message_usage``, no base class."""

    def __init__(self) -> None:
        self.inner = registry.FailerBackend().translator()
        self.message_usage: str = "live"
        self.flushed = 0

    def translate(self, obj: dict[str, Any]) -> Any:
        self.inner.message_usage = self.message_usage  # type: ignore[assignment]  # 0.1.0: a str
        return self.inner.translate(obj)

    def flush(self) -> Any:
        self.flushed += 1
        return self.inner.flush()


class OldStyle:
    """Today's Protocol and some optional members, as plain attributes; the failer's CLI."""

    name = "oldstyle"
    executable = "old-cli"
    path_env_var = "GENESIS_OLDSTYLE_PATH"
    supports_resume = True
    options: dict[str, Any] = {}  # noqa: RUF012  (a 0.1.0 plug-in declares a plain class dict)
    permission_levels = ("read-only", "edit")  # a tuple, not a frozenset
    env_needs = ["OLD_API_KEY"]  # noqa: RUF012  (a list, not a tuple)
    notes = ("an old plug-in",)

    def __init__(self) -> None:
        self.translators: list[OldTranslator] = []

    def default_program(self) -> Any:
        return registry.FailerBackend().default_program()

    def build_command(self, request: Any) -> Any:
        return registry.FailerBackend().build_command(request)

    def translator(self) -> OldTranslator:
        self.translators.append(OldTranslator())
        return self.translators[-1]

    def install_hint(self) -> str:
        return "pip install old-cli"

    def failure_hint(self, result: Any) -> str | None:
        return "auth" if "/fail" in str(result.message) else None


@pytest.mark.slow
def test_a_protocol_only_plugin_is_wrapped_once_with_the_defaults_filled_in() -> None:
    registry.register_backend("oldstyle", OldStyle)  # type: ignore[arg-type]  # a 0.1.0 plug-in: no Backend subclass
    try:
        backend = get_backend("oldstyle")
        assert isinstance(backend, base.Backend) and isinstance(backend, base.ProtocolBackend)
        assert isinstance(backend.plugin, OldStyle)
        # Its members, made the declared types; what it lacks, the base class's defaults.
        assert backend.permission_levels == frozenset({"read-only", "edit"})
        assert backend.env_needs == ("OLD_API_KEY",)
        assert backend.notes == ("an old plug-in",)
        assert backend.supports_resume is True
        assert backend.install_hint() == "pip install old-cli"
        assert backend.pdeath_signal == signal.SIGTERM
        assert backend.node_script is None and backend.stderr_noise is None
        assert backend.version_args == ("--version",)
        assert backend.stderr_retries("retrying") == 0
        check_contract(backend)

        agent = CodingGenesisAgent("oldstyle", permissions="edit", ledger=False)
        assert agent.backend is not backend  # a fresh backend per agent, wrapped as it is made
        result = agent.run_sync("hello")
        assert result["status"] == 0, result
        plugin = agent.backend.plugin  # type: ignore[attr-defined]
        (translator,) = plugin.translators
        assert translator.flushed == 1  # its flush is called at the end of the stream
        failed = agent.run_sync("/fail")
        assert failed["status"] != 0
        assert present(failed["failure"])["category"] == "auth", failed  # its failure_hint is asked
        with pytest.raises(ConfigError, match="cannot enforce permissions='full'"):
            CodingGenesisAgent("oldstyle", permissions="full")
    finally:
        registry._REGISTRY.pop("oldstyle", None)


@pytest.mark.slow
def test_a_protocol_only_object_given_to_the_agent_is_wrapped_too() -> None:
    agent = CodingGenesisAgent(OldStyle(), ledger=False)  # type: ignore[arg-type]
    assert isinstance(agent.backend, base.ProtocolBackend)
    assert agent.run_sync("hello")["status"] == 0
    with pytest.raises(ConfigError, match="backend must be a backend name or a Backend object"):
        CodingGenesisAgent(object())  # type: ignore[arg-type]


def test_a_registered_factory_of_no_backend_is_a_clear_error() -> None:
    registry.register_backend("nothing", object)  # type: ignore[arg-type]
    try:
        with pytest.raises(
            ConfigError, match=r"backend 'nothing' .* is not a backend: it lacks name"
        ):
            get_backend("nothing")
    finally:
        registry._REGISTRY.pop("nothing", None)


class NewStyle(base.Backend):
    """The same plug-in as a subclass: it states only what differs from the defaults."""

    name = "newstyle"
    executable = "new-cli"

    def default_program(self) -> Any:
        return registry.FailerBackend().default_program()

    def build_command(self, request: Request) -> base.CommandSpec:
        return registry.FailerBackend().build_command(request)

    def translator(self) -> base.Translator:
        return registry.FailerBackend().translator()


NEW = NewStyle()


@pytest.mark.slow
def test_a_subclass_plugin_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [EntryPoint("newstyle", "tests.backends.test_plugins:NEW", GROUP)]
    monkeypatch.setattr(base, "entry_points", lambda group: points)
    assert get_backend("newstyle") is NEW
    check_contract(NEW)
    assert CodingGenesisAgent("newstyle", ledger=False).run_sync("hello")["status"] == 0
