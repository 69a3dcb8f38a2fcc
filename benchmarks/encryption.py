"""Encryption at rest beside none: the same store, the same turns, sealed and plain, interleaved.

    python benchmarks/encryption.py [URL ...] [--turns 600] [--window 20] [--history]

For each store URL (default: ``memory://`` and a SQLite file here, plus the servers named by the
``CHATMEMORY_TEST_*_URL`` variables the test suite reads), two stores in namespaces of their own, one
built with ``encryption=Keyring(...)`` and one without, run the realistic conversation of ``workload.py``
(mixed English and Chinese, a tool call every fifth turn):

* ``add``: ``MessageWindowChatMemory.add`` of each turn's messages (a load, then a save of the diff);
* ``plain contract``: ``update_messages(id, window)`` then ``get_messages(id)``, as LangChain4j-style callers do.

The sides take turns going first; the figure is the median per-turn time, and the ratio sealed / plain.
Figures only, no assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
# Run as a script, this directory comes first on sys.path: its redis.py / sql.py would shadow the drivers.
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from workload import conversation, sliding_windows  # noqa: E402

from chatmemory import MessageWindowChatMemory, open_store  # noqa: E402
from chatmemory.encryption import Keyring  # noqa: E402

_ENV = {
    "redis": "CHATMEMORY_TEST_REDIS_URL",
    "redis cluster": "CHATMEMORY_TEST_REDIS_CLUSTER_URL",
    "postgres": "CHATMEMORY_TEST_POSTGRES_URL",
    "mysql": "CHATMEMORY_TEST_MYSQL_URL",
    "mongodb": "CHATMEMORY_TEST_MONGODB_URL",
}


def _namespace(url: str) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:10]
    if url.startswith(("redis", "rediss", "unix")):
        return {"key_prefix": f"bench-enc-{tag}:"}
    if url.startswith("mongodb"):
        return {"collection": f"bench_enc_{tag}"}
    if url.startswith("memory"):
        return {}
    return {"table_prefix": f"be{tag}_"}


def _open(url: str, history: bool, **options: Any) -> Any:
    store = open_store(url, history=history, **_namespace(url), **options)
    create = getattr(store, "create_schema", None)
    if create is not None:
        create()
    return store


def _drop(store: Any) -> None:
    for name in ("drop_schema",):
        if hasattr(store, name):
            getattr(store, name)()
    collection = getattr(store, "collection", None)
    if collection is not None:
        collection.drop()
    if hasattr(store, "key_prefix") and hasattr(store, "memory_ids"):
        for memory_id in list(store.memory_ids()):
            store.delete_messages(memory_id)
    store.close()


def _timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def measure(url: str, turns: int, window: int, history: bool) -> dict[str, tuple[float, float]]:
    """Median seconds per turn, (plain, sealed), for ``add`` and the plain contract."""
    keyring = Keyring({"bench": os.urandom(32)}, "bench")
    plain, sealed = _open(url, history), _open(url, history, encryption=keyring)
    times: dict[str, tuple[list[float], list[float]]] = {"add": ([], []), "plain contract": ([], [])}
    try:
        memories = [MessageWindowChatMemory("bench", store=store, max_messages=window) for store in (plain, sealed)]
        for turn, messages in enumerate(conversation(turns)):
            order = (0, 1) if turn % 2 == 0 else (1, 0)
            for side in order:
                times["add"][side].append(
                    _timed(lambda side=side, turn_messages=messages: memories[side].add(*turn_messages))
                )
        for turn, (kept, _, _) in enumerate(sliding_windows(turns, window)):
            order = (0, 1) if turn % 2 == 0 else (1, 0)
            for side in order:
                store = (plain, sealed)[side]

                def contract(store: Any = store, window_now: list[Any] = kept) -> None:
                    store.update_messages("contract", window_now)
                    store.get_messages("contract")

                times["plain contract"][side].append(_timed(contract))
    finally:
        _drop(plain)
        _drop(sealed)
    return {name: (statistics.median(a), statistics.median(b)) for name, (a, b) in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("urls", nargs="*")
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--history", action="store_true")
    args = parser.parse_args()
    urls = list(args.urls)
    if not urls:
        directory = tempfile.mkdtemp(prefix="chatmemory-bench-")
        urls = ["memory://", f"sqlite:///{directory}/bench.db"]
        urls += [os.environ[variable] for variable in _ENV.values() if os.environ.get(variable)]
    print(f"turns {args.turns}, window {args.window}, history {args.history}; median per turn, µs")
    print(f"{'store':<48} {'operation':<15} {'plain':>9} {'sealed':>9} {'ratio':>6}")
    for url in urls:
        for name, (plain, sealed) in measure(url, args.turns, args.window, args.history).items():
            shown = url.split("?")[0][:48]
            print(f"{shown:<48} {name:<15} {plain * 1e6:>9.0f} {sealed * 1e6:>9.0f} {sealed / plain:>6.2f}")


if __name__ == "__main__":
    main()
