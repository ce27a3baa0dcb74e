"""The same batch on Ray: one Ray task per run, each supervising its own tree.

Here Ray starts a local cluster; on a real one use
ray.init(address="auto" or "ray://head:10001", runtime_env={"pip": ["coding-genesis[ray]"]}).
"""

import asyncio

import ray

from coding_genesis import RunSpec
from coding_genesis.integrations.ray import RayRunner


async def main() -> None:
    runner = RayRunner(num_cpus=0.25)  # Ray retries stay off; our policy decides
    specs = [RunSpec(prompt=p, backend="failer") for p in ["hello", "/fail"] * 4]
    results = await runner.run_many(specs, concurrency=8)
    print([(r["index"], r["status"]) for r in results])


ray.init(num_cpus=2, include_dashboard=False)
try:
    asyncio.run(main())
finally:
    ray.shutdown()
