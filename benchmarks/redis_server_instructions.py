"""The Redis server's own work per turn, counted in instructions: the store's scripts beside the raw floor.

    python benchmarks/redis_server_instructions.py [--turns 2000] [--window 20] [--ttl 3600] [--history]
                                                   [--port 6391] [--scripts DIR] [--functions N]

Wall time on a small shared machine moves by several percent from run to run, and a script's server time
(``INFO commandstats``) with it: too much to see a change of a few hundred instructions in a script.
Here a ``redis-server`` of its own runs under ``valgrind --tool=callgrind`` (on ``--port``, nothing kept
on disk), which counts the instructions the server executes: for the same binary and inputs the same
count within a few hundred a turn (the server's timers run by the clock), whatever else the machine is
doing. The counters are zeroed after each side's warm-up turns and
read after its counted turns (``callgrind_control``), so startup, the scripts' loading and the warm-up
are not counted; everything the server does for a turn is: reading and parsing the request, the command
(for the store, its Lua script and every ``redis.call``), the reply, and the event loop around them.

Sides, each on a memory of its own, one after another (counts do not drift, so they need not interleave):

* ``store update``: the plain contract's turn, ``update_messages(id, whole_window)`` with the store's
  snapshot cached (one ``EVALSHA`` of the write script);
* ``store get``: ``get_messages(id)`` on the writing store (the read script answers "unchanged");
* ``floor update``: ``plain_contract.py``'s raw floor, one pipeline of ``RPUSH``, ``LTRIM``, ``EXPIRE``;
* ``floor get``: its ``LRANGE 0 -1``.

``--history`` builds the store with ``history=True`` (its write also appends the history key).
``--scripts DIR`` runs the store with the ``head.lua`` and ``write.lua`` of another directory (say, a
copy of an earlier version's), to count what a change to the write script saves. ``--functions N``
also prints the ``N`` functions that spend the most of the store update's instructions themselves
(``callgrind_annotate``), per turn: the C library's are named (number formatting is ``__printf_fp_l``
and its helpers, parsing ``____strtod_l_internal``); a ``redis-server`` without symbols shows its own
as addresses. Needs ``valgrind`` (with ``callgrind_control`` and ``callgrind_annotate``) and
``redis-server`` on the PATH. Under callgrind the server runs some 50
times slower, so keep ``--turns`` modest. Figures only: not run in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import redis  # noqa: E402

import chatmemory.stores.redis.plan as redis_plan  # noqa: E402
from chatmemory import open_store  # noqa: E402
from chatmemory.stores.redis.scripts import LuaScript  # noqa: E402

sys.path.append(_HERE)
from plain_contract import RedisFloor  # noqa: E402
from workload import sliding_windows  # noqa: E402

WARM_UP = 200
"""Turns each side plays before its counters are zeroed."""


@contextlib.contextmanager
def counted_server(port: int) -> Iterator[tuple[int, Path]]:
    """A ``redis-server`` under callgrind on ``port``: its pid and the directory its counts are dumped in."""
    for tool in ("valgrind", "callgrind_control", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="chatmemory-callgrind-") as directory:
        out = Path(directory)
        process = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out / 'callgrind.out.%p'}",
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port, socket_timeout=60)
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"redis-server under valgrind did not start on port {port}") from None
                    time.sleep(0.2)
            client.close()
            yield process.pid, out
        finally:
            with contextlib.suppress(redis.RedisError):
                redis.Redis(port=port, socket_timeout=60).shutdown(nosave=True)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _control(pid: int, flag: str) -> None:
    subprocess.run(
        ["callgrind_control", flag, str(pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _dumped(out: Path, seen: set[Path]) -> tuple[Path, int]:
    """The dump ``callgrind_control --dump`` just wrote (the newest file not seen) and its instruction total."""
    for _ in range(100):
        fresh = sorted(set(out.glob("callgrind.out.*")) - seen)
        for path in fresh:
            match = re.search(r"^(?:summary|totals):\s*(\d+)", path.read_text(errors="replace"), re.MULTILINE)
            if match:
                seen.add(path)
                return path, int(match.group(1))
        time.sleep(0.1)
    raise SystemExit(f"no callgrind dump appeared in {out}")


def count(pid: int, out: Path, seen: set[Path], turns: list[Any], play: Callable[[Any], None]) -> tuple[float, Path]:
    """Instructions per turn of ``play`` over ``turns``, after :data:`WARM_UP` turns not counted, and the dump."""
    for turn in turns[:WARM_UP]:
        play(turn)
    _control(pid, "--zero")
    for turn in turns[WARM_UP:]:
        play(turn)
    _control(pid, "--dump")
    path, total = _dumped(out, seen)
    return total / (len(turns) - WARM_UP), path


_SELF_COST = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(\S.*?)\s*$")


def top_functions(dump: Path, turns: int, limit: int) -> list[tuple[float, str]]:
    """The ``limit`` functions of ``dump`` with the most instructions of their own, as (per turn, name)."""
    if shutil.which("callgrind_annotate") is None:
        raise SystemExit("callgrind_annotate is not on the PATH")
    listing = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(dump)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    totals = re.search(r"^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS", listing, re.MULTILINE)
    if totals is None:
        raise SystemExit(f"callgrind_annotate printed no program total for {dump}")
    total = int(totals.group(1).replace(",", ""))
    # The table after the "file:function" header: one line per function, highest first.
    _, _, table = listing.partition("file:function")
    functions: list[tuple[float, str]] = []
    for line in table.splitlines():
        match = _SELF_COST.match(line)
        if match is None:
            continue
        own = int(match.group(1).replace(",", ""))
        if own >= total:  # the entry frames (main and what calls it) of a binary without symbols: no cost of their own
            continue
        name = re.sub(r"\s+\[[^]]*\]$", "", match.group(2))  # the object file: the name says enough
        functions.append((own / turns, name.rsplit(":", 1)[-1]))
        if len(functions) == limit:
            break
    return functions


def write_script(directory: str | None) -> LuaScript | None:
    """The write script made of ``directory``'s ``head.lua`` and ``write.lua`` (as the store makes its own)."""
    if directory is None:
        return None
    return LuaScript.with_head(
        "write", Path(directory, "head.lua").read_text("utf-8"), Path(directory, "write.lua").read_text("utf-8")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000, help="counted turns per side")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--ttl", type=int, default=3600, help="the store's ttl in seconds (0: none)")
    parser.add_argument("--history", action="store_true", help="the store keeps a history")
    parser.add_argument("--port", type=int, default=6391)
    parser.add_argument("--scripts", help="a directory with another head.lua and write.lua for the store")
    parser.add_argument(
        "--functions", type=int, default=0, metavar="N", help="also the store update's N costliest functions"
    )
    args = parser.parse_args()
    turns = list(sliding_windows(WARM_UP + args.turns, args.window))
    url = f"redis://127.0.0.1:{args.port}/0"
    other = write_script(args.scripts)
    if other is not None:
        redis_plan.WRITE = other  # type: ignore[misc]  # the planner's write script, for this process only
    figures: dict[str, float] = {}
    with counted_server(args.port) as (pid, out):
        seen: set[Path] = set()
        store = open_store(
            url,
            key_prefix=f"bench:{uuid.uuid4().hex[:8]}:",
            ttl=args.ttl or None,
            socket_timeout=120,
            history=args.history,
        )
        memory_id = "counted"
        figures["store update"], update_dump = count(
            pid, out, seen, turns, lambda turn: store.update_messages(memory_id, turn[0])
        )
        figures["store get"], _ = count(pid, out, seen, turns, lambda _turn: store.get_messages(memory_id))
        store.close()
        floor = RedisFloor(url)  # its client waits for replies without a timeout
        figures["floor update"], _ = count(pid, out, seen, turns, lambda turn: floor.update(memory_id, *turn))
        figures["floor get"], _ = count(pid, out, seen, turns, lambda _turn: floor.get(memory_id))
        floor.close()
        functions = top_functions(update_dump, args.turns, args.functions) if args.functions > 0 else []
    which = f", write script from {args.scripts}" if args.scripts else ""
    print(
        f"Redis server instructions per turn (callgrind): window {args.window}, {args.turns} turns, "
        f"ttl {args.ttl or 'none'}{', history' if args.history else ''}{which}"
    )
    print(f"{'':16}{'instructions':>14}{'x floor':>9}")
    for kind in ("update", "get"):
        floor_figure = figures[f"floor {kind}"]
        for side in ("store", "floor"):
            figure = figures[f"{side} {kind}"]
            print(f"{side + ' ' + kind:16}{figure:14,.0f}{figure / floor_figure:9.2f}")
    if functions:
        print(f"store update, the {len(functions)} functions with the most instructions of their own, per turn:")
        for figure, name in functions:
            print(f"{figure:14,.0f}  {name}")


if __name__ == "__main__":
    main()
