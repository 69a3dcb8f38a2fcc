"""Where a MongoDB turn's time goes: the store's update built up from the raw ``$push``, one part at a time.

    python benchmarks/mongodb_turn_parts.py [--url mongodb://127.0.0.1:27018/?replicaSet=secantus]
                                            [--turns 1000] [--window 20] [--runs 3]

The plain contract's MongoDB turn (``update_messages`` of the whole window, the store's snapshot cached)
sends one ``update`` whose filter pins the memory and whose update applies the diff. The raw floor of
``plain_contract.py`` sends ``$push`` with ``$each``/``$slice`` on ``_id`` alone. This benchmark sends,
interleaved turn by turn, the floor and then the floor with each part the store adds, cumulatively, in the
order below, and last the store itself; every row is an ``update_one`` through PyMongo of the same
realistic turns (``workload.py``) encoded by ``dumps_message``, on a document of its own in the store's
collection (a server's cost per update depends on the collection too):

1. ``floor``: ``$push`` of the new records, ``$slice`` to the window, filter ``{_id}``;
2. ``+ version``: the filter pins ``version``; ``$inc`` of it (what a conflict is detected by);
3. ``+ incarnation``: the filter pins ``incarnation`` and that ``messages`` is an array (a memory deleted
   and created again never takes a diff computed against its predecessor);
4. ``+ live``: the ``$expr`` that the memory has not expired, on the server's clock;
5. ``+ write ids``: a second ``$push``, the write id ring a resend after a lost reply is recognised by;
6. ``+ written_at``: ``$currentDate`` of the write time (what ``memory_times`` reports);
7. ``+ expiry``: ``$unset`` of ``expires_at`` (the store is built without a ttl, as in ``plain_contract.py``,
   so its collection has no TTL index either): the store's update document, field for field;
8. ``store``: ``update_messages`` itself (planning, the diff, the reply).

Printed: median wall and client CPU per row, the step from the row above, and each row's ratio to the floor.
The steps 2-7 are what the server spends on each part; the last step is the store's own work on the
client (its client CPU) and whatever else its call waits for. Two more rows give that work's client CPU
alone: ``store, hot``, further turns with the update answered at once (the server never asked), back to
back; ``after a sleep``, the same with a sleep as long as a floor update before each turn (not timed),
as a live turn starts after a wait. Figures only: not run in CI.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
import uuid
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from pymongo import MongoClient  # noqa: E402

from chatmemory import ChatMessage, open_store  # noqa: E402
from chatmemory.serialization.native import dumps_message  # noqa: E402
from chatmemory.stores.mongodb.commands import Result  # noqa: E402
from chatmemory.stores.mongodb.layout import NOT_EXPIRED, WRITES_KEPT  # noqa: E402

sys.path.append(_HERE)
from plain_contract import Clock  # noqa: E402
from workload import sliding_windows  # noqa: E402

PARTS = ("floor", "+ version", "+ incarnation", "+ live", "+ write ids", "+ written_at", "+ expiry")
INCARNATION = 7_000_000_000_000_000_001
HOT_TURNS = 1000
"""Turns of the store alone after the others, its update answered at once: half back to back, half each
after a sleep."""


def update_of(level: int, version: int, new: list[str], window: int, write_id: int) -> tuple[dict, dict]:
    """The filter and update of row ``level`` (0: the floor) for a turn appending ``new``."""
    query: dict[str, Any] = {"_id": f"row {level}"}
    pushes: dict[str, Any] = {"messages": {"$each": new, "$slice": -window}}
    update: dict[str, Any] = {"$push": pushes}
    if level >= 1:
        query["version"] = version
        update["$inc"] = {"version": 1}
    if level >= 2:
        query["incarnation"] = {"$eq": INCARNATION}
        query["messages"] = {"$type": "array"}
    if level >= 3:
        query["$expr"] = NOT_EXPIRED
    if level >= 4:
        pushes["writes"] = {"$each": [{"w": write_id, "v": version + 1}], "$slice": -WRITES_KEPT}
    if level >= 5:
        update["$currentDate"] = {"written_at": True}
    if level >= 6:
        update["$unset"] = {"expires_at": ""}
    return query, update


def one_run(url: str, window: int, turns: int) -> list[Clock]:
    store: Any = open_store(url, collection=f"parts_{uuid.uuid4().hex[:8]}")
    client: Any = MongoClient(url)
    collection = client[store.collection.database.name][store.collection.name]
    rows = [Clock() for _ in range(len(PARTS) + 3)]
    # Versions as the store's start (microseconds of the clock, int64), write ids as random as its own.
    versions = [time.time_ns() // 1000] * len(PARTS)
    try:
        for level in range(len(PARTS)):
            document = {"version": versions[level], "incarnation": INCARNATION, "messages": [], "writes": []}
            collection.insert_one({"_id": f"row {level}", **document})
        for turn, (current, appended, _evicted) in enumerate(sliding_windows(turns, window)):
            messages: list[ChatMessage] = list(current)
            new = [dumps_message(message).decode() for message in messages[len(messages) - appended :]]
            for level in range(len(PARTS)):
                query, update = update_of(level, versions[level], new, len(messages), secrets.randbits(62))
                matched = rows[level].run(lambda q=query, u=update: collection.update_one(q, u).matched_count)
                if matched != 1:
                    raise SystemExit(f"row {PARTS[level]!r} matched {matched} documents at turn {turn}")
                versions[level] += 1
            rows[len(PARTS)].run(lambda m=messages: store.update_messages("m", m))
        # The store's own work alone: further turns with its update answered at once (matched), back to
        # back, then each after a sleep as long as a floor update takes (not timed).
        nap = statistics.median(rows[0].wall) / 1e6
        sent = store._perform
        store._perform = lambda command: 1 if command.result is Result.MATCHED else sent(command)
        for index, (current, _, _) in enumerate(sliding_windows(turns + HOT_TURNS, window)):
            if index < turns:
                continue
            napped = index >= turns + HOT_TURNS // 2
            if napped:
                time.sleep(nap)
            rows[len(PARTS) + 1 + napped].run(lambda m=current: store.update_messages("m", m))
        store._perform = sent
    finally:
        collection.drop()
        store.close()
        client.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="mongodb://127.0.0.1:27018/?replicaSet=secantus")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(args.url, args.window, args.turns) for _ in range(args.runs)]
    skip = min(200, args.turns // 4)  # the window fills first

    def median(index: int, field: str) -> float:
        return statistics.median(statistics.median(getattr(run[index], field)[skip:]) for run in runs)

    print(f"MongoDB turn by parts: window {args.window}, {args.turns} turns, medians of {args.runs} runs, µs")
    print(f"{'':16}{'wall':>9}{'step':>8}{'x floor':>9}{'cpu':>9}{'step':>8}{'x floor':>9}")
    floor_wall, floor_cpu = median(0, "wall"), median(0, "cpu")
    previous_wall, previous_cpu = floor_wall, floor_cpu
    for index, name in enumerate((*PARTS, "store")):
        wall, cpu = median(index, "wall"), median(index, "cpu")
        print(
            f"{name:16}{wall:9.0f}{wall - previous_wall:+8.0f}{wall / floor_wall:9.2f}"
            f"{cpu:9.0f}{cpu - previous_cpu:+8.0f}{cpu / floor_cpu:9.2f}"
        )
        previous_wall, previous_cpu = wall, cpu
    for index, name in ((len(PARTS) + 1, "store, hot"), (len(PARTS) + 2, "  after a sleep")):
        cpu = statistics.median(statistics.median(run[index].cpu) for run in runs)
        print(f"{name:16}{'':9}{'':8}{'':9}{cpu:9.0f}{'':8}{cpu / floor_cpu:9.2f}")


if __name__ == "__main__":
    main()
