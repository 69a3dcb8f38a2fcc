"""What telemetry costs per store operation.

Two parts:

* ``chatmemory.telemetry.operation`` alone, beside an empty ``with`` block: OpenTelemetry's API without an
  SDK (the default for an application that did not configure one), DEBUG logging on (to a null handler),
  and the SDK recording spans and metrics in memory;
* a store's ``update_messages`` (one turn: evict the oldest, append one) through its telemetry decorator and
  without it (the undecorated method, ``__wrapped__``), taking turns so that load on the machine weighs on
  both alike: the in-memory store (no I/O, so the difference is the whole cost) and the Redis store on a
  real server (``--redis-url``, default ``$CHATMEMORY_TEST_REDIS_URL``). With ``--no-otel`` the script runs
  as if ``opentelemetry-api`` were not installed.

Run: ``python benchmarks/telemetry_overhead.py [--no-otel] [--redis-url URL]``. Prints microseconds per
operation of this process's CPU time (``process_time``: on a shared, loaded machine the time spent waiting
for a core or for the server does not count), best of several rounds; "decorated empty method" is the
whole cost the stores' decorator adds to a call. Figures only, not run in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable

# Run as a script, this file's directory is first on sys.path and its redis.py would shadow redis-py.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

if "--no-otel" in sys.argv:
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # as if opentelemetry-api were absent

from chatmemory import ChatMessage, InMemoryChatMemoryStore, telemetry  # noqa: E402
from chatmemory.stores.base.facade import StoreTelemetry  # noqa: E402

sys.path.append(_HERE)
from measure import message  # noqa: E402

ROUNDS = 50_000
WINDOW = 20


def per_operation(body: Callable[[], None], rounds: int = ROUNDS, repeats: int = 7) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time_ns()
        for _ in range(rounds // repeats):
            body()
        best = min(best, (time.process_time_ns() - start) / (rounds // repeats) / 1000)
    return best


def empty() -> None:
    with contextlib.nullcontext():
        pass


def measured() -> None:
    with telemetry.operation(backend="redis", name="save", memory_id="user-42") as op:
        op.record(attempts=1, appended=2, evicted=0, bytes=600, version=1)


class Nothing:
    """A store method that does nothing, with and without the stores' telemetry decorator."""

    def bare(self, memory_id: str, messages: list[ChatMessage]) -> None:
        pass

    @StoreTelemetry("bench", __name__)("update")
    def traced(self, memory_id: str, messages: list[ChatMessage]) -> None:
        pass


def operation_alone(no_otel: bool) -> None:
    print(f"{'operation() alone':<52} {'µs/op':>8}")
    print(f"{'  empty with block (baseline)':<52} {per_operation(empty):8.2f}")
    telemetry.configure()
    setup = "no opentelemetry installed" if no_otel else "opentelemetry-api without an SDK"
    print(f"{'  operation(), ' + setup:<52} {per_operation(measured):8.2f}")
    nothing, window = Nothing(), [message(0)]
    print(f"{'  empty method call':<52} {per_operation(lambda: nothing.bare('m', window)):8.2f}")
    print(f"{'  decorated empty method, ' + setup:<52} {per_operation(lambda: nothing.traced('m', window)):8.2f}")
    logger = logging.getLogger("chatmemory")
    logger.addHandler(logging.NullHandler())
    logger.setLevel(logging.DEBUG)
    print(f"{'  operation(), DEBUG logging on':<52} {per_operation(measured):8.2f}")
    logger.setLevel(logging.WARNING)


def windows() -> list[list[ChatMessage]]:
    """Successive windows of one conversation: each evicts the oldest message and appends one."""
    return [[message(turn) for turn in range(start, start + WINDOW)] for start in range(64)]


def compare(label: str, update: Callable[[str, list[ChatMessage]], None], bare: Callable[..., None], store: object):
    """µs of ``update_messages`` with and without its decorator, in alternating rounds (the fastest round of
    each: on a loaded machine the fastest is the one least disturbed)."""
    turns = windows()
    traced: list[float] = []
    untraced: list[float] = []
    memory_id = f"bench-{os.getpid()}"
    for _ in range(15):
        for timings, call in ((traced, update), (untraced, lambda m, w: bare(store, m, w))):
            start = time.process_time_ns()
            for window in turns:
                call(memory_id, window)
            timings.append((time.process_time_ns() - start) / len(turns) / 1000)
    with_it, without = min(traced), min(untraced)
    print(f"{'  ' + label:<52} {without:8.2f} {with_it:8.2f} {with_it - without:+8.2f}")


def stores(no_otel: bool, redis_url: str | None) -> None:
    telemetry.configure()
    setup = "no opentelemetry" if no_otel else "API, no SDK"
    print(f"\n{'update_messages, ' + setup:<52} {'bare':>8} {'traced':>8} {'cost':>8}")
    memory = InMemoryChatMemoryStore()
    compare("in-memory store", memory.update_messages, InMemoryChatMemoryStore.update_messages.__wrapped__, memory)
    if redis_url:
        from chatmemory.stores.redis import RedisChatMemoryStore

        with RedisChatMemoryStore(redis_url, key_prefix=f"bench-telemetry-{os.getpid()}:") as redis_store:
            bare = RedisChatMemoryStore.update_messages.__wrapped__  # type: ignore[attr-defined]
            compare("Redis store (one round trip)", redis_store.update_messages, bare, redis_store)
            redis_store.delete_messages(f"bench-{os.getpid()}")


def sdk() -> None:
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
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    print(f"\n{'operation(), SDK recording spans and metrics':<52} {per_operation(measured, 20_000):8.2f}")
    memory = InMemoryChatMemoryStore()
    print(f"\n{'update_messages, SDK recording':<52} {'bare':>8} {'traced':>8} {'cost':>8}")
    compare("in-memory store", memory.update_messages, InMemoryChatMemoryStore.update_messages.__wrapped__, memory)
    exporter.clear()
    telemetry.configure()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-otel", action="store_true", help="run as if opentelemetry-api were not installed")
    parser.add_argument("--redis-url", default=os.environ.get("CHATMEMORY_TEST_REDIS_URL"))
    arguments = parser.parse_args()
    operation_alone(arguments.no_otel)
    stores(arguments.no_otel, arguments.redis_url)
    if not arguments.no_otel:
        sdk()


if __name__ == "__main__":
    main()
