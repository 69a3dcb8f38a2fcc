"""Spans and metric points collected by the OpenTelemetry SDK's in-memory exporters."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatmemory import telemetry


class Recorded:
    """Spans and metric points the SDK's in-memory exporters collected."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def opt_in(self) -> None:
        """Put memory ids on spans from now on."""
        telemetry.configure(
            record_memory_ids=True, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def everything(self) -> str:
        """Every span's name, attributes, events and status, and every metric point's attributes, as text."""
        parts: list[str] = []
        for span in self.finished():
            parts += [span.name, repr(dict(span.attributes)), repr(span.status.description)]
            parts += [f"{event.name} {dict(event.attributes)!r}" for event in span.events]
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    parts += [repr(dict(point.attributes)) for point in metric.data.data_points]
        return "\n".join(parts)

    def value(self, name: str, **attributes: str) -> int:
        """The sum of counter ``name`` over its points whose attributes include ``attributes``."""
        return sum(
            point.value
            for point in self.points(name)
            if all(point.attributes.get(f"chatmemory.{key}") == value for key, value in attributes.items())
        )


BACKEND_NAMES = {
    "memory": "memory",
    "redis": "redis",
    "redis_cluster": "redis",
    "mongodb": "mongodb",
    "sqlite": "sql",
    "sqlite_aiosqlite": "sql",
    "postgres": "sql",
    "mysql": "sql",
    "langchain4j_redis": "langchain4j-redis",
    "langchain4j_redis_cluster": "langchain4j-redis",
}
"""The ``chatmemory.backend`` a test backend's stores report."""
