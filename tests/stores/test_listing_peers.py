"""Listing (``SupportsListing.memory_ids``) while a peer writes, on every backend whose memories a peer shares.

A peer is a store of its own on the same server, as another process of the service has. While it adds to
memories that exist throughout, creates others and deletes them again, every listing must name each memory
that existed throughout exactly once, and nothing but memories that existed at some point during it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from chatmemory import AiMessage, SupportsListing, UserMessage
from support.recipes import SHARED_BETWEEN_PROCESSES, Recipe, recipe

MARKS = {"langchain4j_redis": "redis"}
LASTING = {"mongodb": 300}
"""Memories that exist throughout: more than one page, cursor batch or ``SCAN`` batch of each store (1,200
where not named)."""
CHURN = 150
"""Memories the peer creates, each deleted again a few writes later."""
DEADLINE = 120.0
"""Seconds the test waits for its peer (a hang is a failure, not a stuck run)."""


@pytest.fixture(
    params=[pytest.param(n, id=n, marks=getattr(pytest.mark, MARKS.get(n, n))) for n in SHARED_BETWEEN_PROCESSES]
)
def peer_recipe(request: pytest.FixtureRequest) -> Iterator[Recipe]:
    made = recipe(request.param)
    made.open().close()  # the tables, once
    yield made
    made.cleanup()


def test_a_listing_while_a_peer_writes_names_each_lasting_memory_once(peer_recipe: Recipe) -> None:
    reader, writer = peer_recipe.open(), peer_recipe.open()
    assert isinstance(reader, SupportsListing)
    lasting = [f"lasting-{n:04d}" for n in range(LASTING.get(peer_recipe.name, 1_200))]
    churn = [f"churn-{n:04d}" for n in range(CHURN)]
    reading, done = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            reading.wait(DEADLINE)
            for n, memory_id in enumerate(churn):
                writer.update_messages(memory_id, [UserMessage(memory_id)])
                if n >= 3:
                    writer.delete_messages(churn[n - 3])
                touched = lasting[(n * 7) % len(lasting)]
                writer.update_messages(touched, [UserMessage(touched), AiMessage(f"touched at {n}")])
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            done.set()

    try:
        for memory_id in lasting:
            writer.update_messages(memory_id, [UserMessage(memory_id)])
        peer = threading.Thread(target=write)
        peer.start()
        listings: list[list[str]] = []
        while not done.is_set():
            listings.append(list(reader.memory_ids()))
            reading.set()
        peer.join(DEADLINE)
        assert failures == [] and not peer.is_alive()
        listings.append(list(reader.memory_ids()))
        known = set(lasting) | set(churn)
        for listed in listings:
            twice = [memory_id for memory_id, count in Counter(listed).items() if count > 1]
            assert twice == []
            assert set(lasting) <= set(listed)
            assert set(listed) <= known
        assert set(listings[-1]) == set(lasting) | set(churn[-3:])
    finally:
        reader.close()
        writer.close()
