"""Clients of a server, in a process of their own (``python -m tests.serve.load_client``).

``sse URL TOKEN N RUNS``: N clients follow ``/events`` at once; once every one
has seen RUNS runs finish, one JSON line reports what each saw, then the
clients stay connected until a line arrives on stdin, and disconnect.
``submit URL TOKEN N``: N runs posted (50 at a time), each answered exactly
once on one ``/events`` stream; one JSON line reports the ids and answers.
Every loop is bounded in count and in time (``DEADLINE``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit

#: No client runs longer than this (seconds).
DEADLINE = 240.0


class Stream:
    """One SSE client over a raw connection (as light as a browser's)."""

    def __init__(self, url: str, token: str, path: str = "/events") -> None:
        self.url, self.token, self.path = urlsplit(url), token, path
        self.events: list[dict[str, Any]] = []
        self.lags: list[float] = []
        self.finished: dict[str, int] = collections.Counter()
        self.frames: list[tuple[float, bytes]] = []
        self.missed = 0
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        reader, writer = await asyncio.open_connection(self.url.hostname, self.url.port)
        self.reader, self.writer = reader, writer
        writer.write(
            f"GET {self.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
            f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head[:200]

    async def follow(self, runs: int, only: set[str] | None = None) -> None:
        """Read (a chunked body) until ``runs`` runs (of ``only``, when given)
        were seen finishing.  Each frame is kept with when it arrived and read
        later (:meth:`settle`), so that reading 200 streams in one process costs
        each as little as possible, and the lag measured is the server's."""
        buffer = b""
        while len(self.finished if only is None else only & set(self.finished)) < runs:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                return
            now = time.time()
            buffer += (await self.reader.readexactly(size + 2))[:-2]
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                self.frames.append((now, frame))
                if b"\nevent: run\n" in frame and b'"state":"finished"' in frame:
                    self.finished[json.loads(frame.split(b"\ndata: ", 1)[1])["id"]] += 1

    def settle(self) -> None:
        """Read the frames kept: the events, what was missed, each event's lag."""
        for arrived, frame in self.frames:
            fields = dict(
                line.split(": ", 1) for line in frame.decode().splitlines() if ": " in line
            )
            if "data" not in fields:
                continue
            payload = json.loads(fields["data"])
            self.events.append({"event": fields.get("event"), "id": fields.get("id")})
            if fields.get("event") == "missed":
                self.missed += payload.get("missed") or 0
            elif isinstance(payload.get("ts"), float):
                self.lags.append(arrived - payload["ts"])
        self.frames.clear()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def sse(url: str, token: str, n: int, runs: int) -> None:
    streams = [Stream(url, token) for _ in range(n)]
    await asyncio.wait_for(asyncio.gather(*(s.open() for s in streams)), DEADLINE)
    print(json.dumps({"connected": n}), flush=True)
    await asyncio.wait_for(asyncio.gather(*(s.follow(runs) for s in streams)), DEADLINE)
    for s in streams:
        s.settle()
    lags = sorted(lag for s in streams for lag in s.lags)
    report = {
        "events": [len(s.events) for s in streams],
        "ids": len({tuple(e["id"] for e in s.events) for s in streams}),
        "missed": sum(s.missed for s in streams),
        "finished": [dict(s.finished) for s in streams[:1]],
        "p99_lag": lags[int(0.99 * (len(lags) - 1))] if lags else None,
        "median_lag": lags[len(lags) // 2] if lags else None,
    }
    print(json.dumps(report), flush=True)
    await asyncio.wait_for(
        asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline), DEADLINE
    )
    for s in streams:
        s.close()
    await asyncio.sleep(0.2)


async def submit(url: str, token: str, n: int) -> None:
    import httpx

    watch = Stream(url, token)
    await watch.open()
    ids: list[str] = []
    refused: list[int] = []
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, limits=limits, timeout=60
    ) as client:

        async def one(i: int) -> None:
            response = await client.post("/runs", json={"prompt": f"load {i}"})
            if response.status_code == 202:
                ids.append(response.json()["id"])
            else:
                refused.append(response.status_code)

        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), DEADLINE)
        print(json.dumps({"submitted": len(ids), "refused": refused}), flush=True)
        await asyncio.wait_for(
            asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline), DEADLINE
        )
        await asyncio.wait_for(watch.follow(len(ids), set(ids)), DEADLINE)
        watch.close()
        watch.settle()
        answers = dict(watch.finished)
        states: collections.Counter[str] = collections.Counter()
        for key in ids:
            view = (await client.get(f"/runs/{key}")).json()
            states[f"{view['state']} {view['status']}"] += 1
    print(
        json.dumps(
            {
                "ids": len(set(ids)),
                "answered_once": sum(1 for k in ids if answers.get(k) == 1),
                "answered_more": sum(1 for k in ids if answers.get(k, 0) > 1),
                "states": dict(states),
            }
        ),
        flush=True,
    )


def main(argv: list[str]) -> None:
    mode, url, token, n, *rest = argv
    if mode == "sse":
        asyncio.run(sse(url, token, int(n), int(rest[0])))
    else:
        asyncio.run(submit(url, token, int(n)))


if __name__ == "__main__":
    main(sys.argv[1:])
