"""Encryption at rest: sealed records round-trip, hide every text, and fail loudly when they cannot open.

Run with a ``make_encrypted_store`` hook (stores sharing one namespace); a store without
``encryption=`` support leaves the hook ``None`` and these cases skip.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from chatmemory.core.errors import CorruptedMemoryError, EncryptionKeyError, PlaintextRecordError
from chatmemory.core.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.testing.cases.history import _messages as history_messages
from chatmemory.testing.driver import ContractDriver

_NEEDS_CRYPTOGRAPHY = pytest.mark.skipif(
    importlib.util.find_spec("cryptography") is None, reason="the encryption extra (cryptography) is not installed"
)


def _keyring(keys: dict[str, bytes], primary: Any, **options: Any) -> Any:
    from chatmemory.encryption import Keyring

    return Keyring(keys, primary, **options)


def _secrets(turn: int) -> list[ChatMessage]:
    """A turn whose every text is distinctive, so the raw bytes can be searched for it."""
    return [
        UserMessage(f"my card number is 4111-{turn:04d}-secret and I live at 12 Rue Privée {turn}"),
        AiMessage(
            f"looking up the account for turn {turn}",
            tool_execution_requests=[
                ToolExecutionRequest(id=f"call-{turn}", name="lookup", arguments=f'{{"ssn": "078-05-{turn:04d}"}}')
            ],
        ),
    ]


def _texts(messages: list[ChatMessage]) -> list[bytes]:
    found: list[bytes] = []
    for message in messages:
        if isinstance(message, (UserMessage, SystemMessage)):
            found.append(message.text.encode("utf-8"))
        if isinstance(message, AiMessage):
            found.append((message.text or "").encode("utf-8"))
            found.extend(request.arguments.encode("utf-8") for request in message.tool_execution_requests)
    return [text for text in found if text]


@_NEEDS_CRYPTOGRAPHY
class EncryptionCases:
    """Sealed records: round trip, nothing in clear, rotation, named errors, tampering and copies detected."""

    @pytest.mark.parametrize("history", [False, True], ids=["window", "history"])
    async def test_sealed_round_trip_leaves_no_text_in_clear(
        self, contract: ContractDriver, memory_id: str, history: bool
    ) -> None:
        keyring = _keyring({"k1": os.urandom(32)}, "k1")
        store = await contract.encrypted_store(keyring, history=history)
        memory = contract.memory(memory_id, store=store, max_messages=6)
        said: list[ChatMessage] = [SystemMessage("you are a bank's assistant: never repeat card numbers")]
        await memory.add(said[0])
        for turn in range(5):
            turn_messages = _secrets(turn)
            said += turn_messages
            await memory.add(*turn_messages)
        kept = await store.get_messages(memory_id)
        assert kept == await memory.messages()
        assert kept[0] == said[0] and kept[-1] == said[-1]
        raw = await store.read_raw(memory_id)  # type: ignore[attr-defined]
        assert len(raw) == len(kept)
        for text in _texts(said):
            assert not any(text in bytes(record) for record in raw), f"{text!r} is stored in clear"
        if history:
            assert await history_messages(store, memory_id) == said

    async def test_rotation_reads_old_and_new_keys(self, contract: ContractDriver, memory_id: str) -> None:
        k1, k2 = os.urandom(32), os.urandom(32)
        old = await contract.encrypted_store(_keyring({"k1": k1}, "k1"))
        await contract.memory(memory_id, store=old, max_messages=10).add(*_secrets(0))
        rotated = await contract.encrypted_store(_keyring({"k1": k1, "k2": k2}, "k2"))
        await contract.memory(memory_id, store=rotated, max_messages=10).add(*_secrets(1))
        assert await rotated.get_messages(memory_id) == [*_secrets(0), *_secrets(1)]
        from chatmemory.encryption import record_key_id

        key_ids = [record_key_id(record) for record in await rotated.read_raw(memory_id)]  # type: ignore[attr-defined]
        assert key_ids[-2:] == ["k2", "k2"]
        assert set(key_ids) <= {"k1", "k2"}
        # A reader that has only the old key names the key it lacks.
        with pytest.raises(EncryptionKeyError) as raised:
            await old.get_messages(memory_id)
        assert raised.value.memory_id == memory_id and raised.value.key_id == "k2"
        assert memory_id in str(raised.value) and "k2" in str(raised.value)

    @pytest.mark.parametrize("history", [False, True], ids=["window", "history"])
    async def test_reseal_lets_the_old_key_go(self, contract: ContractDriver, memory_id: str, history: bool) -> None:
        k1, k2 = os.urandom(32), os.urandom(32)
        old = await contract.encrypted_store(_keyring({"k1": k1}, "k1"), history=history)
        said: list[ChatMessage] = [SystemMessage("be brief")]
        memory = contract.memory(memory_id, store=old, max_messages=4)
        await memory.add(said[0])
        for turn in range(3):
            said += _secrets(turn)
            await memory.add(*_secrets(turn))
        rotated = await contract.encrypted_store(_keyring({"k1": k1, "k2": k2}, "k2"), history=history)
        said += _secrets(3)
        await contract.memory(memory_id, store=rotated, max_messages=4).add(*_secrets(3))
        window = await rotated.get_messages(memory_id)
        from chatmemory.encryption import record_key_id

        raw = await rotated.read_raw(memory_id)  # type: ignore[attr-defined]
        under_k1 = sum(record_key_id(record) == "k1" for record in raw)
        first = await rotated.reseal(memory_id)  # type: ignore[attr-defined]
        assert first.resealed >= under_k1 and first.moved == 0
        raw = await rotated.read_raw(memory_id)  # type: ignore[attr-defined]
        assert {record_key_id(record) for record in raw} == {"k2"}
        again = await rotated.reseal(memory_id)  # type: ignore[attr-defined]
        assert again.resealed == 0 and again.current == first.resealed + first.current
        assert await rotated.get_messages(memory_id) == window
        new_only = await contract.encrypted_store(_keyring({"k2": k2}, "k2"), history=history)
        assert await new_only.get_messages(memory_id) == window
        if history:
            assert await history_messages(new_only, memory_id) == said
        await contract.memory(memory_id, store=new_only, max_messages=4).add(UserMessage("after the old key went"))
        assert (await new_only.get_messages(memory_id))[-1] == UserMessage("after the old key went")

    async def test_missing_key_raises_and_add_overwrites_nothing(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        k1 = os.urandom(32)
        owner = await contract.encrypted_store(_keyring({"k1": k1}, "k1"))
        await contract.memory(memory_id, store=owner, max_messages=10).add(*_secrets(0))
        stranger = await contract.encrypted_store(_keyring({"other": os.urandom(32)}, "other"))
        with pytest.raises(EncryptionKeyError) as raised:
            await stranger.get_messages(memory_id)
        assert raised.value.key_id == "k1" and raised.value.memory_id == memory_id
        with pytest.raises(EncryptionKeyError):
            await contract.memory(memory_id, store=stranger, max_messages=10).add(UserMessage("would overwrite"))
        # A key id the ring has, with other key material, opens nothing either.
        impostor = await contract.encrypted_store(_keyring({"k1": os.urandom(32)}, "k1"))
        with pytest.raises(CorruptedMemoryError):
            await impostor.get_messages(memory_id)
        assert await owner.get_messages(memory_id) == _secrets(0)

    async def test_flipped_byte_is_detected(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.encrypted_store(_keyring({"k1": os.urandom(32)}, "k1"))
        await contract.memory(memory_id, store=store, max_messages=10).add(*_secrets(0))
        raw = [bytearray(record) for record in await store.read_raw(memory_id)]  # type: ignore[attr-defined]
        for position in (len(raw[0]) - 1, len(raw[0]) // 2):
            damaged = [bytes(record) for record in raw]
            flipped = bytearray(damaged[0])
            flipped[position] ^= 0x01
            damaged[0] = bytes(flipped)
            await store.write_raw(memory_id, damaged)  # type: ignore[attr-defined]
            with pytest.raises(CorruptedMemoryError) as raised:
                await store.get_messages(memory_id)
            assert raised.value.memory_id == memory_id
            with pytest.raises(CorruptedMemoryError):
                await contract.memory(memory_id, store=store, max_messages=10).add(UserMessage("would overwrite"))

    async def test_record_copied_to_another_memory_does_not_open(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.encrypted_store(_keyring({"k1": os.urandom(32)}, "k1"))
        other_id = memory_id + "-other"
        await contract.memory(memory_id, store=store, max_messages=10).add(*_secrets(0))
        await contract.memory(other_id, store=store, max_messages=10).add(*_secrets(1))
        stolen = await store.read_raw(memory_id)  # type: ignore[attr-defined]
        await store.write_raw(other_id, [*await store.read_raw(other_id), stolen[0]])  # type: ignore[attr-defined]
        with pytest.raises(CorruptedMemoryError) as raised:
            await store.get_messages(other_id)
        assert raised.value.memory_id == other_id

    async def test_per_tenant_keys_shred_one_tenant(self, contract: ContractDriver, memory_id: str) -> None:
        keys = {"tenant-a": os.urandom(32), "tenant-b": os.urandom(32)}

        def tenant_key(memory_id: str) -> str:
            return "tenant-a" if memory_id.endswith(":a") else "tenant-b"

        store = await contract.encrypted_store(_keyring(keys, tenant_key))
        a_id, b_id = memory_id + ":a", memory_id + ":b"
        await contract.memory(a_id, store=store, max_messages=10).add(*_secrets(0))
        await contract.memory(b_id, store=store, max_messages=10).add(*_secrets(1))
        from chatmemory.encryption import record_key_id

        assert {record_key_id(r) for r in await store.read_raw(a_id)} == {"tenant-a"}  # type: ignore[attr-defined]
        shredded = await contract.encrypted_store(_keyring({"tenant-b": keys["tenant-b"]}, tenant_key))
        with pytest.raises(EncryptionKeyError) as raised:
            await shredded.get_messages(a_id)
        assert raised.value.key_id == "tenant-a"
        assert await shredded.get_messages(b_id) == _secrets(1)

    async def test_plain_data_is_refused_unless_migrating(self, contract: ContractDriver, memory_id: str) -> None:
        plain = await contract.encrypted_store(None)
        await contract.memory(memory_id, store=plain, max_messages=10).add(*_secrets(0))
        key = os.urandom(32)
        strict = await contract.encrypted_store(_keyring({"k1": key}, "k1"))
        with pytest.raises(PlaintextRecordError) as raised:
            await strict.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        with pytest.raises(PlaintextRecordError):
            await contract.memory(memory_id, store=strict, max_messages=10).add(UserMessage("would overwrite"))
        migrating = await contract.encrypted_store(_keyring({"k1": key}, "k1", read_plaintext=True))
        assert await migrating.get_messages(memory_id) == _secrets(0)
        await contract.memory(memory_id, store=migrating, max_messages=10).add(*_secrets(1))
        assert await migrating.get_messages(memory_id) == [*_secrets(0), *_secrets(1)]
        # A plain store that meets sealed records names the key they need.
        with pytest.raises(EncryptionKeyError) as named:
            await plain.get_messages(memory_id)
        assert named.value.key_id == "k1"
