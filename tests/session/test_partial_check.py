"""``partial=``: where it is honored and where it is refused, in the check's one
wording (a backend whose one-shot stream has no deltas runs the request live;
one with no two-way protocol either cannot)."""

from __future__ import annotations

from coding_genesis import CodingGenesisAgent
from coding_genesis.backends import get_backend
from coding_genesis.backends.generic import GenericBackend
from coding_genesis.capabilities import check
from coding_genesis.request import Request


def _request(backend: str, **options: object) -> Request:
    config = CodingGenesisAgent(backend).config
    return Request.build(config, "hi", options, cwd=None, backend=backend)


def test_a_one_shot_stream_without_deltas_runs_live_and_one_with_them_does_not() -> None:
    for name, live in (("claude", False), ("qwen", False), ("codex", True), ("gemini", True)):
        backend = get_backend(name)
        request = _request(name, partial=True)
        assert backend.runs_live(request) is live, name
        assert check(backend, request) is None, name
        assert not backend.runs_live(_request(name))


def test_a_backend_without_deltas_refuses_partial_in_the_checks_words() -> None:
    plain = GenericBackend("plain", command=["plain"])
    refused = check(plain, _request("failer", partial=True))
    assert refused is not None and refused.option == "partial"
    assert refused.message.startswith(
        "backend 'plain' cannot stream text and thinking as written, which partial= needs; "
        "backends that can: claude, codex, failer, gemini"
    )
