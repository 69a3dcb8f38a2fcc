"""Writes without a current snapshot: a store with no snapshot cache beside its floor, and two writers by turns.

    python benchmarks/cold_writes.py URL [--turns 1000] [--windows 20 200]

The steady-state turn of ``plain_contract.py`` always has its snapshot cached (its ``get_messages`` caches
it). These are the turns that do not: the store's write then goes under the head row's lock and reads
the stored window there before it writes the rows that differ. Two ways, each on the realistic
conversation of ``workload.py``:

* ``no cache``: a store built with ``snapshot_cache_size=0`` (every write and read without a snapshot),
  interleaved turn by turn with the raw floor of ``plain_contract.py`` on the same server, each followed
  by both sides' reads; printed: the median update and get, the floor's, and their ratios;
* ``by turns``: two stores on one memory writing its turns by turns, as two processes behind a balancer
  that does not keep a conversation on one of them: each write finds the other's, its snapshot stale;
  printed: the median update.

Medians over the last three quarters of the turns. Any store URL works (Redis and MongoDB stores take the
same turns their own way). Figures only, no assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from plain_contract import drop, floor_for, store_for  # noqa: E402
from workload import sliding_windows  # noqa: E402

from chatmemory import open_store  # noqa: E402


def _median(times: list[float]) -> float:
    return statistics.median(times[len(times) // 4 :]) * 1e6


def no_cache(url: str, window: int, turns: int) -> tuple[float, float, float, float]:
    """Median (store update, floor update, store get, floor get) in µs, the store without a snapshot cache."""
    store, floor = store_for(url, snapshot_cache_size=0), floor_for(url)
    memory_id = f"cold-{uuid.uuid4().hex[:8]}"
    updates: dict[str, list[float]] = {"store": [], "floor": []}
    gets: dict[str, list[float]] = {"store": [], "floor": []}
    try:
        for turn, (messages, appended, evicted) in enumerate(sliding_windows(turns, window)):
            for side in ("store", "floor") if turn % 2 == 0 else ("floor", "store"):
                started = time.perf_counter()
                if side == "store":
                    store.update_messages(memory_id, messages)
                else:
                    floor.update(memory_id, messages, appended, evicted)
                updates[side].append(time.perf_counter() - started)
            for side, read in (("store", store.get_messages), ("floor", floor.get)):
                started = time.perf_counter()
                read(memory_id)
                gets[side].append(time.perf_counter() - started)
    finally:
        floor.close()
        drop(store, memory_id)
    return (
        _median(updates["store"]),
        _median(updates["floor"]),
        _median(gets["store"]),
        _median(gets["floor"]),
    )


def by_turns(url: str, window: int, turns: int) -> float:
    """Median update in µs of two stores writing one memory's turns by turns."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    options: dict[str, Any] = {}
    if scheme in ("redis", "rediss"):
        options["key_prefix"] = f"bench:{uuid.uuid4().hex[:8]}:"
    elif scheme == "mongodb":
        options["collection"] = f"bench_{uuid.uuid4().hex[:8]}"
    first = store_for(url, **options) if not options else open_store(url, **options)
    if hasattr(first, "table_prefix"):
        options["table_prefix"] = first.table_prefix
    second = open_store(url, **options)
    memory_id = f"turns-{uuid.uuid4().hex[:8]}"
    times: list[float] = []
    last: Any = None
    try:
        for turn, (messages, _, _) in enumerate(sliding_windows(turns, window)):
            writer = first if turn % 2 == 0 else second
            started = time.perf_counter()
            writer.update_messages(memory_id, messages)
            times.append(time.perf_counter() - started)
            last = messages
        if first.get_messages(memory_id) != list(last) or second.get_messages(memory_id) != list(last):
            raise SystemExit("the two stores do not both read the last window")
    finally:
        second.close()
        drop(first, memory_id)
    return _median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    args = parser.parse_args()
    print(f"{args.url.split('://', 1)[0]}: {args.turns} turns, medians, µs")
    header = f"{'window':>6}  {'no cache: update':>17}{'floor':>8}{'x':>6}{'get':>8}{'floor':>8}{'x':>6}"
    print(f"{header}  {'by turns: update':>17}")
    for window in args.windows:
        update, floor_update, get, floor_get = no_cache(args.url, window, args.turns)
        turns = by_turns(args.url, window, args.turns)
        print(
            f"{window:>6}  {update:17.0f}{floor_update:8.0f}{update / floor_update:6.2f}"
            f"{get:8.0f}{floor_get:8.0f}{get / floor_get:6.2f}  {turns:17.0f}"
        )


if __name__ == "__main__":
    main()
