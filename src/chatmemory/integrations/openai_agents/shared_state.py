"""What the ChatMemorySession objects of one store share per session id: the state last seen, the items.

An application often makes a session object per request or per run. Kept on the object, the converted
items (:class:`~.item_cache.ItemCache`) and the state a write may start from (:class:`~.steps.Known`)
would be lost with it, and every run would convert the whole session again. So they are kept per store
(weakly: they go with the store) and per session id and system role, for the
:data:`SESSIONS_KEPT` ids used last. Both are only hints: items are found by message identity, a write
from a known state is conditional on its version, so sharing them cannot change what a session reads or
writes.
"""

from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

from chatmemory.core.lru import LRU
from chatmemory.integrations.openai_agents.item_cache import ItemCache
from chatmemory.integrations.openai_agents.steps import Known

__all__ = ["SESSIONS_KEPT", "SessionState", "state_for"]

SESSIONS_KEPT = 256
"""How many session ids' state is kept per store (the least recently used is dropped first)."""


class SessionState(NamedTuple):
    """The state of one session id on one store."""

    known: Known
    items: ItemCache


_lock = threading.Lock()
_by_store: weakref.WeakKeyDictionary[object, LRU[tuple[str, str], SessionState]] = weakref.WeakKeyDictionary()


def state_for(store: object, session_id: str, system_role: str) -> SessionState:
    """The state the session objects of ``store`` share for ``session_id`` (made now if there is none).

    A store that takes no weak reference, or is not hashable, gets a state of its own for each call.
    """
    with _lock:
        try:
            states = _by_store.get(store)
            if states is None:
                states = _by_store[store] = LRU(SESSIONS_KEPT)
        except TypeError:
            return SessionState(Known(), ItemCache(system_role))
        key = (session_id, system_role)
        state = states.get(key)
        if state is None:
            state = SessionState(Known(), ItemCache(system_role))
            states.put(key, state)
        return state
