"""What ``chatmemory.telemetry.operation`` costs per store operation, beside an empty ``with`` block.

Three setups: OpenTelemetry's API without an SDK (the default for an application that did not configure
one), the SDK with spans and metrics recorded in memory, and DEBUG logging on (to a null handler). Run:
``python benchmarks/telemetry_overhead.py``. Prints microseconds per operation; a Redis round trip here is
about 100-700 µs, for scale.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from chatmemory import telemetry

ROUNDS = 50_000


def per_operation(body: Callable[[], None]) -> float:
    start = time.perf_counter_ns()
    for _ in range(ROUNDS):
        body()
    return (time.perf_counter_ns() - start) / ROUNDS / 1000


def empty() -> None:
    with contextlib.nullcontext():
        pass


def measured() -> None:
    with telemetry.operation(backend="redis", name="save", memory_id="user-42") as op:
        op.record(attempts=1, appended=2, evicted=0, bytes=600, version=1)


def main() -> None:
    print(f"{'setup':<48} {'µs/op':>8}")
    print(f"{'empty with block (baseline)':<48} {per_operation(empty):8.2f}")
    telemetry.configure()
    print(f"{'operation(), opentelemetry-api without an SDK':<48} {per_operation(measured):8.2f}")
    logger = logging.getLogger("chatmemory")
    logger.addHandler(logging.NullHandler())
    logger.setLevel(logging.DEBUG)
    print(f"{'operation(), DEBUG logging on':<48} {per_operation(measured):8.2f}")
    logger.setLevel(logging.WARNING)
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        print("opentelemetry-sdk not installed: SDK figures skipped")
        return
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    print(f"{'operation(), SDK recording spans and metrics':<48} {per_operation(measured):8.2f}")
    telemetry.configure()


if __name__ == "__main__":
    main()
