"""Fixtures of tests/fakes: the fake model server and the real-CLI locators."""

from tests.fakes.plugin import model_server, real_claude, real_codex

__all__ = ["model_server", "real_claude", "real_codex"]
