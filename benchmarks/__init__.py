"""Benchmarks of coding-genesis against the limit and against claude-agent-sdk.

Run ``python -m benchmarks`` (full, writes ``benchmarks/RESULTS.md``) or
``python -m benchmarks --smoke`` (under a minute).  See ``run.py``.
"""
