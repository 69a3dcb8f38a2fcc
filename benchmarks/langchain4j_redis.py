"""LangChain4j Redis store against what LangChain4j itself sends (plain ``GET`` / ``SET``), same server, same run.

    python benchmarks/langchain4j_redis.py [--url redis://127.0.0.1:6379/0] [--turns 500] [--windows 20 200]

For each window size the memory is filled, then every turn evicts the oldest message and appends one:

* store turn: ``load()`` then ``save()`` (``GET``, then the compare-and-set script, which hashes the value
  it finds on the server); a value the store last read or wrote is recognised by its SHA-1 and not decoded
  again, so a turn after the store's own write decodes nothing;
* baseline turn: ``GET`` and decoding, then ``SET`` of the new JSON: what a LangChain4j ``RedisChatMemoryStore``
  does, with no check of what it overwrites.

Both sides encode and decode with the same codec. Figures only, no assertions: this is not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

# Run as a script, this file's directory is first on sys.path, and benchmarks/redis.py would shadow redis-py.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from redis import Redis  # noqa: E402

from chatmemory.serialization import langchain4j  # noqa: E402
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore  # noqa: E402

sys.path.append(_HERE)
from measure import message  # noqa: E402


def _median_micros(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


def run(url: str, turns: int, window: int) -> tuple[float, float]:
    """Median microseconds of one turn: (store, baseline)."""
    client = Redis.from_url(url)
    prefix = f"bench-lc4j:{uuid.uuid4().hex[:8]}:"
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix)
    messages = [message(turn) for turn in range(window)]
    store.update_messages("store", messages)
    client.set(f"{prefix}baseline", langchain4j.dumps(messages))
    store_times: list[int] = []
    baseline_times: list[int] = []
    try:
        for turn in range(window, window + turns):
            start = time.perf_counter_ns()
            snapshot = store.load("store")
            store.save("store", [*snapshot.messages[1:], message(turn)], snapshot.version)
            store_times.append(time.perf_counter_ns() - start)

            start = time.perf_counter_ns()
            current = langchain4j.loads(client.get(f"{prefix}baseline") or b"[]")
            client.set(f"{prefix}baseline", langchain4j.dumps([*current[1:], message(turn)]))
            baseline_times.append(time.perf_counter_ns() - start)
    finally:
        client.delete(f"{prefix}store", f"{prefix}baseline")
        client.close()
    return _median_micros(store_times), _median_micros(baseline_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default=os.environ.get("CHATMEMORY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    args = parser.parse_args()
    print(f"{'window':>8} {'store turn µs':>15} {'GET+SET µs':>12} {'ratio':>7}")
    for window in args.windows:
        store, baseline = run(args.url, args.turns, window)
        print(f"{window:>8} {store:>15.0f} {baseline:>12.0f} {store / baseline:>7.2f}")


if __name__ == "__main__":
    main()
