"""History against a model, on every backend: random writes, and the history must be what the rules say.

The model is the rule of :mod:`chatmemory.core.history` written out plainly: each write appends what the
sequence diff appends, a conflict appends nothing, a delete empties everything. Hypothesis picks the
writes — rewrites that keep a scattered subset, duplicates, empty windows, stale saves — which is where a
store's own diff and its window/history bookkeeping can disagree.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import ChatMemoryStore, ConcurrentUpdateError, SupportsVersioning, UserMessage
from chatmemory.core.history import SupportsHistory, history_appends
from support.backends import Backend

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
