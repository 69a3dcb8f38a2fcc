"""Readers see the old list or the new one, never a mix."""

from __future__ import annotations

import threading

from chatmemory.core.messages import ChatMessage, SystemMessage, UserMessage
from chatmemory.core.store import ChatMemoryStore
from chatmemory.testing.cases.hooks import texts


class AtomicityCases:
    """Readers see the old list or the new one, never a mix."""

    def test_readers_never_see_a_mix_of_two_lists(self, store: ChatMemoryStore, memory_id: str) -> None:
        lists = [texts(8, "a"), texts(8, "b"), [SystemMessage("s"), *texts(5, "c")]]
        store.update_messages(memory_id, lists[0])
        seen_bad: list[list[ChatMessage]] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                got = store.get_messages(memory_id)
                if got not in lists:
                    seen_bad.append(got)

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for round_ in range(150):
                store.update_messages(memory_id, lists[round_ % len(lists)])
        finally:
            stop.set()
            for reader in readers:
                reader.join()
        assert not seen_bad, f"a reader saw a mixed list: {seen_bad[0]}"

    def test_readers_see_whole_windows_while_it_slides(self, store: ChatMemoryStore, memory_id: str) -> None:
        system = SystemMessage("anchor")
        window = 6
        numbers = [UserMessage(str(i)) for i in range(300)]
        store.update_messages(memory_id, [system, *numbers[:window]])
        bad: list[list[ChatMessage]] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                got = store.get_messages(memory_id)
                values = [int(m.text) for m in got[1:] if isinstance(m, UserMessage)]
                contiguous = values == list(range(values[0], values[0] + window)) if values else False
                if not got or got[0] != system or not contiguous:
                    bad.append(got)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for end in range(window + 1, len(numbers) + 1):
                store.update_messages(memory_id, [system, *numbers[end - window : end]])
        finally:
            stop.set()
            reader.join()
        assert not bad, f"a reader saw a partial window: {bad[0]}"
