"""Readers see the old list or the new one, never a mix."""

from __future__ import annotations

from chatmemory.core.messages import ChatMessage, SystemMessage, UserMessage
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.driver import ContractDriver


class AtomicityCases:
    """Readers see the old list or the new one, never a mix (readers and writer on threads or tasks)."""

    async def test_readers_never_see_a_mix_of_two_lists(self, contract: ContractDriver, memory_id: str) -> None:
        store = contract.store
        lists = [texts(8, "a"), texts(8, "b"), [SystemMessage("s"), *texts(5, "c")]]
        await store.update_messages(memory_id, lists[0])
        seen_bad: list[list[ChatMessage]] = []
        stop: list[bool] = []

        async def read() -> None:
            while not stop:
                got = await store.get_messages(memory_id)
                if got not in lists:
                    seen_bad.append(got)
                await contract.pause()

        async def write() -> None:
            try:
                for round_ in range(150):
                    await store.update_messages(memory_id, lists[round_ % len(lists)])
                    await contract.pause()
            finally:
                stop.append(True)

        await contract.together(write(), read(), read())
        assert not seen_bad, f"a reader saw a mixed list: {seen_bad[0]}"

    async def test_readers_see_whole_windows_while_it_slides(self, contract: ContractDriver, memory_id: str) -> None:
        store = contract.store
        system = SystemMessage("anchor")
        window = 6
        numbers = [UserMessage(str(i)) for i in range(300)]
        await store.update_messages(memory_id, [system, *numbers[:window]])
        bad: list[list[ChatMessage]] = []
        stop: list[bool] = []

        async def read() -> None:
            while not stop:
                got = await store.get_messages(memory_id)
                values = [int(m.text) for m in got[1:] if isinstance(m, UserMessage)]
                contiguous = values == list(range(values[0], values[0] + window)) if values else False
                if not got or got[0] != system or not contiguous:
                    bad.append(got)
                await contract.pause()

        async def write() -> None:
            try:
                for end in range(window + 1, len(numbers) + 1):
                    await store.update_messages(memory_id, [system, *numbers[end - window : end]])
                    await contract.pause()
            finally:
                stop.append(True)

        await contract.together(write(), read())
        assert not bad, f"a reader saw a partial window: {bad[0]}"
