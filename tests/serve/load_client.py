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


#: In a ``run`` event of a run that ended (counted as bytes arrive, to know when to read them).
_FINISHED = b'"state":"finished"'


class Stream(asyncio.Protocol):
    """One SSE client over a raw connection (as light as a browser's).

    What arrives is stamped with its time as the socket is read and kept
    (:meth:`data_received`); the chunked body and the frames are read later
    (:meth:`settle`).  200 streams in one process: the time to read, decode and
    parse the other 199 streams' bytes must not count as this one's lag, which
    is the server's."""

    def __init__(self, url: str, token: str, path: str = "/events") -> None:
        self.url, self.token, self.path = urlsplit(url), token, path
        self.events: list[dict[str, Any]] = []
        self.lags: list[float] = []
        self.finished: dict[str, int] = collections.Counter()
        self.pieces: list[tuple[float, bytes]] = []
        self.missed = 0
        self.transport: asyncio.Transport | None = None
        self.head = b""
        self.started = False
        self.raw = b""
        self.body = b""
        self.ended = False
        #: ``_FINISHED`` seen in the bytes so far (and the bytes that may start one).
        self.marks = 0
        self.tail = b""
        self.arrived = asyncio.Event()
        self.wanted = 1

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.url.hostname or "127.0.0.1", self.url.port or 80
        await loop.create_connection(lambda: self, host, port)
        assert self.transport is not None
        self.transport.write(
            f"GET {self.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
            f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        await self.arrived.wait()
        assert b" 200 " in self.head.split(b"\r\n", 1)[0], self.head[:200]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if not self.started:  # the response's head, then its body
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            self.head, data = self.head.split(b"\r\n\r\n", 1)
            self.started = True
            self.arrived.set()
        self.pieces.append((now, data))
        self.marks += (self.tail + data).count(_FINISHED)
        self.tail = data[1 - len(_FINISHED) :]
        if self.marks >= self.wanted:
            self.arrived.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.arrived.set()

    async def reach(self, runs: int) -> None:
        """Wait (reading nothing) until the bytes show ``runs`` runs finishing,
        or the stream ends: many streams read at once, none is parsed until all
        are there."""
        while self.marks < runs and not self.ended:
            self.wanted = runs
            self.arrived.clear()
            await self.arrived.wait()

    async def follow(self, runs: int, only: set[str] | None = None) -> None:
        """Wait until ``runs`` runs (of ``only``, when given) were seen finishing."""
        while True:
            self.settle()
            if (
                self.ended
                or len(self.finished if only is None else only & set(self.finished)) >= runs
            ):
                return
            # Bytes that may end a finished run's frame: wake on them (0: on any).
            self.wanted = runs if self.marks < runs else 0
            self.arrived.clear()
            await self.arrived.wait()

    def settle(self) -> None:
        """Read the bytes kept (the chunked body, its frames): the events, what
        was missed, each event's lag (from when the bytes that ended it arrived)."""
        for arrived, piece in self.pieces:
            self.raw += piece
            while (end := self.raw.find(b"\r\n")) >= 0:
                size = int(self.raw[:end], 16)
                if len(self.raw) < end + 4 + size:
                    break
                self.body += self.raw[end + 2 : end + 2 + size]
                self.raw = self.raw[end + 4 + size :]
            *frames, self.body = self.body.split(b"\n\n")
            for frame in frames:
                self._read(arrived, frame)
        self.pieces.clear()

    def _read(self, arrived: float, frame: bytes) -> None:
        fields = dict(line.split(": ", 1) for line in frame.decode().splitlines() if ": " in line)
        if "data" not in fields:
            return
        payload = json.loads(fields["data"])
        self.events.append({"event": fields.get("event"), "id": fields.get("id")})
        if fields.get("event") == "missed":
            self.missed += payload.get("missed") or 0
        elif isinstance(payload.get("ts"), float):
            self.lags.append(arrived - payload["ts"])
        if fields.get("event") == "run" and payload.get("state") == "finished":
            self.finished[payload["id"]] += 1

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def sse(url: str, token: str, n: int, runs: int) -> None:
    streams = [Stream(url, token) for _ in range(n)]
    await asyncio.wait_for(asyncio.gather(*(s.open() for s in streams)), DEADLINE)
    print(json.dumps({"connected": n}), flush=True)
    await asyncio.wait_for(asyncio.gather(*(s.reach(runs) for s in streams)), DEADLINE)
    await asyncio.wait_for(asyncio.gather(*(s.follow(runs) for s in streams)), DEADLINE)
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
