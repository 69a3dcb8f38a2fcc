"""Where a SQL store's plain-contract turn goes: its statements on the cursor, and the rest, beside the floor.

    python benchmarks/sql_turn_parts.py URL [--turns 2000] [--window 20] [--runs 3]

The turn is ``plain_contract.py``'s (``update_messages`` of the whole window, the store's snapshot cached),
interleaved turn by turn with the same raw floor on the same server (``plain_contract.py``'s: one
statement on PostgreSQL, a transaction of an ``INSERT`` and a ``DELETE`` on SQLite and MySQL/MariaDB).
Inside the store's turn, each statement's time on the DBAPI cursor is measured as the executor sends it
(``chatmemory.stores.sql.executor`` wrapped for the run: the executor's statement function and its joined
form's), so the table splits the store's turn into:

* each statement kind (by its first word; ``BEGIN;...`` is a MySQL turn sent as one string, ``block`` a
  MariaDB turn as one compound statement),
  wall and client CPU per turn, and how many per turn;
* ``statements``: their sum, what the store's SQL costs at the driver, with nothing of the store around it;
* ``the rest``: the turn less its statements: the store's own Python (the request, the plan, binding, the
  pool's checkout and return, the cache) and the wrappers' few microseconds; under it, ``in the pool``:
  the part spent getting the operation's connection (the engine's ``raw_connection``: SQLAlchemy's pool)
  and ending the operation (handing the connection back: the pool's reset and return);
* ``the rest, hot``: the store's turn once more, for ``HOT_TURNS`` further turns with every statement
  answered at once (as its kind was last answered live: the head update matched), so that only the
  store's own code runs: half of them back to back, hot in the caches (``in the pool`` again below it),
  then half each after the thread slept as long as a floor turn takes (not timed), as a live turn starts
  after the floor's waits on the database. The last line says how much more CPU the store's code takes
  in the live turn and after a sleep alone than back to back: on a machine where a thread that slept
  runs slower for a while (a virtual machine's CPU, power states), the sleep alone accounts for much of
  it, and that part is the machine's, not the store's.

Printed beside the floor's whole turn, with ratios to it: ``statements`` over the floor is what the
store's SQL alone costs against the floor (its head row: the version, the write id ring, the expiry,
which the floor has none of), ``the rest`` over the floor is what the store's Python adds. Medians over
``--runs`` runs of per-turn means over the last three quarters of the turns. Figures only: not run in CI.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import sys
import time
import uuid
from typing import Any, NamedTuple

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import chatmemory.stores.sql.executor as sql_executor  # noqa: E402

sys.path.append(_HERE)
from plain_contract import drop, floor_for, store_for  # noqa: E402
from workload import sliding_windows  # noqa: E402

HOT_TURNS = 2000
"""Turns run after the live ones with the statements answered at once: the store's Python alone, the
first half back to back, the second half each after a sleep as long as the floor's turn (not timed)."""

Totals = dict[str, list[float]]
"""Per name: [wall seconds, CPU seconds, count]."""


def _timed(totals: Totals, name_of: Any, run: Any) -> Any:
    """``run``, recording its wall and CPU time under ``name_of(command)`` while ``totals`` is on."""

    def timed(cursor: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return run(cursor, command, *args, **kwargs)
        finally:
            _add(totals, name_of(command), time.perf_counter() - wall, time.thread_time() - cpu)

    return timed


def _add(totals: Totals, name: str, wall: float, cpu: float) -> None:
    entry = totals.setdefault(name, [0.0, 0.0, 0])
    entry[0] += wall
    entry[1] += cpu
    entry[2] += 1


def _pooled(sink: list[Totals], run: Any) -> Any:
    """``run`` (the pool's checkout, or the session's hand back), its time recorded in ``sink[0]``."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return run(*args, **kwargs)
        finally:
            _add(sink[0], "pool", time.perf_counter() - wall, time.thread_time() - cpu)

    return timed


_LAST_REPLIES: dict[str, Any] = {}
"""What each statement kind last answered in the live turns, for the hot ones."""


def _answered(name_of: Any, run: Any) -> Any:
    """Answers each command with what its kind last answered live (``run`` sends a kind not seen live)."""

    def answered(cursor: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        name = name_of(command)
        if name in _LAST_REPLIES:
            return _LAST_REPLIES[name]
        return run(cursor, command, *args, **kwargs)

    return answered


def _recorded(name_of: Any, run: Any) -> Any:
    """``run``, keeping its reply under ``name_of(command)`` for :func:`_answered`."""

    def recorded(cursor: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        reply = run(cursor, command, *args, **kwargs)
        _LAST_REPLIES[name_of(command)] = reply
        return reply

    return recorded


def _statement_name(command: Any) -> str:
    sql = str(command.statement)
    if sql.startswith("BEGIN NOT ATOMIC"):
        return "block (MariaDB)"
    return sql.split(None, 1)[0].rstrip(";") + (" (many)" if command.many else "")


class Run(NamedTuple):
    """One run's figures: totals over the counted turns (``counted``); hot figures per hot turn."""

    statements: Totals
    store_turn: list[float]
    """[wall, CPU] seconds."""
    floor_turn: list[float]
    counted: int
    hot_turn: list[float]
    """[wall, CPU] back to back, then [wall, CPU] after a sleep."""
    pool: list[float]
    """[wall, CPU] seconds in the pool over the counted turns, then [wall, CPU] per hot turn back to back."""


def one_run(url: str, window: int, turns: int) -> Run:
    """The store's statement totals, its turn's [wall, CPU] and the floor's, the turns counted, its hot turn."""
    store = store_for(url)
    floor = floor_for(url)
    memory_id = f"user-{uuid.uuid4().hex[:8]}"
    totals: Totals = {}
    counting: Totals = {}
    # The pool's share of the rest: the checkout (the engine's raw_connection) and the session's end,
    # which hands the connection back (the pool's reset and return; the session's own few lines).
    pool_live: Totals = {}
    pool_hot: Totals = {}
    sink = [pool_live]
    engine: Any = store._executor._autocommit
    engine.raw_connection = _pooled(sink, engine.raw_connection)
    plain_end = sql_executor.Session.end
    sql_executor.Session.end = _pooled(sink, plain_end)  # type: ignore[method-assign]
    plain_execute = sql_executor.execute_driver_sql
    sql_executor.execute_driver_sql = _timed(counting, _statement_name, _recorded(_statement_name, plain_execute))
    driver: Any = store._executor
    driver._joined_results = functools.partial(
        _timed(
            counting,
            lambda batch: "BEGIN;... (one string)",
            _recorded(lambda batch: "joined", sql_executor.joined_results),
        ),
        dbapi_error=driver._dbapi_error,
    )
    store_turn, floor_turn, hot_turn = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0, 0.0]
    skip = turns // 4
    windows = list(sliding_windows(turns + HOT_TURNS, window))
    try:
        for turn, (current, appended, evicted) in enumerate(windows[:turns]):
            on = turn >= skip
            counting.clear()
            sink[0] = pool_live if on else {}
            cpu, wall = time.thread_time(), time.perf_counter()
            store.update_messages(memory_id, current)
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            if on:
                store_turn[0] += wall
                store_turn[1] += cpu
                for name, (w, c, n) in counting.items():
                    entry = totals.setdefault(name, [0.0, 0.0, 0])
                    entry[0] += w
                    entry[1] += c
                    entry[2] += n
            cpu, wall = time.thread_time(), time.perf_counter()
            floor.update(memory_id, current, appended, evicted)
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            if on:
                floor_turn[0] += wall
                floor_turn[1] += cpu
        # The store's Python hot: the next turns with every statement answered at once, as it was last
        # answered in the live turns (the head update matched), so only the store's own code runs.
        sql_executor.execute_driver_sql = _answered(_statement_name, plain_execute)
        driver._joined_results = _answered(lambda batch: "joined", driver._joined_results)
        nap = floor_turn[0] / (turns - skip)
        for index, (current, _, _) in enumerate(windows[turns:]):
            napped = index >= HOT_TURNS // 2
            sink[0] = {} if napped else pool_hot
            if napped:
                time.sleep(nap)
            cpu, wall = time.thread_time(), time.perf_counter()
            store.update_messages(memory_id, current)
            hot_turn[2 * napped] += time.perf_counter() - wall
            hot_turn[2 * napped + 1] += time.thread_time() - cpu
    finally:
        sql_executor.execute_driver_sql = plain_execute
        sql_executor.Session.end = plain_end  # type: ignore[method-assign]
        floor.close()
        drop(store, memory_id)
    live, hot = pool_live.get("pool", [0.0, 0.0]), pool_hot.get("pool", [0.0, 0.0])
    return Run(
        totals,
        store_turn,
        floor_turn,
        turns - skip,
        [total / (HOT_TURNS / 2) for total in hot_turn],
        [live[0], live[1], hot[0] / (HOT_TURNS / 2), hot[1] / (HOT_TURNS / 2)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(args.url, args.window, args.turns) for _ in range(args.runs)]

    def median(pick: Any) -> float:
        return statistics.median(pick(run) for run in runs)

    floor_wall = median(lambda run: run.floor_turn[0] / run.counted) * 1e6
    floor_cpu = median(lambda run: run.floor_turn[1] / run.counted) * 1e6
    names = collections.Counter(name for run in runs for name in run.statements)
    print(f"SQL turn by parts: {args.url.split('://', 1)[0]}, window {args.window}, {args.turns} turns, µs per turn")
    print(f"{'':26}{'wall':>8}{'x floor':>9}{'cpu':>8}{'x floor':>9}{'per turn':>10}")

    def line(name: str, wall: float, cpu: float, count: float | None = None) -> None:
        per = f"{count:10.2f}" if count is not None else ""
        print(f"{name:26}{wall:8.0f}{wall / floor_wall:9.2f}{cpu:8.0f}{cpu / floor_cpu:9.2f}{per}")

    def of(run: Run, name: str) -> list[float]:
        return run.statements.get(name, [0.0, 0.0, 0])

    statements = [0.0, 0.0]
    for name in sorted(names, key=lambda name: -median(lambda run, name=name: of(run, name)[0])):
        wall = median(lambda run, name=name: of(run, name)[0] / run.counted) * 1e6
        cpu = median(lambda run, name=name: of(run, name)[1] / run.counted) * 1e6
        count = median(lambda run, name=name: of(run, name)[2] / run.counted)
        line(f"  {name}", wall, cpu, count)
        statements[0] += wall
        statements[1] += cpu
    store_wall = median(lambda run: run.store_turn[0] / run.counted) * 1e6
    store_cpu = median(lambda run: run.store_turn[1] / run.counted) * 1e6
    line("statements", *statements)
    line("the rest", store_wall - statements[0], store_cpu - statements[1])
    line("  in the pool", *(median(lambda run, i=i: run.pool[i] / run.counted) * 1e6 for i in (0, 1)))
    line("store turn", store_wall, store_cpu)
    line("floor turn", floor_wall, floor_cpu)
    hot_wall = median(lambda run: run.hot_turn[0]) * 1e6
    hot_cpu = median(lambda run: run.hot_turn[1]) * 1e6
    line("the rest, hot", hot_wall, hot_cpu)
    line("  in the pool", *(median(lambda run, i=i: run.pool[i]) * 1e6 for i in (2, 3)))
    napped_wall = median(lambda run: run.hot_turn[2]) * 1e6
    napped_cpu = median(lambda run: run.hot_turn[3]) * 1e6
    line("  after a sleep", napped_wall, napped_cpu)
    rest_cpu = store_cpu - statements[1]
    print(f"the rest's CPU: {rest_cpu / hot_cpu:.2f}x hot in the live turn, {napped_cpu / hot_cpu:.2f}x after a sleep")


if __name__ == "__main__":
    main()
