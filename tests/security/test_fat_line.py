"""Round three, finding 1: one stdout line of millions of tiny containers
(``[],[],...``, 3 bytes each but ~64 bytes each once parsed) is skipped and
counted like an over-long line: memory stays bounded by the line's length,
never by what its parse would cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_genesis._util.parser import HEAVY_FLOOR, JsonLinesParser, held_cost
from tests.support import FakeCLI

#: 12 M empty lists: a 36 MB line, ~770 MB once parsed.
FAT = 12_000_000


def run_measured(tmp_path: Path, fake: FakeCLI) -> tuple[dict[str, Any], int]:
    """`genesis run --json` in a child; its result and its peak RSS (bytes)."""
    env = {
        **os.environ,
        **fake.env(),
        "GENESIS_RUN_LOG": str(tmp_path / "runs.jsonl"),
    }
    args = ["run", "-b", "claude", "--cli-path", fake.path, "--json", "-q"]
    args += ["--transcript-dir", "off", "--timeout", "120", "go"]
    out = tmp_path / f"out-{fake.mark}.json"
    peak = tmp_path / f"peak-{fake.mark}.txt"
    # The child's own peak (VmHWM of its memory, read as it ends): ru_maxrss would
    # carry this pytest process's peak across the exec and hide the line's cost.
    code = (
        "import sys\n"
        "from coding_genesis._cli.main import main\n"
        "rc = main(sys.argv[2:])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "open(sys.argv[1], 'w').write(hwm.split()[1])\n"
        "sys.exit(rc)\n"
    )
    with out.open("wb") as fh:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(peak), *args],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            env=env,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, out.read_text()
    return json.loads(out.read_text()), int(peak.read_text()) * 1024


@pytest.mark.slow
def test_a_line_of_millions_of_containers_is_skipped_and_memory_stays_bounded(
    tmp_path: Path,
) -> None:
    base = FakeCLI(tmp_path, "claude")
    base.script([{"init": True}, {"fat_line": 1000}, {"answer": "done"}])
    baseline, base_rss = run_measured(tmp_path, base)
    assert baseline["skipped_lines"] == 0 and baseline["tool_calls"] == 1

    fat = FakeCLI(tmp_path, "claude")
    fat.script([{"init": True}, {"fat_line": FAT}, {"answer": "done"}])
    result, fat_rss = run_measured(tmp_path, fat)
    line = 3 * FAT + 100
    assert result["skipped_lines"] == 1, result  # the run says so
    assert result["tool_calls"] == 0 and result["message"] == "done"
    assert fat_rss <= base_rss + 3 * line, (
        f"peak RSS {fat_rss / 2**20:.0f} MiB vs baseline {base_rss / 2**20:.0f} MiB "
        f"for a {line / 2**20:.0f} MiB line"
    )


def test_the_parser_skips_a_costly_line_whatever_the_chunking() -> None:
    fat = b'{"type":"x","a":[' + b"[]," * 2_000_000 + b"[]]}\n"
    ok = b'{"type":"ok","a":[[],{}]}\n'
    assert held_cost(fat) > 64 * 2**20 > len(fat)
    for size in (len(fat) + len(ok), 65536, 1_000_003):
        parser = JsonLinesParser()
        data = ok + fat + ok
        got = [obj for i in range(0, len(data), size) for obj in parser.feed(data[i : i + size])]
        assert [o["type"] for o in got] == ["ok", "ok"]
        assert (parser.lines, parser.skipped) == (3, 1)
    # A long line of text with brackets in it (code in a tool result) is
    # kept while its estimate (brackets in strings count) is under the limit.
    half = b'{"type":"big","a":"' + b"[x]" * 500_000 + b'"}\n'
    parser = JsonLinesParser()
    assert [o["type"] for o in parser.feed(half)] == ["big"]
    # Ordinary lines below the floor are never counted, whatever the limit.
    small = JsonLinesParser(HEAVY_FLOOR)
    line = b'{"type":"s","a":[' + b"[]," * 20_000 + b"[]]}\n"
    assert len(line) < HEAVY_FLOOR
    assert [o["type"] for o in small.feed(line)] == ["s"] and small.skipped == 0
    # A limit below the floor still skips over-long lines.
    tiny = JsonLinesParser(100)
    assert tiny.feed(b'{"a":"' + b"x" * 200 + b'"}\n{"b":1}\n') == [{"b": 1}]
    assert tiny.skipped == 1


def test_the_fake_line_is_what_it_says() -> None:
    fake = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "fakes" / "fakecli.py")],
        env={**os.environ, "FAKE_CLI_SCRIPT": json.dumps([{"fat_line": 5}])},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
    )
    obj = json.loads(fake.stdout)
    assert obj["message"]["content"][0]["input"] == {"items": [[]] * 5}
