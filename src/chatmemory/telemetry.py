"""Telemetry: a log line, an OpenTelemetry span and metrics per store operation, from one small API.

Every module logs to ``logging.getLogger(__name__)``; the library adds no handlers. OpenTelemetry goes
through ``opentelemetry-api`` only (the ``otel`` extra): without it, or without an SDK configured by the
application, spans and metrics are no-ops. Memory ids go on spans only when the application opts in
(:func:`configure` or ``CHATMEMORY_OTEL_RECORD_MEMORY_IDS=1``), never on metrics.

Stores report each public call with :func:`operation` (through the decorators of
:mod:`chatmemory.stores.base.facade`); shared code reports into the running one with :func:`note`,
:func:`note_write`, :func:`retried`, :func:`conflicted` and :func:`retries_exhausted`. The spans, metrics
and an example: docs/telemetry.md.
"""

from __future__ import annotations

import logging
import os
import time
from contextvars import ContextVar
from types import TracebackType
from typing import Any

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.retry import observe_retries

__all__ = [
    "Operation",
    "configure",
    "conflicted",
    "current",
    "note",
    "note_write",
    "operation",
    "oversized_message_evicted",
    "records_memory_ids",
    "retried",
    "retries_exhausted",
]

_log = logging.getLogger(__name__)

_SCOPE = "chatmemory"
_ENV_RECORD_IDS = "CHATMEMORY_OTEL_RECORD_MEMORY_IDS"


class _Instruments:
    """The tracer and metric instruments, made once per provider pair."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, record_memory_ids: bool) -> None:
        from opentelemetry import context, metrics, trace

        tracer_source = tracer_provider if tracer_provider is not None else trace
        meter_source = meter_provider if meter_provider is not None else metrics
        # Looked up once: an operation costs a few microseconds without an SDK, and imports are not free.
        self.context = context
        self.set_span_in_context = trace.set_span_in_context
        self.client_kind = trace.SpanKind.CLIENT
        self.status = trace.Status
        self.error_code = trace.StatusCode.ERROR
        self.record_memory_ids = record_memory_ids
        self.tracer = tracer_source.get_tracer(_SCOPE)
        # Until the application sets a global tracer provider, the global one is a proxy whose spans
        # record nothing; starting one costs more than the rest of an operation, so it is skipped then.
        # ``trace.get_tracer_provider()`` reads the environment on each call (microseconds): the API's
        # module global is read instead, where this version of the API has it.
        self.trace_module: Any = (
            trace
            if tracer_provider is None
            and hasattr(trace, "_TRACER_PROVIDER")
            and "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ
            else None
        )
        meter = meter_source.get_meter(_SCOPE)
        # Likewise, until the application sets a global meter provider the global instruments are proxies
        # that record nothing (they forward once one is set): an operation then skips its measurements.
        # Read after ``get_meter``, which sets the provider the environment names, if any.
        self.metrics_module: Any = _metrics_module() if meter_provider is None else None
        self.duration = meter.create_histogram(
            "chatmemory.operation.duration", unit="s", description="Duration of chatmemory store operations"
        )
        self.conflicts = meter.create_counter(
            "chatmemory.conflicts", description="Writes refused because the memory changed since it was read"
        )
        self.retries = meter.create_counter("chatmemory.retries", description="Operations attempted again")
        self.oversized = meter.create_counter(
            "chatmemory.evictions.oversized", description="Messages evicted for being larger than the whole window"
        )


def _metrics_module() -> Any:
    """The API's module holding the global meter provider, if this version of the API has it there."""
    try:
        from opentelemetry.metrics import _internal
    except ImportError:  # another layout of the API: measure every operation
        return None
    return _internal if hasattr(_internal, "_METER_PROVIDER") else None


class _Settings:
    record_memory_ids: bool | None = None  # None: read the environment variable
    tracer_provider: Any = None
    meter_provider: Any = None
    instruments: _Instruments | None = None
    otel_missing = False


_settings = _Settings()


def configure(
    *, record_memory_ids: bool | None = None, tracer_provider: Any = None, meter_provider: Any = None
) -> None:
    """Set how operations are reported.

    Args:
        record_memory_ids: put memory ids on spans (``None``: as ``CHATMEMORY_OTEL_RECORD_MEMORY_IDS`` says
            when the first operation after this call starts; off by default, as ids can be personal data).
        tracer_provider: an OpenTelemetry ``TracerProvider`` to use instead of the global one.
        meter_provider: an OpenTelemetry ``MeterProvider`` to use instead of the global one.
    """
    _settings.record_memory_ids = record_memory_ids
    _settings.tracer_provider = tracer_provider
    _settings.meter_provider = meter_provider
    _settings.instruments = None
    _settings.otel_missing = False


def records_memory_ids() -> bool:
    """Whether memory ids go on spans (see :func:`configure`; the environment is read when it is called)."""
    if _settings.record_memory_ids is not None:
        return _settings.record_memory_ids
    return os.environ.get(_ENV_RECORD_IDS, "").strip().lower() in {"1", "true", "yes", "on"}


def _instruments() -> _Instruments | None:
    if _settings.instruments is None and not _settings.otel_missing:
        try:
            _settings.instruments = _Instruments(
                _settings.tracer_provider, _settings.meter_provider, records_memory_ids()
            )
        except ImportError:  # no opentelemetry-api: every operation is a log line only
            _settings.otel_missing = True
    return _settings.instruments


_FIELDS = ("version", "bytes", "attempts", "appended", "evicted", "conflicts", "items", "failed")
"""The figures of an operation, in the order log lines show them."""
_SPAN_NAMES = {
    "attempts": "chatmemory.attempts",
    "appended": "chatmemory.messages.appended",
    "evicted": "chatmemory.messages.evicted",
    "bytes": "chatmemory.bytes",
    "version": "chatmemory.version",
    "items": "chatmemory.items",
    "failed": "chatmemory.failed",
}


_Labels = dict[str | None, dict[str, str]]
"""The attributes of one operation's metric points: without an outcome (counters) and with each outcome."""

_LABELS: dict[tuple[str, str], _Labels] = {}


def _labels(backend: str, name: str) -> _Labels:
    """The attributes of the metric points of operation ``name`` of ``backend``, made once per pair.

    Shared and never changed: instruments copy the attributes they are given.
    """
    key = (backend, name)
    labels = _LABELS.get(key)
    if labels is None:
        plain = {"chatmemory.backend": backend, "chatmemory.operation": name}
        labels = {None: plain}
        for outcome in ("ok", "conflict", "error"):
            labels[outcome] = {**plain, "chatmemory.outcome": outcome}
        if len(_LABELS) < 1024:  # bounded whatever names callers make up
            _LABELS[key] = labels
    return labels


class _Span:
    """An operation's span, the instruments that started it and its attachment as the current span."""

    __slots__ = ("context_token", "instruments", "span")

    def __init__(self, instruments: _Instruments, span: Any, context_token: Any) -> None:
        self.instruments = instruments
        self.span = span
        self.context_token = context_token


class Operation:
    """One store operation being measured; use it through :func:`operation`.

    Without an SDK an operation costs little: its span is started only once the application set a tracer
    provider (or passed one to :func:`configure`), its metrics recorded only once it set a meter provider
    (likewise), both checked as each operation starts; it is timed only for its metrics or a DEBUG line.
    """

    __slots__ = (
        "_ambient",
        "_current_token",
        "_exhausted",
        "_meters",
        "_span",
        "_started",
        "backend",
        "logger",
        "memory_id",
        "name",
        "owner",
        "values",
    )

    def __init__(
        self,
        backend: str,
        name: str,
        memory_id: str | None,
        logger: logging.Logger,
        ambient: bool = True,
        owner: object = None,
    ) -> None:
        self.backend = backend
        self.name = name
        self.memory_id = memory_id
        self.logger = logger
        self.values: dict[str, int] = {}
        self.owner = owner
        """What runs the operation (a store), so that its nested calls join it rather than start another."""
        self._ambient = ambient
        self._meters: _Instruments | None = None  # what records its metrics (None: nothing does)
        self._span: _Span | None = None
        self._current_token: Any = None
        self._exhausted = False
        self._started: float | None = None  # None: not timed (no metrics recorded, DEBUG off)

    def _attributes(self, outcome: str | None = None) -> dict[str, str]:
        return _labels(self.backend, self.name)[outcome]

    def __enter__(self) -> Operation:
        instruments = _settings.instruments
        if instruments is None and not _settings.otel_missing:
            instruments = _instruments()
        if instruments is not None:
            # Cheap reads of the API's globals: a provider the application sets later counts from then on.
            traces = instruments.trace_module
            if traces is None or traces._TRACER_PROVIDER is not None:
                self._start_span(instruments)
            metrics = instruments.metrics_module
            if metrics is None or metrics._METER_PROVIDER is not None:
                self._meters = instruments
        if self._ambient:
            self._current_token = _current.set(self)
        if self._meters is not None or self.logger.isEnabledFor(logging.DEBUG):
            self._started = time.perf_counter()
        return self

    def _start_span(self, instruments: _Instruments) -> None:
        attributes: dict[str, Any] = dict(self._attributes())
        if self.memory_id is not None and instruments.record_memory_ids:
            attributes["chatmemory.memory_id"] = self.memory_id
        span = instruments.tracer.start_span(
            f"chatmemory {self.name}", kind=instruments.client_kind, attributes=attributes
        )
        # Current while the operation runs, so that driver instrumentation nests under it (without an SDK
        # the span is invalid and there is nothing to nest).
        token = None
        if self._ambient and span.get_span_context().is_valid:
            token = instruments.context.attach(instruments.set_span_in_context(span))
        self._span = _Span(instruments, span, token)

    def record(
        self,
        *,
        attempts: int | None = None,
        appended: int | None = None,
        evicted: int | None = None,
        bytes: int | None = None,
        version: int | None = None,
        items: int | None = None,
        failed: int | None = None,
    ) -> None:
        """Set figures of this operation (each replaces what an earlier call set)."""
        values = self.values
        # One test per figure: this runs several times per store operation.
        if attempts is not None:
            values["attempts"] = attempts
        if appended is not None:
            values["appended"] = appended
        if evicted is not None:
            values["evicted"] = evicted
        if bytes is not None:
            values["bytes"] = bytes
        if version is not None:
            values["version"] = version
        if items is not None:
            values["items"] = items
        if failed is not None:
            values["failed"] = failed

    def conflict(self) -> None:
        """Count a write refused because the memory changed since it was read."""
        if self._meters is not None:
            self._meters.conflicts.add(1, self._attributes())
        self.values["conflicts"] = self.values.get("conflicts", 0) + 1

    def retry(self) -> None:
        """Count one more attempt of this operation (``attempts`` grows by one)."""
        if self._meters is not None:
            self._meters.retries.add(1, self._attributes())
        self.values["attempts"] = self.values.get("attempts", 1) + 1

    def exhausted(self) -> None:
        """Note that the retries ran out: an error leaving the operation then logs a WARNING."""
        self._exhausted = True

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        started = self._started
        elapsed = 0.0 if started is None else time.perf_counter() - started
        if self._current_token is not None:
            _current.reset(self._current_token)
            self._current_token = None
        if started is None and self._span is None:  # nothing records it: only a WARNING may be due
            if exc is not None:
                self._warn_if_exhausted(exc)
            return
        if exc is None:
            outcome = "ok"
        elif isinstance(exc, ConcurrentUpdateError):
            outcome = "conflict"
        else:
            outcome = "error"
        if self._span is not None:
            self._finish_span(self._span, exc, outcome)
        if self._meters is not None:
            self._meters.duration.record(elapsed, self._attributes(outcome))
        if started is not None and self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("%s", self._line(elapsed, outcome, exc))
        if exc is not None:
            self._warn_if_exhausted(exc)

    def _warn_if_exhausted(self, exc: BaseException) -> None:
        if isinstance(exc, ConcurrentUpdateError) and exc.attempts is not None:
            self.logger.warning(
                "%s %s of memory %r: retries exhausted after %d attempts",
                self.backend,
                self.name,
                exc.memory_id,
                exc.attempts,
            )
        elif self._exhausted:
            self.logger.warning(
                "%s %s of memory %r: retries exhausted after %d attempts: %s",
                self.backend,
                self.name,
                self.memory_id,
                self.values.get("attempts", 1),
                exc,
            )

    def _finish_span(self, started: _Span, exc: BaseException | None, outcome: str) -> None:
        span, instruments = started.span, started.instruments
        for key, value in self.values.items():
            span.set_attribute(_SPAN_NAMES.get(key, f"chatmemory.{key}"), value)
        span.set_attribute("chatmemory.outcome", outcome)
        if exc is not None:
            hidden = self.memory_id if self.memory_id and not instruments.record_memory_ids else None
            if hidden is None:
                span.record_exception(exc)
                description = f"{type(exc).__name__}: {exc}"
            else:
                # Error messages name the memory: without the opt-in, its id stays off the span.
                description = _without(hidden, f"{type(exc).__name__}: {exc}")
                span.add_event(
                    "exception",
                    {"exception.type": type(exc).__qualname__, "exception.message": _without(hidden, str(exc))},
                )
            span.set_status(instruments.status(instruments.error_code, description))
            span.set_attribute("error.type", type(exc).__qualname__)
        span.end()
        if started.context_token is not None:
            instruments.context.detach(started.context_token)

    def _line(self, elapsed: float, outcome: str, exc: BaseException | None) -> str:
        parts = [self.backend, self.name]
        if self.memory_id is not None:
            parts.append(f"memory={self.memory_id!r}")
        parts.extend(f"{key}={self.values[key]}" for key in _FIELDS if key in self.values)
        parts.append(f"{elapsed * 1000:.2f}ms")
        if exc is not None:
            parts.append(f"{outcome}: {type(exc).__name__}: {exc}")
        return " ".join(parts)


def _without(memory_id: str, text: str) -> str:
    """``text`` with ``memory_id`` (as written, or escaped as ``repr`` writes it) replaced by a placeholder."""
    for form in {memory_id, repr(memory_id)[1:-1]}:
        text = text.replace(form, "<memory id>")
    return text


def operation(
    *,
    backend: str,
    name: str,
    memory_id: str | None = None,
    logger: logging.Logger | None = None,
    ambient: bool = True,
) -> Operation:
    """Measure one operation: a span, a latency sample, counters and a DEBUG line.

    Use it as ``with operation(backend="redis", name="save", memory_id=...) as op: ...``.

    Args:
        backend: ``redis``, ``sql``, ``mongodb``, ``memory`` (or what a third-party store calls itself).
        name: the operation (``load``, ``update``, ``delete``, ``list``, ``purge_expired``, ``cli.export``, ...).
        memory_id: the memory, logged at DEBUG, on the span only when ids are recorded (:func:`configure`).
        logger: the calling module's logger (``logging.getLogger(__name__)``); this module's by default.
        ambient: make the operation current while it runs (:func:`current`, and its span the current
            span). ``False`` for an operation that spans a generator's life, which the caller's code
            interleaves with.
    """
    return Operation(backend, name, memory_id, logger or _log, ambient)


# ------------------------------------------------------------------ what shared code reports

_current: ContextVar[Operation | None] = ContextVar("chatmemory_operation", default=None)


def current() -> Operation | None:
    """The operation running in this thread or task (``None`` outside any).

    The functions below report into it only if it is a store's (its ``owner`` is set): shared code such as
    a codec or the retry policy also runs outside store operations (in a memory, in the CLI).
    """
    return _current.get()


def note(
    *,
    attempts: int | None = None,
    appended: int | None = None,
    evicted: int | None = None,
    bytes: int | None = None,
    version: int | None = None,
    items: int | None = None,
) -> None:
    """Set figures of the current operation, if one runs (see :meth:`Operation.record`)."""
    op = _current.get()
    if op is not None and op.owner is not None:
        op.record(attempts=attempts, appended=appended, evicted=evicted, bytes=bytes, version=version, items=items)


def note_write(*, appended: int, evicted: int | None, bytes: int) -> None:
    """Set what the current operation's write sends; ``evicted=None`` when it is not known (a whole rewrite).

    Each plan of a write replaces what an earlier plan of it noted: the figures are the last plan's.
    """
    op = _current.get()
    if op is not None and op.owner is not None:
        values = op.values
        values["appended"] = appended
        values["bytes"] = bytes
        if evicted is None:
            values.pop("evicted", None)
        else:
            values["evicted"] = evicted


def retried(operation: str | None = None) -> None:
    """Count one more attempt of the current store operation; outside one, a retry of ``operation``.

    Args:
        operation: what is retried when no store operation runs (``memory.add``: a memory reading and
            writing again after a conflict); ``None`` counts nothing then.
    """
    op = _current.get()
    if op is not None and op.owner is not None:
        op.retry()
    elif operation is not None:
        instruments = _instruments()
        if instruments is not None:
            instruments.retries.add(1, {"chatmemory.operation": operation})


def conflicted() -> None:
    """Count a conflict in the current operation, if one runs."""
    op = _current.get()
    if op is not None and op.owner is not None:
        op.conflict()


def retries_exhausted() -> None:
    """Note that the current operation's retries ran out (its error is then logged as a WARNING)."""
    op = _current.get()
    if op is not None and op.owner is not None:
        op.exhausted()


def oversized_message_evicted(
    *, memory_id: str, size: int, limit: int, unit: str = "tokens", logger: logging.Logger | None = None
) -> None:
    """Report a message evicted because it alone is larger than the window (WARNING and a counter)."""
    (logger or _log).warning(
        "memory %r: a message of %d %s was evicted at once: the window holds at most %d", memory_id, size, unit, limit
    )
    instruments = _instruments()
    if instruments is not None:
        instruments.oversized.add(1, {"chatmemory.unit": unit})


class _RetryCounter:
    """Counts the retries :mod:`chatmemory.core.retry` reports (see :func:`retried`)."""

    def retried(self, operation: str | None = None) -> None:
        retried(operation)

    def retries_exhausted(self) -> None:
        retries_exhausted()


observe_retries(_RetryCounter())
