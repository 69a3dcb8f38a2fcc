"""The ``recorded`` fixture: chatmemory's telemetry sent to the OpenTelemetry SDK's in-memory exporters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatmemory import telemetry
from telemetry.recording import Recorded


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    """Spans and metrics of the test, memory ids off unless the test opts in."""
    monkeypatch.delenv("CHATMEMORY_OTEL_RECORD_MEMORY_IDS", raising=False)
    made = Recorded()
    telemetry.configure(tracer_provider=made.tracer_provider, meter_provider=made.meter_provider)
    yield made
    telemetry.configure()
    made.meter_provider.shutdown()
    made.tracer_provider.shutdown()
