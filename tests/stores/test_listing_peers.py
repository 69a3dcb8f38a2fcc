"""Listing (``SupportsListing.memory_ids``) while a peer writes, on every backend whose memories a peer shares.

A peer is a store of its own on the same server, as another process of the service has. While it adds to
memories that exist throughout, creates others and deletes them again, every listing must name each memory
that existed throughout exactly once, and nothing but memories that existed at some point during it.
"""

from __future__ import annotations

from collections import Counter

from chatmemory import AiMessage, SupportsListing, UserMessage
from support.peers import Peer
from support.recipes import Recipe

LASTING = {"mongodb": 300}
"""Memories that exist throughout: more than one page, cursor batch or ``SCAN`` batch of each store (1,200
where not named)."""
CHURN = 150
"""Memories the peer creates, each deleted again a few writes later."""


def test_a_listing_while_a_peer_writes_names_each_lasting_memory_once(peer_recipe: Recipe) -> None:
    reader, writer = peer_recipe.open(), peer_recipe.open()
    assert isinstance(reader, SupportsListing)
    lasting = [f"lasting-{n:04d}" for n in range(LASTING.get(peer_recipe.name, 1_200))]
    churn = [f"churn-{n:04d}" for n in range(CHURN)]

    def write() -> None:
        for n, memory_id in enumerate(churn):
            writer.update_messages(memory_id, [UserMessage(memory_id)])
            if n >= 3:
                writer.delete_messages(churn[n - 3])
            touched = lasting[(n * 7) % len(lasting)]
            writer.update_messages(touched, [UserMessage(touched), AiMessage(f"touched at {n}")])

    try:
        for memory_id in lasting:
            writer.update_messages(memory_id, [UserMessage(memory_id)])
        listings: list[list[str]] = []
        with Peer(write) as peer:
            while peer.writing():
                listings.append(list(reader.memory_ids()))
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
