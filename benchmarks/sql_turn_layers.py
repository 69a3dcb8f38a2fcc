"""What each layer of the SQLite store's turn costs in a live turn: the same turn sent through fewer layers.

    python benchmarks/sql_turn_layers.py [URL] [--turns 2000] [--window 200] [--runs 2]

``URL`` is a SQLite file URL (default ``sqlite:////tmp/chatmemory-turn-layers.db``). The turn is
``plain_contract.py``'s (``update_messages`` of the whole window, the store's snapshot cached), interleaved
turn by turn with its raw ``sqlite3`` floor, each turn followed by both sides' reads, as there. The store's
side is sent four ways, each a run of its own, from the whole call down to what no executor can skip:

* ``store``: ``update_messages`` as an application calls it;
* ``operation``: the same operation run by the driver without the public method's telemetry wrapper
  (``executor.run(operations.update(...))``: the operation's generators, its write loop, the session);
* ``session``: the diff planned as the operation plans it (the request, ``plan_diff``, the rendered
  statements bound), its batch sent by the driver's session (``Session.perform`` and ``end``: the
  writers' queue, the batch taken apart, each statement on the cursor, the connection kept), the
  snapshot remembered; no generators, no write loop;
* ``cursor``: the same plan, its five statements sent by hand on one DBAPI cursor of the pool's
  connection; no session.

So each layer's cost in the live turn is the difference between two lines: ``store`` - ``operation`` the
telemetry wrapper, ``operation`` - ``session`` the operation's own code around its plan, ``session`` -
``cursor`` the executor's. (A layer's hot cost, back to back with nothing in between, is a fraction of
its live one: SQLite's commit and both sides' reads leave the caches cold for the next turn.) Printed: the
median wall time and client CPU per update of each way, the floor's in the same runs, and their ratios;
medians over ``--runs`` runs. The two lower ways skip the checks the operation makes (the store open, the
schema checked, payload sizes), cover only the steady-state diff and write no history: they measure, and
are no alternative. Figures only: not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from plain_contract import drop, floor_for, store_for  # noqa: E402
from workload import sliding_windows  # noqa: E402

from chatmemory import ChatMessage  # noqa: E402
from chatmemory.core.store import validate_memory_id  # noqa: E402
from chatmemory.stores.sql import plan  # noqa: E402
from chatmemory.stores.sql.commands import Batch  # noqa: E402

WAYS = ("store", "operation", "session", "cursor")
WARM_TURNS = 50
"""Turns every way starts with through ``update_messages``: the memory fills and its snapshot is cached."""


def _planned(store: Any, memory_id: str, messages: Sequence[ChatMessage]) -> plan.DiffWrite:
    diff = plan.plan_diff(
        store._operations.planner.request(validate_memory_id(memory_id), messages, None), store._cache.get(memory_id)
    )
    if diff is None:
        raise SystemExit("the turn is not a diff of the cached snapshot: this benchmark measures only those")
    return diff


def turn_of(way: str, store: Any, memory_id: str) -> tuple[Callable[[Sequence[ChatMessage]], None], Any]:
    """The store's side of a turn sent ``way``, and what to close afterwards (or ``None``)."""
    if way == "store":
        return lambda messages: store.update_messages(memory_id, messages), None
    if way == "operation":
        return lambda messages: store._executor.run(store._operations.update(memory_id, messages)), None
    if way == "session":

        def by_session(messages: Sequence[ChatMessage]) -> None:
            diff = _planned(store, memory_id, messages)
            session = store._executor.session()
            counts = session.perform(
                Batch(tuple(store._operations.diff_statements(diff)), store._operations.begin, None)
            )
            session.end(None)
            if counts[0] != 1:
                raise SystemExit("the head update matched no row")
            store._operations.remember(memory_id, diff.state)

        return by_session, None
    pooled = store._executor._autocommit.raw_connection()
    connection = pooled.dbapi_connection

    def by_cursor(messages: Sequence[ChatMessage]) -> None:
        diff = _planned(store, memory_id, messages)
        cursor = connection.cursor()
        try:
            cursor.execute(store._begin)
            for statement in store._operations.diff_statements(diff):
                if statement.many:
                    cursor.executemany(statement.statement, statement.parameters)
                else:
                    cursor.execute(statement.statement, statement.parameters)
                if statement.expect is not None and cursor.rowcount != statement.expect:
                    raise SystemExit("the head update matched no row")
            cursor.execute("COMMIT")
        finally:
            cursor.close()
        store._operations.remember(memory_id, diff.state)

    return by_cursor, pooled


def one_run(url: str, way: str, window: int, turns: int) -> tuple[float, float, float, float]:
    """Median (store wall, store CPU, floor wall, floor CPU) per update, in µs, over the last 3/4 of the turns."""
    store, floor = store_for(url), floor_for(url)
    memory_id = f"user-{uuid.uuid4().hex[:8]}"
    windows = list(sliding_windows(WARM_TURNS + turns, window))
    for messages, _, _ in windows[:WARM_TURNS]:
        store.update_messages(memory_id, messages)
    send, opened = turn_of(way, store, memory_id)
    store_times: list[tuple[float, float]] = []
    floor_times: list[tuple[float, float]] = []
    try:
        for turn, (messages, appended, evicted) in enumerate(windows[WARM_TURNS:]):
            for side in ("store", "floor") if turn % 2 == 0 else ("floor", "store"):
                cpu, wall = time.thread_time(), time.perf_counter()
                if side == "store":
                    send(messages)
                else:
                    floor.update(memory_id, messages, appended, evicted)
                taken = (time.perf_counter() - wall, time.thread_time() - cpu)
                (store_times if side == "store" else floor_times).append(taken)
            store.get_messages(memory_id)
            floor.get(memory_id)
        if store.get_messages(memory_id) != list(windows[-1][0]):
            raise SystemExit(f"{way}: the store does not hold the last window")
    finally:
        if opened is not None:
            opened.close()
        floor.close()
        drop(store, memory_id)
    counted = slice(turns // 4, None)

    def median(times: list[tuple[float, float]], index: int) -> float:
        return statistics.median(taken[index] for taken in times[counted]) * 1e6

    return median(store_times, 0), median(store_times, 1), median(floor_times, 0), median(floor_times, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("url", nargs="?", default="sqlite:////tmp/chatmemory-turn-layers.db")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if not args.url.startswith("sqlite:"):
        raise SystemExit("this benchmark takes apart the SQLite store's turn: give a sqlite: file URL")
    # Ways interleaved run by run, so that drift over the minutes hits them alike.
    results: dict[str, list[tuple[float, float, float, float]]] = {way: [] for way in WAYS}
    for _ in range(args.runs):
        for way in WAYS:
            results[way].append(one_run(args.url, way, args.window, args.turns))
    print(f"SQLite turn by layers: window {args.window}, {args.turns} turns, medians of {args.runs} runs, µs")
    print(f"{'':12}{'wall':>8}{'x floor':>9}{'cpu':>8}{'x floor':>9}{'floor wall':>12}{'floor cpu':>11}")
    for way in WAYS:
        wall, cpu, floor_wall, floor_cpu = (statistics.median(run[i] for run in results[way]) for i in range(4))
        ratio_wall = statistics.median(run[0] / run[2] for run in results[way])
        ratio_cpu = statistics.median(run[1] / run[3] for run in results[way])
        print(f"{way:12}{wall:8.0f}{ratio_wall:9.2f}{cpu:8.0f}{ratio_cpu:9.2f}{floor_wall:12.0f}{floor_cpu:11.0f}")


if __name__ == "__main__":
    main()
