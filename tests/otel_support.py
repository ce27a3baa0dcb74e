"""The OpenTelemetry SDK's in-memory exporter as the global tracer provider, for one test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _reset_global_provider() -> None:
    # What opentelemetry's own test helpers do: the API lets the global
    # provider be set once per process, and other tests must not inherit ours.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


class Spans:
    """The finished spans of a test, with helpers to look them up."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        pid = parent.context.span_id
        return [s for s in self.all() if s.parent is not None and s.parent.span_id == pid]

    def text(self) -> str:
        """Every span's name, attributes and status, as one string (for "never here")."""
        parts: list[str] = []
        for span in self.all():
            parts.append(span.name)
            parts.extend(f"{k}={v!s}" for k, v in (span.attributes or {}).items())
            parts.append(str(span.status.description))
        return "\n".join(parts)


def traceparent(span: Any) -> str:
    """The W3C ``traceparent`` naming a span (flags aside)."""
    ctx = span.context if hasattr(span, "context") else span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-"


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    try:
        yield Spans(exporter)
    finally:
        provider.shutdown()
        _reset_global_provider()
