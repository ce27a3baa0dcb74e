"""A secret split across a message's deltas is masked: the pieces are redacted
joined (``_util.redact.Pieces``), never one by one."""

from __future__ import annotations

import itertools

from coding_genesis._util.redact import MASK, Pieces, Redactor

SECRET = "supersecretvalue123"
TEXT = f"the key is {SECRET}, and {SECRET[:6]} is only its start"


def _given_out(cuts: tuple[int, ...]) -> list[str]:
    pieces = Pieces(Redactor({"MY_API_KEY": SECRET}))
    bounds = (0, *cuts, len(TEXT))
    out = [pieces.piece("m", TEXT[a:b]) for a, b in itertools.pairwise(bounds)]
    return out + [text for _, text in pieces.release()]


def test_every_cut_in_two_or_three_pieces_masks_the_secret() -> None:
    masked = TEXT.replace(SECRET, MASK)
    for first in range(1, len(TEXT)):
        for cuts in ((first,), (first, min(first + 5, len(TEXT) - 1))):
            out = _given_out(cuts)
            assert all(SECRET not in piece for piece in out), cuts
            assert "".join(out) == masked, cuts


def test_a_text_without_a_secret_start_is_given_out_at_once() -> None:
    pieces = Pieces(Redactor({"MY_API_KEY": SECRET}))
    assert pieces.piece("m", "hello ") == "hello "
    assert not pieces
    assert pieces.piece("m", "then sup") == "then "  # "sup" may begin the secret
    assert pieces.piece("m", "er") == ""
    assert pieces.release() == [("m", "super")]


def test_streams_are_held_apart() -> None:
    pieces = Pieces(Redactor({"MY_API_KEY": SECRET}))
    assert pieces.piece("a", "x supersecret") == "x "
    assert pieces.piece("b", "value123") == "value123"  # another message: not a join
    assert pieces.piece("a", "value123!") == MASK + "!"
