"""A coding agent as a LangGraph node: events on the custom stream, a
TimeoutPolicy whose idle clock the node's heartbeats keep fresh."""

import asyncio
from typing import Any, TypedDict, cast

from langgraph.graph import END, START, StateGraph
from langgraph.types import TimeoutPolicy

from coding_genesis import CodingGenesisAgent
from coding_genesis.integrations.langgraph import genesis_node


class State(TypedDict, total=False):
    prompt: str
    genesis_result: dict[str, Any]


builder = StateGraph(State)
builder.add_node(
    "code",
    genesis_node(lambda: CodingGenesisAgent("failer", timeout=120)),
    timeout=TimeoutPolicy(run_timeout=600, idle_timeout=60, refresh_on="heartbeat"),
)
builder.add_edge(START, "code")
builder.add_edge("code", END)
graph = builder.compile()


async def main() -> None:
    async for part in graph.astream({"prompt": "hello"}, stream_mode=["custom", "values"]):
        mode, chunk = cast("tuple[str, dict[str, Any]]", part)  # (mode, chunk) per mode
        if mode == "custom":
            print("event:", chunk["type"])
        elif "genesis_result" in chunk:
            result = chunk["genesis_result"]
            print("status:", result["status"], "message:", result["message"][:60])


asyncio.run(main())
