"""Plug-in backends by entry point, without installing a package: the entry points are made up
here (the installed case is tests/test_plugin_install.py)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from coding_genesis import BackendPluginError, CodingGenesisAgent
from coding_genesis import backends as registry
from coding_genesis._cli.backends import ENTRY_POINT_GROUP, builtin_names
from coding_genesis._util import plugins
from coding_genesis.backends import available_backends, get_backend
from coding_genesis.errors import UnknownBackendError

GROUP = plugins.ENTRY_POINT_GROUP


class Echo:
    """A backend object for the ``tests.test_plugins:ECHO`` entry point."""

    name = "echo"
    executable = "echo-cli"
    path_env_var = "GENESIS_ECHO_PATH"
    supports_resume = False
    options: dict[str, Any] = {}  # noqa: RUF012

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
        EntryPoint("echo", "tests.test_plugins:ECHO", GROUP),
        EntryPoint("echoclass", "tests.test_plugins:Echo", GROUP),
        EntryPoint("missing", "tests.no_such_module:Backend", GROUP),
        EntryPoint("notabackend", "builtins:object", GROUP),
        EntryPoint("explodes", "tests.test_plugins:explode", GROUP),
        EntryPoint("claude", "tests.test_plugins:ECHO", GROUP),  # a built-in name wins
    ]
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [p for p in points if p.group == group]
    )


@pytest.mark.usefixtures("installed")
def test_plugins_are_listed_and_loaded_by_name() -> None:
    assert {"echo", "echoclass", "missing", "claude", "failer"} <= set(available_backends())
    assert get_backend("echo") is ECHO  # type: ignore[comparison-overlap]
    assert isinstance(get_backend("echoclass"), Echo)
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
    assert builtin_names() == sorted(registry._REGISTRY)
    assert ENTRY_POINT_GROUP == GROUP
