"""ChatMemorySession against the Agents SDK's own sessions, per agent turn, on the same store, same run.

    python benchmarks/openai_agents_session.py [--backend memory|redis|postgres|mongodb] [--fresh]

A turn is what ``Runner.run`` does with a tool call: ``get_items()``, then ``add_items`` of the user input,
of the reasoning and call, of the call's output, of the answer. On a server (the CHATMEMORY_TEST_*_URL) the
SDK's RedisSession, SQLAlchemySession (psycopg async) or MongoDBSession and ChatMemorySession (no window)
fill each conversation to each ``--lengths`` (items) untimed, then play ``--turns`` timed turns, sides
alternating; items are compared equal at the end; the ratio is chatmemory's median turn over the SDK's.
``--fresh``: new session objects every turn (one per request). ``memory``: beside ``SQLiteSession``, windows
too. A chatmemory memory is one MongoDB document, rewritten by each write (some 50 MB per run at 2,000
items): the test setup's in-memory SecantusDB refuses writes with WT_CACHE_FULL when that piles up, hence
fewer turns there and a database per run, dropped at its end. Figures only, no assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

# This folder holds redis.py and mongodb.py, which would shadow the drivers of those names: look in it last.
sys.path.append(sys.path.pop(0))

from agents import SQLiteSession

from chatmemory import aio
from chatmemory.integrations.openai_agents import ChatMemorySession

ITEMS_PER_TURN = 5


def _turn_items(turn: int) -> list[list[dict[str, Any]]]:
    return [
        [{"role": "user", "content": f"question {turn}: how is the weather in city {turn}?"}],
        [
            {"type": "reasoning", "id": f"rs_{turn}", "summary": [], "encrypted_content": "gAAAA" + "x" * 400},
            {
                "type": "function_call",
                "id": f"fc_{turn}",
                "call_id": f"c{turn}",
                "name": "weather",
                "arguments": f'{{"city": "city {turn}"}}',
                "status": "completed",
            },
        ],
        [{"type": "function_call_output", "call_id": f"c{turn}", "output": f"sunny in city {turn}"}],
        [
            {
                "type": "message",
                "id": f"msg_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {turn}", "annotations": []}],
            }
        ],
    ]


async def _turn(session: Any, turn: int) -> float:
    """One agent turn on ``session``, in µs."""
    start = time.perf_counter_ns()
    await session.get_items()
    for batch in _turn_items(turn):
        await session.add_items(batch)
    return (time.perf_counter_ns() - start) / 1000


# ------------------------------------------------------------------------------------------ in memory


async def _time_turns(session: Any, turns: int) -> float:
    micros = [await _turn(session, turn) for turn in range(turns)]
    return statistics.median(micros[turns // 2 :])  # the steady state: a full window


async def run_memory(turns: int, windows: list[int]) -> None:
    """ChatMemorySession on the asyncio in-memory store beside ``SQLiteSession(":memory:")``."""
    reference = SQLiteSession("bench")
    sqlite = await _time_turns(reference, turns)
    reference.close()
    print(f"{'session':>34} {'turn µs':>9} {'vs SQLite':>10}")
    print(f"{'SQLiteSession(:memory:)':>34} {sqlite:>9.0f} {1:>10.2f}")
    for window in [None, *windows]:
        session = ChatMemorySession("bench", store=aio.InMemoryChatMemoryStore(), max_messages=window)
        micros = await _time_turns(session, turns)
        name = f"ChatMemorySession(max_messages={window})"
        print(f"{name:>34} {micros:>9.0f} {micros / sqlite:>10.2f}")


# ------------------------------------------------------------------------------------------ on a server

Pair = tuple[Callable[[str], Awaitable[Any]], Callable[[str], Any], Callable[[], Awaitable[None]]]
"""(SDK session for an id, ChatMemorySession for an id, close both sides' clients)."""


async def _redis(url: str) -> tuple[str, Pair]:
    import redis.asyncio as redis_asyncio
    from agents.extensions.memory import RedisSession

    client = redis_asyncio.from_url(url)
    store = aio.open_store(url)

    async def sdk(session_id: str) -> Any:
        return RedisSession(session_id, redis_client=client, key_prefix="bench:agents")

    async def close() -> None:
        await client.aclose()
        await store.aclose()

    return "RedisSession", (sdk, lambda session_id: ChatMemorySession(session_id, store=store), close)


async def _postgres(url: str) -> tuple[str, Pair]:
    from agents.extensions.memory import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)  # postgresql+psycopg: psycopg in its async mode
    store = aio.open_store(url)
    if isinstance(store, aio.SupportsSchema):
        await store.create_schema()

    async def sdk(session_id: str) -> Any:
        return SQLAlchemySession(session_id, engine=engine, create_tables=True)

    async def close() -> None:
        await engine.dispose()
        await store.aclose()

    return "SQLAlchemySession", (sdk, lambda session_id: ChatMemorySession(session_id, store=store), close)


async def _mongodb(url: str) -> tuple[str, Pair]:
    from agents.extensions.memory import MongoDBSession
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient[Any] = AsyncMongoClient(url)
    database = f"bench_agents_{uuid.uuid4().hex[:8]}"  # both sides' collections, dropped at the end
    store = aio.open_store(url, database=database, collection="chatmemory")

    async def sdk(session_id: str) -> Any:
        return MongoDBSession(session_id, client=client, database=database)

    async def close() -> None:
        await store.aclose()
        await client.drop_database(database)
        await client.close()

    return "MongoDBSession", (sdk, lambda session_id: ChatMemorySession(session_id, store=store), close)


BACKENDS = {
    "redis": ("CHATMEMORY_TEST_REDIS_URL", _redis),
    "postgres": ("CHATMEMORY_TEST_POSTGRES_URL", _postgres),
    "mongodb": ("CHATMEMORY_TEST_MONGODB_URL", _mongodb),
}


async def _fill(session: Any, items: int) -> int:
    """Add whole turns' items, untimed, until ``session`` holds ``items``; the next turn's number."""
    turns = -(-items // ITEMS_PER_TURN)
    chunk: list[dict[str, Any]] = []
    for turn in range(turns):
        chunk.extend(item for batch in _turn_items(turn) for item in batch)
        if len(chunk) >= 500 or turn == turns - 1:
            await session.add_items(chunk)
            chunk = []
    return turns


async def run_server(backend: str, lengths: list[int], conversations: int, turns: int, *, fresh: bool) -> None:
    """Both sides on the server ``backend`` names, at each session length, sides alternating."""
    variable, opener = BACKENDS[backend]
    url = os.environ.get(variable)
    if not url:
        raise SystemExit(f"set {variable} to the server's URL")
    name, (sdk_session, chatmemory_session, close) = await opener(url)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    objects = "new session objects every turn" if fresh else "one session object per conversation"
    print(f"{backend}: {url}; {conversations} conversations x {turns} timed turns per length; {objects}")
    print(
        f"{'items':>6} {name + ' µs':>22} {'ChatMemorySession µs':>21} {'ratio':>6} "
        f"{'ratio p90':>9} {'items equal':>11}"
    )
    try:
        for length in lengths:
            sdk_micros: list[float] = []
            ours_micros: list[float] = []
            equal = True
            for conversation in range(conversations):
                session_id = f"{prefix}-{length}-{conversation}"
                sides = [await sdk_session(session_id), chatmemory_session(session_id)]
                first = 0
                for side in sides:
                    first = await _fill(side, length)
                for turn in range(first, first + turns):
                    order = (0, 1) if turn % 2 == 0 else (1, 0)
                    for index in order:
                        if fresh:
                            sides[index] = (
                                await sdk_session(session_id) if index == 0 else chatmemory_session(session_id)
                            )
                        micros = await _turn(sides[index], turn)
                        (sdk_micros if index == 0 else ours_micros).append(micros)
                sdk_items, our_items = await sides[0].get_items(), await sides[1].get_items()
                equal = equal and sdk_items == our_items and len(sdk_items) >= length
                for side in sides:
                    await side.clear_session()
            sdk = statistics.median(sdk_micros)
            ours = statistics.median(ours_micros)
            p90 = statistics.quantiles(ours_micros, n=10)[8] / statistics.quantiles(sdk_micros, n=10)[8]
            print(f"{length:>6} {sdk:>22.0f} {ours:>21.0f} {ours / sdk:>6.2f} {p90:>9.2f} {equal!s:>11}")
    finally:
        await close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=["memory", *BACKENDS], default="memory")
    parser.add_argument(
        "--turns", type=int, default=None, help="timed turns (memory: 300; mongodb: 10; else 20 per length)"
    )
    parser.add_argument("--windows", type=int, nargs="+", default=[50, 500], help="memory: the windows tried")
    parser.add_argument("--lengths", type=int, nargs="+", default=[50, 500, 2000], help="server: items held")
    parser.add_argument("--conversations", type=int, default=3, help="server: conversations per length")
    parser.add_argument("--fresh", action="store_true", help="server: new session objects for every turn")
    args = parser.parse_args()
    if args.backend == "memory":
        await run_memory(args.turns or 300, args.windows)
    else:
        turns = args.turns or (10 if args.backend == "mongodb" else 20)
        await run_server(args.backend, args.lengths, args.conversations, turns, fresh=args.fresh)


if __name__ == "__main__":
    asyncio.run(main())
