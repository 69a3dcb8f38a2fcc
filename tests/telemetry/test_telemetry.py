"""chatmemory.telemetry through the OpenTelemetry SDK's in-memory exporters, and its log lines."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from chatmemory import ConcurrentUpdateError, InMemoryChatMemoryStore, UserMessage, telemetry
from chatmemory.cli import main
from telemetry.recording import Recorded


def test_a_span_per_operation_with_its_figures(recorded: Recorded) -> None:
    with telemetry.operation(backend="redis", name="save", memory_id="user-42") as op:
        assert trace.get_current_span().get_span_context().is_valid  # current, so driver spans nest under it
        op.record(attempts=2, appended=3, evicted=1, bytes=812, version=17)
    (span,) = recorded.finished()
    assert span.name == "chatmemory save"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        "chatmemory.backend": "redis",
        "chatmemory.operation": "save",
        "chatmemory.attempts": 2,
        "chatmemory.messages.appended": 3,
        "chatmemory.messages.evicted": 1,
        "chatmemory.bytes": 812,
        "chatmemory.version": 17,
        "chatmemory.outcome": "ok",
    }
    assert not trace.get_current_span().get_span_context().is_valid  # detached afterwards
    (point,) = recorded.points("chatmemory.operation.duration")
    assert point.count == 1
    assert dict(point.attributes) == {
        "chatmemory.backend": "redis",
        "chatmemory.operation": "save",
        "chatmemory.outcome": "ok",
    }


def test_memory_ids_go_on_spans_only_when_asked(recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    with telemetry.operation(backend="sql", name="load", memory_id="alice@example.com"):
        pass
    telemetry.configure(
        record_memory_ids=True, tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider
    )
    with telemetry.operation(backend="sql", name="load", memory_id="alice@example.com"):
        pass
    monkeypatch.setenv("CHATMEMORY_OTEL_RECORD_MEMORY_IDS", "1")
    telemetry.configure(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    with telemetry.operation(backend="sql", name="load", memory_id="bob"):
        pass
    first, second, third = recorded.finished()
    assert "chatmemory.memory_id" not in first.attributes
    assert second.attributes["chatmemory.memory_id"] == "alice@example.com"
    assert third.attributes["chatmemory.memory_id"] == "bob"
    # Never on metrics: ids would be unbounded label values, and personal.
    for point in recorded.points("chatmemory.operation.duration"):
        assert "chatmemory.memory_id" not in point.attributes


def test_conflicts_retries_and_exhausted_retries(recorded: Recorded, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("chatmemory.stores.example")
    with caplog.at_level(logging.WARNING, logger="chatmemory"), pytest.raises(ConcurrentUpdateError):
        with telemetry.operation(backend="mongodb", name="save", memory_id="m", logger=log) as op:
            for _ in range(3):
                op.conflict()
                op.retry()
            op.record(attempts=3)
            raise ConcurrentUpdateError("m", attempts=3)
    (span,) = recorded.finished()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["chatmemory.outcome"] == "conflict"
    assert span.attributes["chatmemory.conflicts"] == 3
    assert span.attributes["error.type"] == "ConcurrentUpdateError"
    assert [event.name for event in span.events] == ["exception"]
    (conflicts,) = recorded.points("chatmemory.conflicts")
    assert conflicts.value == 3
    (retries,) = recorded.points("chatmemory.retries")
    assert retries.value == 3
    (warning,) = caplog.records
    assert warning.name == "chatmemory.stores.example"
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == "mongodb save of memory 'm': retries exhausted after 3 attempts"


def test_errors_mark_the_span_and_the_histogram(recorded: Recorded) -> None:
    with pytest.raises(RuntimeError), telemetry.operation(backend="redis", name="load"):
        raise RuntimeError("connection reset")
    (span,) = recorded.finished()
    assert span.status.description == "RuntimeError: connection reset"
    (point,) = recorded.points("chatmemory.operation.duration")
    assert point.attributes["chatmemory.outcome"] == "error"


def test_debug_lines_per_operation(recorded: Recorded, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("chatmemory.stores.redis")
    with caplog.at_level(logging.DEBUG, logger="chatmemory.stores.redis"):
        with telemetry.operation(backend="redis", name="save", memory_id="user-42", logger=log) as op:
            op.record(version=17, bytes=812, attempts=1)
    (line,) = [r for r in caplog.records if r.name == "chatmemory.stores.redis"]
    assert line.levelno == logging.DEBUG
    text = line.getMessage()
    assert text.startswith("redis save memory='user-42' version=17 bytes=812 attempts=1 ")
    assert text.endswith("ms")


def test_no_debug_line_is_built_when_debug_is_off(recorded: Recorded, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="chatmemory"), telemetry.operation(backend="redis", name="load"):
        pass
    assert caplog.records == []


def test_oversized_eviction_is_a_warning_and_a_count(recorded: Recorded, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        telemetry.oversized_message_evicted(memory_id="m", size=9000, limit=4000)
    assert caplog.records[0].getMessage() == (
        "memory 'm': a message of 9000 tokens was evicted at once: the window holds at most 4000"
    )
    (point,) = recorded.points("chatmemory.evictions.oversized")
    assert point.value == 1


def test_the_cli_reports_its_long_operations(recorded: Recorded, tmp_path: Path, capsys) -> None:
    store = InMemoryChatMemoryStore()
    for n in range(3):
        store.update_messages(f"m{n}", [UserMessage("hi")])

    @contextlib.contextmanager
    def opener(url, options):
        yield store

    assert main(["export", "memory://", "-o", str(tmp_path / "x.jsonl"), "-q"], open_store=opener) == 0
    *store_spans, span = recorded.finished()
    assert span.name == "chatmemory cli.export"
    # The store's reads nest under the command's span.
    loads = [child for child in store_spans if child.name == "chatmemory load"]
    assert len(loads) == 3
    assert {child.parent.span_id for child in loads} == {span.context.span_id}
    assert span.attributes["chatmemory.items"] == 3
    assert span.attributes["chatmemory.bytes"] == (tmp_path / "x.jsonl").stat().st_size


def test_without_opentelemetry_an_operation_is_a_log_line_only() -> None:
    code = (
        "import logging, sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format='%(name)s %(message)s')\n"
        "from chatmemory import telemetry\n"
        "with telemetry.operation(backend='memory', name='save', memory_id='m') as op:\n"
        "    op.conflict(); op.retry(); op.record(bytes=3)\n"
        "telemetry.oversized_message_evicted(memory_id='m', size=2, limit=1)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert "chatmemory.telemetry memory save memory='m' bytes=3 attempts=2 conflicts=1 " in completed.stdout
    assert "a message of 2 tokens was evicted" in completed.stdout


def test_spans_start_once_the_application_sets_a_global_tracer_provider() -> None:
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from chatmemory import InMemoryChatMemoryStore, UserMessage\n"
        "store = InMemoryChatMemoryStore()\n"
        "store.update_messages('m', [UserMessage('before')])  # no SDK yet: no span\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "store.load('m')\n"
        "print([span.name for span in exporter.get_finished_spans()])\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "['chatmemory load']"


def test_metrics_start_once_the_application_sets_a_global_meter_provider() -> None:
    code = (
        "from opentelemetry import metrics\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "from chatmemory import ConcurrentUpdateError, InMemoryChatMemoryStore, UserMessage\n"
        "store = InMemoryChatMemoryStore()\n"
        "store.update_messages('m', [UserMessage('before')])  # no SDK yet: nothing recorded\n"
        "reader = InMemoryMetricReader()\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "store.load('m')\n"
        "version = store.load('m').version\n"
        "try:\n"
        "    store.save('m', [UserMessage('x')], version + 1)\n"
        "except ConcurrentUpdateError:\n"
        "    pass  # counted\n"
        "points = {}\n"
        "for resource in reader.get_metrics_data().resource_metrics:\n"
        "    for scope in resource.scope_metrics:\n"
        "        for metric in scope.metrics:\n"
        "            for point in metric.data.data_points:\n"
        "                key = (metric.name, point.attributes['chatmemory.operation'])\n"
        "                points[key] = getattr(point, 'count', None) or point.value\n"
        "print(sorted(points.items()))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == str(
        [
            (("chatmemory.conflicts", "save"), 1),
            (("chatmemory.operation.duration", "load"), 2),
            (("chatmemory.operation.duration", "save"), 1),
        ]
    )
