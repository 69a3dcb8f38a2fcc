"""History against a model, on every backend: random writes, and the history must be what the rules say.

The model is the rule of :mod:`chatmemory.core.history` written out plainly: each write appends what the
sequence diff appends, a conflict appends nothing, a delete empties everything. Hypothesis picks the
writes — rewrites that keep a scattered subset, duplicates, empty windows, stale saves — which is where a
store's own diff and its window/history bookkeeping can disagree.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import ChatMemoryStore, ConcurrentUpdateError, MessageWindowChatMemory, SupportsVersioning, UserMessage
from chatmemory.core.history import SupportsHistory, history_appends
from support.backends import Backend
from support.peers import Peer
from support.recipes import Recipe

POOL = [UserMessage(f"m{index}") for index in range(6)]

windows = st.lists(st.sampled_from(POOL), max_size=6)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("update"), windows),
        st.tuples(st.just("save"), windows),
        st.tuples(st.just("stale-save"), windows),
        st.tuples(st.just("delete"), st.just([])),
    ),
    min_size=1,
    max_size=10,
)


@pytest.fixture
def history_store(backend: Backend) -> Iterator[ChatMemoryStore]:
    made = backend.make_store(history=True)
    yield made
    backend.close_store(made)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_history_follows_the_model(history_store: ChatMemoryStore, steps: list[tuple[str, list]]) -> None:
    store = history_store
    assert isinstance(store, SupportsHistory)
    memory_id = f"model-{uuid.uuid4().hex}"
    window: list = []
    history: list = []
    for kind, new in steps:
        if kind == "delete":
            store.delete_messages(memory_id)
            window, history = [], []
            continue
        if kind == "update" or not isinstance(store, SupportsVersioning):
            store.update_messages(memory_id, new)
        else:
            version = store.load(memory_id).version
            if kind == "stale-save":
                store.update_messages(memory_id, window)  # moves the version on, changes nothing
                with pytest.raises(ConcurrentUpdateError):
                    store.save(memory_id, new, version)
                continue
            store.save(memory_id, new, version)
        history += history_appends(window, new)
        window = list(new)
        assert store.get_messages(memory_id) == window
    page = store.history(memory_id, limit=1000)
    assert page.messages == history
    sequences = [entry.sequence for entry in page.entries]
    assert sequences == sorted(set(sequences))


# ------------------------------------------------------------------ a peer writing meanwhile

PEER_ADDS = 120
"""The peer's adds in the tests below (bounded for CI)."""


def _adding(store: ChatMemoryStore, memory_id: str) -> Callable[[], None]:
    """A peer's work: a window memory of four adding turn after turn (each add evicts one turn)."""

    def add() -> None:
        memory = MessageWindowChatMemory(memory_id, max_messages=4, store=store)
        for turn in range(PEER_ADDS):
            memory.add(UserMessage(f"turn {turn}"))

    return add


def test_paging_a_history_while_a_peer_writes_gives_each_entry_once_in_order(peer_recipe: Recipe) -> None:
    # Meanwhile a reader pages through the history from its start again and again. Every pass must be a
    # prefix of what the peer added: in order, each entry once, none skipped, whatever the peer did
    # between two pages.
    reader, writer = peer_recipe.open(history=True), peer_recipe.open(history=True)
    memory_id = f"paged-{uuid.uuid4().hex[:8]}"

    def one_pass() -> list[Any]:
        entries: list[Any] = []
        after = None
        while True:
            page = reader.history(memory_id, after=after, limit=7)  # type: ignore[attr-defined]
            entries.extend(page.entries)
            if page.next_after is None:
                return entries
            after = page.next_after

    try:
        passes: list[list[Any]] = []
        with Peer(_adding(writer, memory_id)) as peer:
            while peer.writing():
                passes.append(one_pass())
        passes.append(one_pass())
        said = [UserMessage(f"turn {turn}") for turn in range(PEER_ADDS)]
        assert [entry.message for entry in passes[-1]] == said
        for entries in passes:
            sequences = [entry.sequence for entry in entries]
            assert sequences == sorted(set(sequences))
            assert [entry.message for entry in entries] == said[: len(entries)]
    finally:
        reader.close()
        writer.close()


def test_trimming_a_history_while_a_peer_writes_never_changes_its_window(peer_recipe: Recipe) -> None:
    # Meanwhile a reader trims the history to nothing, again and again. Every window read is four
    # consecutive turns, and the last one the peer's last four.
    reader, writer = peer_recipe.open(history=True), peer_recipe.open(history=True)
    memory_id = f"trimmed-{uuid.uuid4().hex[:8]}"
    try:
        writer.update_messages(memory_id, [UserMessage(f"early {n}") for n in range(4)])
        windows: list[tuple[Any, ...]] = []
        with Peer(_adding(writer, memory_id)) as peer:
            while peer.writing():
                reader.trim_history(older_than=datetime.timedelta(0), memory_id=memory_id)  # type: ignore[attr-defined]
                windows.append(tuple(reader.get_messages(memory_id)))
        turns = [UserMessage(f"early {n}") for n in range(4)] + [UserMessage(f"turn {n}") for n in range(PEER_ADDS)]
        runs = {tuple(turns[start : start + 4]) for start in range(len(turns) - 3)}
        assert [window for window in windows if window not in runs] == []
        assert writer.get_messages(memory_id) == turns[-4:]
    finally:
        reader.close()
        writer.close()
