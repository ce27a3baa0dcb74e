"""Print the reliability figures at the end of the run (``-s`` is not needed)."""

from __future__ import annotations

import pytest

from tests.reliability.figures import FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for fig in FIGURES:
        terminalreporter.write_line(
            f"{fig['test']}: runs={fig['runs']} leaked_processes={fig['leaked_processes']} "
            f"zombies={fig['zombies']} fd_delta={fig['fd_delta']} "
            f"thread_delta={fig['thread_delta']} not_ready={fig['not_ready']} "
            f"seconds={fig['seconds']}"
        )
    terminalreporter.write_line(f"json: {FIGURES[-1]['json']}")
