"""Where a Redis turn's time goes: the server's time per command, the round trip, and the client's rest.

    python benchmarks/redis_turn_parts.py [--url redis://127.0.0.1:6379/0] [--turns 2000] [--window 20]
                                          [--runs 3]

The plain contract's Redis turn (``update_messages`` of the whole window, the store's snapshot cached) is
one ``EVALSHA`` of the write script; the raw floor of ``plain_contract.py`` is one pipeline of ``RPUSH``,
``LTRIM`` and ``EXPIRE``. Both run on the same server, in blocks of turns that take turns (so that drift
weighs on both alike), and each block reads the server's ``INFO commandstats`` before and after, so that
what the server spent on each side is known per turn:

* ``server``: the server's time in the side's commands (for the store, its script: the commands the
  script calls, each listed, and ``Lua and calls``, the rest of the script's time: the interpreter, its
  arguments, each ``redis.call`` and its reply);
* ``round trip``: the client's wall time in the call that sends the turn and reads its reply
  (``EVALSHA`` through redis-py; the pipeline's ``execute``);
* ``the rest``: the turn less its round trip: the store's own Python (the plan, the diff, the cache),
  or the floor's encoding and pipeline building.

A third side, ``bare script``, is one ``EVALSHA`` of a script that makes the same server calls as the
store's common turn (``TIME``, ``HMGET``, ``RPUSH``, ``LTRIM``, ``HSET``, ``PERSIST`` twice) with nothing
else: no checks, no version arithmetic. Its server time is what those calls cost from Lua whatever a
script does with them; the store's script beyond it is its own logic.

Printed per side: wall and client CPU per turn and each line's wall against the floor's whole turn. The
server's time is inside the round trip; what the round trip waits beyond it is the network and the
scheduler. Needs ``INFO`` on the server (nothing else may run commands there meanwhile: the counts are
server-wide). Figures only: not run in CI.
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

import redis  # noqa: E402

import chatmemory.stores.redis.executor as redis_store  # noqa: E402
from chatmemory.serialization.native import dumps_message  # noqa: E402

sys.path.append(_HERE)
from plain_contract import RedisFloor, drop, store_for  # noqa: E402
from workload import sliding_windows  # noqa: E402

BLOCK = 100
"""Turns per block; the sides' blocks alternate."""

SIDES = ("store", "bare script", "floor")

BARE_SCRIPT = """
redis.call('TIME')
redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'length', 'seq')
local length = redis.call('LLEN', KEYS[2])
if #ARGV > 1 then
  length = redis.call('RPUSH', KEYS[2], unpack(ARGV, 2))
end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[1]), -1)
redis.call('HSET', KEYS[1], 'version', length, 'length', length, 'written', length, 'seq', length, 'w0', length)
redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])
return length
"""
"""The store's common turn's server calls alone (an ``LLEN`` only when a turn appends nothing)."""


def _server_usec(client: redis.Redis) -> dict[str, int]:
    """The server's total µs per command so far (``INFO commandstats``)."""
    return {name.removeprefix("cmdstat_"): int(stats["usec"]) for name, stats in client.info("commandstats").items()}


def one_run(url: str, window: int, turns: int) -> dict[str, dict[str, float]]:
    """Per side, totals over the counted turns: wall, CPU, round trip, server µs per command, and turns."""
    info = redis.Redis.from_url(url)
    store = store_for(url)
    floor = RedisFloor(url)
    memory_id = f"user-{uuid.uuid4().hex[:8]}"
    windows = list(sliding_windows(turns, window))
    skip = turns // 4
    totals: dict[str, dict[str, float]] = {side: {"turns": 0.0} for side in SIDES}
    bare_sha = info.script_load(BARE_SCRIPT)
    bare_keys = (f"{floor.prefix}bare:{memory_id}:meta", f"{floor.prefix}bare:{memory_id}:messages")
    round_trip = [0.0]
    plain_send = redis_store.send

    def timed_send(client: Any, command: Any) -> Any:
        started = time.perf_counter()
        try:
            return plain_send(client, command)
        finally:
            round_trip[0] += time.perf_counter() - started

    def floor_update(current: list[Any], appended: int, evicted: int) -> None:
        key = floor.prefix + memory_id
        pipeline = floor.client.pipeline(transaction=False)
        if appended:
            pipeline.rpush(key, *(dumps_message(message) for message in current[len(current) - appended :]))
        pipeline.ltrim(key, -len(current), -1)
        pipeline.expire(key, 3600)
        started = time.perf_counter()
        pipeline.execute()
        round_trip[0] += time.perf_counter() - started

    def bare_update(current: list[Any], appended: int) -> None:
        records = [dumps_message(message) for message in current[len(current) - appended :]] if appended else []
        started = time.perf_counter()
        floor.client.evalsha(bare_sha, 2, *bare_keys, len(current), *records)
        round_trip[0] += time.perf_counter() - started

    redis_store.send = timed_send  # type: ignore[assignment]
    try:
        for start in range(0, turns, BLOCK):
            block = windows[start : start + BLOCK]
            shift = (start // BLOCK) % len(SIDES)
            order = SIDES[shift:] + SIDES[:shift]
            # Each side replays the same block in its own memory (the store's turns are its own, so the
            # store's memory is updated on every turn, counted or not).
            for side in order:
                counted = start >= skip
                before = _server_usec(info)
                round_trip[0] = 0.0
                wall = cpu = 0.0
                for current, appended, evicted in block:
                    w, c = time.perf_counter(), time.thread_time()
                    if side == "store":
                        store.update_messages(memory_id, current)
                    elif side == "bare script":
                        bare_update(current, appended)
                    else:
                        floor_update(current, appended, evicted)
                    wall += time.perf_counter() - w
                    cpu += time.thread_time() - c
                after = _server_usec(info)
                if counted:
                    entry = totals[side]
                    entry["turns"] += len(block)
                    entry["wall"] = entry.get("wall", 0.0) + wall
                    entry["cpu"] = entry.get("cpu", 0.0) + cpu
                    entry["round trip"] = entry.get("round trip", 0.0) + round_trip[0]
                    for name, usec in after.items():
                        spent = usec - before.get(name, 0)
                        if spent and name != "info":
                            entry[f"server {name}"] = entry.get(f"server {name}", 0.0) + spent / 1e6
    finally:
        redis_store.send = plain_send  # type: ignore[assignment]
        floor.client.delete(*bare_keys)
        floor.close()
        drop(store, memory_id)
        info.close()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(args.url, args.window, args.turns) for _ in range(args.runs)]

    def per_turn(side: str, key: str) -> float:
        return statistics.median(run[side].get(key, 0.0) / run[side]["turns"] for run in runs) * 1e6

    floor_wall = per_turn("floor", "wall")
    print(f"Redis turn by parts: window {args.window}, {args.turns} turns, medians of {args.runs} runs, µs per turn")
    print(f"{'':30}{'wall':>8}{'x floor':>9}{'cpu':>8}")
    for side in SIDES:
        wall, cpu, trip = per_turn(side, "wall"), per_turn(side, "cpu"), per_turn(side, "round trip")
        print(f"{side + ' turn':30}{wall:8.0f}{wall / floor_wall:9.2f}{cpu:8.0f}")
        print(f"{'  round trip':30}{trip:8.0f}{trip / floor_wall:9.2f}")
        names = sorted({key for run in runs for key in run[side] if key.startswith("server ")})
        server = {key.removeprefix("server "): per_turn(side, key) for key in names}
        script = server.pop("evalsha", None)
        total = script if script is not None else sum(server.values())
        print(f"{'    server':30}{total:8.0f}{total / floor_wall:9.2f}")
        for name, usec in sorted(server.items(), key=lambda item: -item[1]):
            if usec >= 0.05:
                print(f"{'      ' + name:30}{usec:8.1f}")
        if script is not None:
            lua = script - sum(server.values())
            print(f"{'      Lua and calls':30}{lua:8.1f}")
        print(f"{'  the rest':30}{wall - trip:8.0f}{(wall - trip) / floor_wall:9.2f}")


if __name__ == "__main__":
    main()
