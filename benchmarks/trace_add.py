"""The Python path of one steady-state ``MessageWindowChatMemory.add``: modules, calls and hops.

    python benchmarks/trace_add.py [--warm 40] [--window 10]

On SQLite (a file in a temporary directory, opened by URL), on the in-memory store, and on Redis at
``CHATMEMORY_TEST_REDIS_URL`` when it is set (keys under a prefix of their own, deleted after), a memory of
``--window`` messages takes ``--warm`` adds of a user and an AI message (so the window is full and each
add evicts), then one more add runs under ``sys.setprofile``. Counted: Python calls (a generator resumed
counts, as the profiler sees it), C calls, the chatmemory modules entered (in order, with their calls),
hops (a call whose function is in another module than its caller's; for the chatmemory figure the caller
is the nearest chatmemory frame, so a round through SQLAlchemy or redis-py back into chatmemory counts
once) and, of the chatmemory hops, those back into a module the add had already entered and left.
Figures only, no assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

# This folder holds redis.py and sql.py: off the path, so that the drivers are the ones imported.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from chatmemory import (  # noqa: E402
    AiMessage,
    ChatMemoryStore,
    MessageWindowChatMemory,
    SupportsSchema,
    UserMessage,
    open_store,
)

OURS = "chatmemory"


def _module(frame: FrameType | None) -> str:
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"


def _ours(module: str) -> bool:
    return module == OURS or module.startswith(OURS + ".")


def _nearest_ours(frame: FrameType | None) -> str | None:
    while frame is not None:
        module = _module(frame)
        if _ours(module):
            return module
        frame = frame.f_back
    return None


@dataclass
class Trace:
    """What the profiler saw during one call."""

    python_calls: int = 0
    c_calls: int = 0
    calls_by_module: Counter[str] = field(default_factory=Counter)
    entered: list[str] = field(default_factory=list)  # chatmemory modules, in the order first entered
    hops: int = 0  # any module to another
    our_hops: int = 0  # chatmemory module to another chatmemory module
    our_hops_back: int = 0  # ... into one entered (and left) before
    seen: set[str] = field(default_factory=set)

    def event(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self.c_calls += 1
            return
        if event != "call":
            return
        self.python_calls += 1
        module = _module(frame)
        self.calls_by_module[module] += 1
        caller = frame.f_back
        if _module(caller) != module:
            self.hops += 1
        if not _ours(module):
            return
        if module not in self.seen:
            self.seen.add(module)
            self.entered.append(module)
            again = False
        else:
            again = True
        ours_before = _nearest_ours(caller)
        if ours_before is not None and ours_before != module:
            self.our_hops += 1
            if again:  # entered before, and control is in another module now: it was left
                self.our_hops_back += 1


def trace(call: Callable[[], object]) -> Trace:
    """Run ``call`` once under ``sys.setprofile``, the collector off."""
    found = Trace()
    gc.collect()
    gc.disable()
    sys.setprofile(found.event)
    try:
        call()
    finally:
        sys.setprofile(None)
        gc.enable()
    return found


def turn(number: int) -> tuple[UserMessage, AiMessage]:
    return UserMessage(f"question {number}: " + "words " * 20), AiMessage(f"answer {number}: " + "more words " * 30)


def measure(store: ChatMemoryStore, warm: int, window: int) -> Trace:
    memory = MessageWindowChatMemory(f"trace-{uuid.uuid4().hex[:8]}", max_messages=window, store=store)
    for number in range(warm):
        memory.add(*turn(number))
    messages = turn(warm)
    result = trace(lambda: memory.add(*messages))
    memory.clear()
    return result


@contextmanager
def sqlite_store() -> Iterator[ChatMemoryStore]:
    with tempfile.TemporaryDirectory(prefix="chatmemory-trace-") as directory:
        store = open_store(f"sqlite:///{os.path.join(directory, 'trace.db')}")
        assert isinstance(store, SupportsSchema)
        store.create_schema()
        try:
            yield store
        finally:
            store.close()


@contextmanager
def memory_store() -> Iterator[ChatMemoryStore]:
    store = open_store("memory://")
    try:
        yield store
    finally:
        store.close()


@contextmanager
def redis_store(url: str) -> Iterator[ChatMemoryStore]:
    store = open_store(url, key_prefix=f"chatmemory-trace-{uuid.uuid4().hex[:8]}:")
    try:
        yield store
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--warm", type=int, default=40, help="adds before the traced one")
    parser.add_argument("--window", type=int, default=10, help="max_messages of the memory")
    args = parser.parse_args()

    stores: dict[str, Callable[[], Any]] = {"sqlite (file)": sqlite_store, "in-memory": memory_store}
    redis_url = os.environ.get("CHATMEMORY_TEST_REDIS_URL")
    if redis_url:
        stores["redis"] = lambda: redis_store(redis_url)
    traces = {}
    for name, opener in stores.items():
        with opener() as store:
            traces[name] = measure(store, args.warm, args.window)

    print(f"one MessageWindowChatMemory.add of 2 messages (max_messages={args.window}, after {args.warm} adds)\n")
    names = list(traces)
    rows = [
        ("Python calls (all modules)", [t.python_calls for t in traces.values()]),
        (
            "  of which in chatmemory",
            [sum(n for m, n in t.calls_by_module.items() if _ours(m)) for t in traces.values()],
        ),
        ("C calls", [t.c_calls for t in traces.values()]),
        ("chatmemory modules entered", [len(t.entered) for t in traces.values()]),
        ("modules entered (all)", [len(t.calls_by_module) for t in traces.values()]),
        ("hops between modules (all)", [t.hops for t in traces.values()]),
        ("hops between chatmemory modules", [t.our_hops for t in traces.values()]),
        ("  of which back into one left before", [t.our_hops_back for t in traces.values()]),
    ]
    width = max(len(label) for label, _ in rows)
    print(" " * width + "  " + "  ".join(f"{name:>13}" for name in names))
    for label, values in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{value:>13}" for value in values))
    for name, found in traces.items():
        print(f"\n== {name}: chatmemory modules in the order entered (Python calls in each)")
        for module in found.entered:
            print(f"  {found.calls_by_module[module]:>5}  {module}")
        others = Counter[str]()
        for module, count in found.calls_by_module.items():
            if not _ours(module):
                others[module.split(".")[0]] += count
        print("  other packages: " + ", ".join(f"{package} {count}" for package, count in others.most_common()))


if __name__ == "__main__":
    main()
