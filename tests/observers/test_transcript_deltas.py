"""A transcript keeps the CLI's bytes and never a delta as an event record:
past its raw cap the stdout is decoded into events.jsonl, whole messages only."""

from __future__ import annotations

import json
from pathlib import Path

from coding_genesis import CodingGenesisAgent


def test_past_the_raw_cap_the_records_hold_the_whole_message_and_no_delta(
    tmp_path: Path,
) -> None:
    agent = CodingGenesisAgent(
        "failer",
        cwd=str(tmp_path),
        transcripts=str(tmp_path / "t"),
        transcript_max_bytes=300,  # the init line fits, the pieces do not
        partial=True,
    )
    response = agent.run_sync("hello")
    assert response["status"] == 0, response
    where = Path(response["transcript"] or "")
    records = [json.loads(line) for line in (where / "events.jsonl").read_text().splitlines()]
    kinds = [r.get("type") for r in records]
    assert "text" in kinds, kinds  # decoded past the cap: the whole message
    assert "text_delta" not in kinds and "thought_delta" not in kinds, kinds
    raw = (where / "stdout.jsonl").read_text()
    assert '"stream_event"' not in raw  # the cap came before the pieces
