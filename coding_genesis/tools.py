"""The caller's own functions as tools the model can call (``tools=[...]``).

A plain Python function, sync or async, becomes a :class:`HostTool`: its
typed parameters become the JSON schema the model sees (built by pydantic
from the signature), its docstring the description.  Decorate it with
:func:`tool` to set a name, a description or a timeout; a plain function in
``tools=`` is wrapped the same way with the defaults.

A call from the model is validated against the schema, runs bounded by the
tool's ``timeout`` and answers a :class:`ToolResult`: the return value as text
(a string as is, anything else as JSON); a validation error, an exception or
a timeout become an error result whose message the model reads.  The run
goes on either way.  A sync function runs in a worker thread (so it never
holds up the session); past its timeout it is abandoned, not stopped.

The model sees a tool as ``mcp__genesis__<name>`` on claude (an SDK MCP
server over its control protocol), as ``<name>`` on codex (a dynamic
tool) and, on an ACP agent, as a tool of the stdio MCP server ``genesis``
the agent launches, which brings each call back to the session.  Only code can name host tools: a batch line (``RunSpec``,
``run_many``, ``genesis run-many``) never can.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from coding_genesis.errors import ConfigError

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "HostTool",
    "McpServerSpec",
    "ToolResult",
    "as_host_tools",
    "as_mcp_servers",
    "tool",
]

log = logging.getLogger("coding_genesis.tools")

#: Seconds one call of a host tool may take unless its ``timeout`` says otherwise.
DEFAULT_TOOL_TIMEOUT = 30.0

#: What both APIs accept as a tool name, with room for claude's ``mcp__genesis__``.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,50}$")
#: What a validation error quotes of the model's arguments, at most.
_QUOTED = 2000


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one call of a host tool answers: its text, and whether it failed
    (an error the model reads as one)."""

    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class HostTool:
    """One of the caller's functions as a tool (see the module's docstring).

    ``parameters`` is the JSON schema of its arguments (an object);
    ``timeout`` bounds each call, in seconds.  Calling the tool calls the
    function itself, unchanged.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any]
    timeout: float = DEFAULT_TOOL_TIMEOUT
    #: The pydantic model that validates the arguments (built from the signature).
    _arguments: Any = field(default=None, repr=False)
    #: The parameters' names, in order, and those passed by position.
    _names: tuple[str, ...] = field(default=(), repr=False)
    _positional: tuple[str, ...] = field(default=(), repr=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        """Validate ``arguments``, run the function within ``timeout``, and
        answer its result; never raises (but for cancellation)."""
        import anyio  # only a live session calls: `import coding_genesis.tools` stays light
        from pydantic import ValidationError

        try:
            validated = self._arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            return ToolResult(f"invalid arguments for {self.name}: {problems}"[:_QUOTED], True)
        values = {name: getattr(validated, _field(i)) for i, name in enumerate(self._names)}
        args = [values.pop(name) for name in self._positional]
        with anyio.move_on_after(self.timeout) as scope:
            try:
                if inspect.iscoroutinefunction(self.function):
                    value = await self.function(*args, **values)
                else:
                    value = await anyio.to_thread.run_sync(
                        lambda: self.function(*args, **values), abandon_on_cancel=True
                    )
                    if isinstance(value, Awaitable):  # a sync callable that returned a coroutine
                        value = await value
            except Exception as exc:  # the model reads what went wrong
                log.debug("host tool %s raised", self.name, exc_info=True)
                return ToolResult(f"{type(exc).__name__}: {exc}", True)
        if scope.cancelled_caught:
            return ToolResult(f"{self.name} did not finish within {self.timeout:g}s", True)
        return ToolResult(_text(value))


def _field(index: int) -> str:
    """The model's field of the ``index``-th parameter (its alias is the
    parameter's name: a name like ``json`` or ``_x`` is no pydantic field)."""
    return f"p{index}"


def _text(value: object) -> str:
    """A return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    from pydantic_core import PydanticSerializationError, to_json

    try:
        return to_json(value, fallback=str).decode("utf-8")
    except (PydanticSerializationError, ValueError, TypeError):
        return str(value)


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without pydantic's generated titles (noise to the model)."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict) and isinstance(prop.get("title"), str):
            prop.pop("title")
    return schema


def _build(
    fn: Callable[..., Any], name: str
) -> tuple[Any, dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """The arguments' pydantic model, its JSON schema, the parameters' names
    and the positional-only ones, from ``fn``'s signature."""
    from pydantic import ConfigDict, Field, create_model

    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"host tool {name}: no signature to build a schema from: {exc}") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 (a callable object, a partial: the raw annotations then)
        hints = {}
    fields: dict[str, Any] = {}
    positional: list[str] = []
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"host tool {name}: *{param.name} cannot become a schema; name each parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        hint = hints.get(param.name, param.annotation)
        if hint is inspect.Parameter.empty:
            hint = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[_field(index)] = (hint, Field(default, alias=param.name))
    try:
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = _clean(model.model_json_schema(by_alias=True))
    except Exception as exc:  # noqa: BLE001 (pydantic's many errors of a type it cannot read)
        raise ConfigError(
            f"host tool {name}: its parameters cannot become a schema: {exc}"
        ) from None
    schema.setdefault("properties", {})
    return model, schema, tuple(signature.parameters), tuple(positional)


def _timeout(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or math.isinf(value)
        or value <= 0
    ):
        raise ConfigError(
            f"host tool {name}: timeout must be a number of seconds > 0, got {value!r}"
        )
    return float(value)


def _host_tool(
    fn: Callable[..., Any], name: str | None, description: str | None, timeout: float
) -> HostTool:
    if not callable(fn):
        raise ConfigError(f"a host tool must be a function (sync or async), got {fn!r}")
    label = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(label, str) or not _NAME.match(label):
        raise ConfigError(
            f"host tool name {label!r} must be 1-50 letters, digits, '_' or '-' (pass name=)"
        )
    if description is None:
        description = inspect.getdoc(fn) or ""
    elif not isinstance(description, str):
        raise ConfigError(f"host tool {label}: description must be a string")
    model, schema, names, positional = _build(fn, label)
    return HostTool(
        label, description, schema, fn, _timeout(label, timeout), model, names, positional
    )


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> HostTool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> Callable[[Callable[..., Any]], HostTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> HostTool | Callable[[Callable[..., Any]], HostTool]:
    """Make ``fn`` a :class:`HostTool` (``@tool``, ``@tool(name=..., timeout=...)``
    or ``tool(fn, ...)``).

    ``name`` defaults to the function's, ``description`` to its docstring;
    ``timeout`` bounds each call.  Raises :class:`ConfigError` when a
    parameter cannot become a schema (``*args``, ``**kwargs``, a type pydantic
    cannot read)."""
    if fn is not None:
        return _host_tool(fn, name, description, timeout)

    def decorate(function: Callable[..., Any]) -> HostTool:
        return _host_tool(function, name, description, timeout)

    return decorate


def as_host_tools(tools: Iterable[Callable[..., Any]] | None) -> tuple[HostTool, ...]:
    """``tools=`` checked: each a :class:`HostTool` (a plain function is
    wrapped with the defaults), their names unique."""
    if tools is None:
        return ()
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ConfigError(f"tools must be a list of functions, got {tools!r}")
    found: dict[str, HostTool] = {}
    for item in tools:
        host = (
            item
            if isinstance(item, HostTool)
            else _host_tool(item, None, None, DEFAULT_TOOL_TIMEOUT)
        )
        if host.name in found:
            raise ConfigError(f"two host tools are named {host.name!r}: give one another name=")
        found[host.name] = host
    return tuple(found.values())


# -- the caller's MCP servers (mcp_servers=) -----------------------------------------

#: An MCP server's name as both CLIs spell a tool of it (``mcp__<name>__<tool>``).
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
#: The name of the session's own server of the host tools (``tools=``).
_RESERVED = "genesis"


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """One of the caller's MCP servers (``mcp_servers={name: spec}``): a
    program the CLI starts and speaks MCP to over stdio (``command``, its
    ``args`` and ``env``), or one it reaches over HTTP (``url``).  The
    ``env`` values never reach an argv, an event or a transcript: the backend
    writes them to a private file or sends them over the CLI's stdin, and the
    run's redactor masks them."""

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None

    @property
    def http(self) -> bool:
        """The server is reached over HTTP (``url``), not started."""
        return self.url is not None

    def __repr__(self) -> str:  # the env's values are secrets: never in a repr
        where = (
            f"url={self.url!r}" if self.http else f"command={self.command!r}, args={self.args!r}"
        )
        return f"McpServerSpec({where}, env={sorted(self.env)!r})"


def _spec(name: str, value: object) -> McpServerSpec:
    if isinstance(value, Mapping):
        unknown = sorted(
            str(k) for k in value if k not in ("type", "command", "args", "env", "url")
        )
        if unknown:
            raise ConfigError(f"mcp_servers[{name!r}]: unknown key(s) {', '.join(unknown)}")
        kind = value.get("type", "http" if "url" in value else "stdio")
        if kind not in ("stdio", "http"):
            raise ConfigError(
                f"mcp_servers[{name!r}]: type must be 'stdio' or 'http', got {kind!r}"
            )
        args = value.get("args") or ()
        if isinstance(args, str | bytes) or not isinstance(args, Iterable):
            raise ConfigError(f"mcp_servers[{name!r}]: args must be a list of strings")
        value = McpServerSpec(
            command=value.get("command"),
            args=tuple(args),
            env=value.get("env") or {},
            url=value.get("url") if kind == "http" else None,
        )
    if not isinstance(value, McpServerSpec):
        raise ConfigError(
            f"mcp_servers[{name!r}] must be an McpServerSpec or a mapping, got {type(value).__name__}"
        )
    if (value.url is None) == (value.command is None):
        raise ConfigError(f"mcp_servers[{name!r}]: give either a command or a url")
    if value.url is not None and not (
        isinstance(value.url, str) and value.url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"mcp_servers[{name!r}]: url must be an http(s) URL")
    if value.command is not None and (not isinstance(value.command, str) or not value.command):
        raise ConfigError(f"mcp_servers[{name!r}]: command must be a non-empty string")
    if not all(isinstance(arg, str) for arg in value.args):
        raise ConfigError(f"mcp_servers[{name!r}]: args must be strings")
    env = value.env
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and "=" not in k for k, v in env.items()
    ):
        raise ConfigError(f"mcp_servers[{name!r}]: env must map variable names to strings")
    return McpServerSpec(value.command, tuple(value.args), dict(env), value.url)


def as_mcp_servers(value: object) -> dict[str, McpServerSpec]:
    """``mcp_servers=`` checked: each name one both CLIs can spell in a tool's
    name (``genesis`` is the session's own), each server a command or a URL."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"mcp_servers must map names to servers, got {type(value).__name__}")
    servers: dict[str, McpServerSpec] = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _SERVER_NAME.match(name):
            raise ConfigError(f"mcp_servers: bad server name {name!r} (letters, digits, _ and -)")
        if name == _RESERVED:
            raise ConfigError("mcp_servers: the name 'genesis' is the session's own (tools=)")
        servers[name] = _spec(name, spec)
    return servers
