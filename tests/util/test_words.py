"""Numbers and words said one way (issue 28): counts in the singular or plural, money in fixed
decimals with its currency, large counts short, "unknown" where nothing was reported."""

from __future__ import annotations

import pytest

from coding_genesis._cli.render import usage_line
from coding_genesis._util.words import counted, money, short_count


def test_counts_with_their_noun() -> None:
    assert counted(1, "tool call") == "1 tool call"
    assert counted(0, "tool call") == "0 tool calls"
    assert counted(2, "CLI API retry", "CLI API retries") == "2 CLI API retries"
    assert counted(1, "token", short=True) == "1 token"
    assert counted(60_600, "token", short=True) == "60.6k tokens"


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (7e-05, "0.000070 USD"),
        (0.0030549999999999996, "0.0031 USD"),
        (0.036, "0.0360 USD"),
        (0.0, "0.0000 USD"),
        (4e-06, "0.000004 USD"),
        (4e-07, "<0.000001 USD"),
        (12.5, "12.5000 USD"),
        (None, "unknown"),
        (float("nan"), "unknown"),
    ],
)
def test_money_in_fixed_decimals_with_its_currency(amount: float | None, text: str) -> None:
    assert money(amount) == text
    assert "e-" not in money(amount)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (950, "950"),
        (1_500, "1.5k"),
        (12_000, "12k"),
        (999_999, "1M"),
        (1_000_000, "1M"),
        (2_500_000, "2.5M"),
        (200_000, "200k"),
    ],
)
def test_short_counts(n: int, text: str) -> None:
    assert short_count(n) == text


def test_usage_line_says_unknown_when_nothing_was_reported() -> None:
    nothing = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total": 0}
    result = {"metering": {"tokens": nothing, "context": None}, "usage_source": "unknown"}
    line = usage_line(result)
    assert line is not None and "0 tokens" not in line and "tokens unknown" in line
    window = {"fraction": 0.0, "window": 1_000_000}
    some = {"input": 20, "output": 6, "cache_read": 0, "cache_write": 0, "total": 26}
    line = usage_line(
        {"metering": {"tokens": some, "context": window, "turns": 1}, "cost_usd": 7e-05}
    )
    assert line is not None
    assert "26 tokens (in 20, out 6" in line and "1 turn" in line
    assert "context 0% of 1M" in line and "1000.0k" not in line
    assert "0.000070 USD" in line and "e-05" not in line


def test_the_failure_line_is_red_on_a_terminal_and_stays_printable() -> None:
    """Issue 28: the failure summary line colored as `genesis runs` colors failures; the
    CLI's text in it can still carry no escape of its own."""
    from coding_genesis._cli.render import terminal_line

    line = terminal_line("failure: auth (retryable: no) - \x1b[2Jcleared")
    assert line.startswith("\x1b[31mfailure: auth") and line.endswith("\x1b[0m")
    assert "\x1b[2J" not in line
    assert terminal_line("genesis: ok - 1.0s") == "genesis: ok - 1.0s"
