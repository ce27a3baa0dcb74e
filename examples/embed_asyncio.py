"""Many agents from plain asyncio: a bounded pool, events tagged by request."""

import asyncio

from coding_genesis.batch import RunSpec, run_many


async def main() -> None:
    specs = [
        RunSpec(prompt=prompt, backend="failer", timeout=60)
        for prompt in ["hello", "/fail", "/rate-limit", "/partial"]
    ]
    results = await run_many(
        specs,
        concurrency=2,
        on_event=lambda e: print(f"  #{e['index']} {e['type']}"),
    )
    for r in results:  # in input order, whatever finished first
        print(r["index"], r["status"], r["error"], (r["failure"] or {}).get("category"))


asyncio.run(main())
