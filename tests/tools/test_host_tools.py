"""The caller's functions as tools: the schema the model sees, and every way a call
ends (a value, bad arguments, a raise, a timeout) is a result, never an exception."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import BaseModel, Field

from coding_genesis import HostTool, ToolResult, tool
from coding_genesis.errors import ConfigError
from coding_genesis.tools import DEFAULT_TOOL_TIMEOUT, as_host_tools

pytestmark = pytest.mark.anyio


class Point(BaseModel):
    x: int
    y: int = 0


@dataclass
class Found:
    path: str
    line: int


def search(
    query: Annotated[str, Field(description="what to look for")],
    limit: int = 10,
    kind: Literal["code", "docs"] = "code",
    near: Point | None = None,
) -> list[Found]:
    """Search the repository.

    Answers the places found."""
    return [Found(f"{kind}/{query}.py", limit + (near.x if near else 0))]


def test_the_schema_comes_from_the_typed_parameters() -> None:
    host = tool(search)
    assert host.name == "search"
    assert host.description == "Search the repository.\n\nAnswers the places found."
    assert host.timeout == DEFAULT_TOOL_TIMEOUT
    schema = dict(host.parameters)
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for"}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["kind"] == {"type": "string", "enum": ["code", "docs"], "default": "code"}
    assert props["near"]["anyOf"][0] == {"$ref": "#/$defs/Point"}
    assert "title" not in schema and all("title" not in p for p in props.values())


def test_decorator_forms_and_the_function_stays_callable() -> None:
    @tool
    def plain(a: int) -> int:
        return a * 2

    @tool(name="renamed", description="Doubles.", timeout=2)
    async def fancy(a: int) -> int:
        return a * 2

    assert isinstance(plain, HostTool) and plain(4) == 8
    assert (fancy.name, fancy.description, fancy.timeout) == ("renamed", "Doubles.", 2.0)
    wrapped = as_host_tools([plain, search])
    assert [t.name for t in wrapped] == ["plain", "search"]
    assert wrapped[0] is plain
    assert as_host_tools(None) == ()


def no_hint(value, flag=False):  # type: ignore[no-untyped-def]  # (a caller's untyped function)
    return [value, flag]


def test_an_untyped_parameter_takes_any_value() -> None:
    host = tool(no_hint)
    assert host.parameters["required"] == ["value"]
    assert host.parameters["properties"]["flag"] == {"default": False}


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: tool(lambda x: x), "name"),
        (lambda: tool(lambda x: x, name="has space"), "name"),
        (lambda: tool(lambda *xs: xs, name="star"), "*xs"),
        (lambda: tool(lambda **kw: kw, name="kw"), "*kw"),
        (lambda: tool(search, timeout=0), "timeout"),
        (lambda: tool(search, timeout=float("nan")), "timeout"),
        (lambda: tool("search"), "function"),  # type: ignore[call-overload]
        (lambda: as_host_tools([search, tool(name="search")(no_hint)]), "two host tools"),
        (lambda: as_host_tools("search"), "list of functions"),  # type: ignore[arg-type]
    ],
)
def test_what_cannot_be_a_tool_is_a_config_error(make: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("*", r"\*")):
        make()


async def test_a_call_answers_the_value_as_text() -> None:
    host = tool(search)
    result = await host.call({"query": "parse", "near": {"x": 2}})
    assert result == ToolResult('[{"path":"code/parse.py","line":12}]')
    assert await tool(lambda: "as is", name="s").call({}) == ToolResult("as is")
    assert await tool(lambda: None, name="n").call({}) == ToolResult("")
    assert await tool(lambda: b"\xffbytes", name="b").call({}) == ToolResult("\ufffdbytes")


async def test_sync_functions_run_off_the_event_loop_async_ones_on_it() -> None:
    loop_thread = threading.current_thread()
    seen: list[threading.Thread] = []

    def sync() -> str:
        seen.append(threading.current_thread())
        return "s"

    async def asynchronous() -> str:
        seen.append(threading.current_thread())
        return "a"

    assert (await tool(sync).call({})).text == "s"
    assert (await tool(asynchronous).call({})).text == "a"
    assert seen[0] is not loop_thread and seen[1] is loop_thread


async def test_bad_arguments_are_an_error_the_model_reads() -> None:
    host = tool(search)
    wrong = await host.call({"query": "q", "limit": "many"})
    assert wrong.is_error and "limit" in wrong.text and "integer" in wrong.text
    missing = await host.call({})
    assert missing.is_error and "query" in missing.text
    extra = await host.call({"query": "q", "color": "red"})
    assert extra.is_error and "color" in extra.text


async def test_a_raise_is_an_error_result() -> None:
    def broken(path: str) -> str:
        raise FileNotFoundError(f"no such file: {path}")

    result = await tool(broken).call({"path": "/x"})
    assert result == ToolResult("FileNotFoundError: no such file: /x", is_error=True)


@pytest.mark.slow
async def test_a_slow_async_tool_is_cancelled_at_its_timeout() -> None:
    cancelled = anyio.Event()

    async def slow() -> str:
        try:
            await anyio.sleep(60)
        finally:
            cancelled.set()
        return "never"

    started = time.monotonic()
    result = await tool(slow, timeout=0.2).call({})
    assert result == ToolResult("slow did not finish within 0.2s", is_error=True)
    assert time.monotonic() - started < 5 and cancelled.is_set()


@pytest.mark.slow
async def test_a_slow_sync_tool_is_abandoned_at_its_timeout() -> None:
    release = threading.Event()

    def stuck() -> str:
        release.wait(30)
        return "late"

    started = time.monotonic()
    result = await tool(stuck, timeout=0.2).call({})
    release.set()
    assert result.is_error and "0.2s" in result.text
    assert time.monotonic() - started < 5


def keyword_names(json: bool, schema: str = "s", /) -> list[object]:
    """Names that are attributes of a pydantic model, passed by position."""
    return [json, schema]


async def test_parameter_names_pydantic_would_refuse_and_positional_only() -> None:
    host = tool(keyword_names)
    assert list(host.parameters["properties"]) == ["json", "schema"]
    assert (await host.call({"json": True})).text == '[true,"s"]'
