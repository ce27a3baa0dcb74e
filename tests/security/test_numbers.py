"""Round three, finding 2: numbers out of range from a CLI or a price file
(beyond 64 bits, beyond 2**53, negative, not finite) are clamped at the door:
null with a warning naming the field, never a traceback in ``--json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from coding_genesis._observers.prices import ModelPrice, load_prices
from coding_genesis._util.numbers import MAX_SAFE_INT, is_bad_number, safe_count
from coding_genesis.backends._common import as_int
from coding_genesis.errors import ConfigError
from coding_genesis.usage import normalize_usage
from tests.support import FakeCLI
from tests.terminal import genesis

RUN = ["run", "-b", "claude", "--cli-path"]
HUGE = "1000000000000000000000000000000"


def huge_script() -> list[dict[str, Any]]:
    message = (
        '{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":'
        '[{"type":"text","text":"hi"}],"usage":{"input_tokens":' + HUGE + ","
        '"output_tokens":-5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}'
    )
    result = (
        '{"type":"result","subtype":"success","is_error":false,"result":"done",'
        '"session_id":"s","num_turns":"' + HUGE + '","duration_ms":-3,"total_cost_usd":-1.5,'
        '"usage":{"input_tokens":' + HUGE + ',"output_tokens":7},'
        '"modelUsage":{"claude-sonnet-4-5":{"inputTokens":1e30,"outputTokens":1,'
        '"costUSD":-2,"contextWindow":' + HUGE + "}}}"
    )
    return [{"init": True}, {"raw": message}, {"raw": result}]


def assert_safe(value: Any) -> None:
    """Every number in ``value`` is one every JSON reader takes."""
    if isinstance(value, dict):
        for item in value.values():
            assert_safe(item)
    elif isinstance(value, list):
        for item in value:
            assert_safe(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        assert abs(value) <= MAX_SAFE_INT, value


@pytest.mark.slow
def test_genesis_run_json_survives_a_number_beyond_64_bits(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    fake.script(huge_script())
    proc = genesis(
        [*RUN, fake.path, "--json", "-q", "--transcript-dir", str(tmp_path / "runs"), "go"],
        env={**fake.env(), "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")},
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert proc.returncode == result["status"] == 0
    assert result["message"] == "done"
    assert_safe(result)
    assert result["usage"]["input_tokens"] is None
    context = result["metering"]["context"]
    assert context["used_tokens"] == 0 and context["fraction"] >= 0
    (warning,) = [w for w in result["warnings"] if "out of range" in w]
    for field in ("usage.input_tokens", "cost_usd", "duration_ms", "contextWindow"):
        assert field in warning
    # Every reader of the run afterwards: the transcript, `genesis show`, `runs`.
    run_dir = Path(result["transcript"])
    for name in ("result.json", "meta.json"):
        assert_safe(json.loads((run_dir / name).read_text()))
    where = ["--transcript-dir", str(tmp_path / "runs")]
    for args in (["show", "last", "--json"], ["show", "last", "--events"], ["runs", "--json"]):
        shown = genesis([*args, *where], env={"GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")})
        assert shown.returncode == 0 and b"Traceback" not in shown.stderr, shown.stderr
        assert shown.stdout.strip()
    # --events: every line is JSON.
    events = genesis(
        [*RUN, fake.path, "--events", "-q", "--transcript-dir", "off", "go"],
        env={**fake.env(), "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl")},
    )
    assert events.returncode == 0 and b"Traceback" not in events.stderr
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert lines[-1]["type"] == "response"
    assert_safe(lines[-1])
    # Every event the tally, metering and budgets read is clamped; a message's
    # own usage (claude's, one per message: the hot path) is clamped where it
    # is summed, and its event carries the number as parsed (orjson reads a
    # longer integer as a float: valid JSON, as here).
    assert_safe([e for e in lines if e["type"] != "usage" or "message_id" not in e])


def test_the_helpers_clamp_every_way_out_of_range() -> None:
    for bad in (-1, 2**53, 10**30, -0.5, 1e30, float("nan"), float("inf"), -float("inf")):
        assert is_bad_number(bad)
        assert safe_count(bad) is None
    for good in (0, 1, MAX_SAFE_INT, 0.0, 2.5):
        assert not is_bad_number(good)
    assert not is_bad_number(True) and not is_bad_number("12")
    assert safe_count(3.0) == 3 and safe_count(2.5) is None
    assert as_int(HUGE) is None and as_int(1e30) is None and as_int(10**30) is None
    assert as_int("-3") == -3 and as_int(429) == 429
    tokens = normalize_usage({"input_tokens": 10**30, "output_tokens": 1e30})
    assert tokens.input == tokens.output == 0
    usage = {"input_tokens": 2**53, "output_tokens": 3, "cache_read_input_tokens": 0}
    assert normalize_usage({**usage, "cache_creation_input_tokens": 0}).input == 0
    orjson.dumps(tokens.to_dict())


@pytest.mark.slow
@pytest.mark.parametrize("window", [10**30, 2**53, -100, 0, 1.5])
def test_a_price_file_window_out_of_range_is_a_usage_error(tmp_path: Path, window: Any) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"claude-sonnet": {"input": 3, "output": 15, "context_window": window}})
    )
    with pytest.raises(ConfigError, match="context_window"):
        load_prices(path)
    proc = genesis(
        ["run", "-b", "failer", "--prices", str(path), "--transcript-dir", "off", "go"],
        env={"GENESIS_RUN_LOG": os.devnull},
    )
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr and b"context_window" in proc.stderr
    with pytest.raises(ConfigError, match="price input"):
        ModelPrice(1e300, 1)
