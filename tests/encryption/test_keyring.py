"""The keyring on its own: what it refuses when built, what a sealed record holds, and what never shows a key."""

from __future__ import annotations

import os

import pytest

from chatmemory import (
    CorruptedMemoryError,
    EncryptionKeyError,
    InMemoryChatMemoryStore,
    PlaintextRecordError,
    SerializationError,
    UserMessage,
)
from chatmemory.encryption import MAGIC, Keyring, is_sealed, record_key_id
from chatmemory.serialization.native import dumps_message
from chatmemory.serialization.records import PLAIN, codec_of, reseal_plan

KEY = bytes(range(32))


@pytest.mark.parametrize(
    ("keys", "primary", "error"),
    [
        ({"k": b"short"}, "k", ValueError),
        ({"k": KEY}, "missing", ValueError),
        ({"": KEY}, "", ValueError),
        ({"x" * 256: KEY}, "x" * 256, ValueError),
        ([("k", KEY)], "k", TypeError),
        ({"k": KEY}, 7, TypeError),
    ],
    ids=["short-key", "unknown-primary", "empty-id", "long-id", "not-a-mapping", "primary-not-str"],
)
def test_a_bad_keyring_is_refused_when_built(keys: object, primary: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Keyring(keys, primary)  # type: ignore[arg-type]


def test_no_key_material_in_repr_or_errors() -> None:
    secret = os.urandom(32)
    keyring = Keyring({"2026-12": secret}, "2026-12")
    shown = [repr(keyring)]
    other = Keyring({"other": os.urandom(32)}, "other")
    record = keyring.dumps(UserMessage("hi"), "m")
    with pytest.raises(EncryptionKeyError) as missing:
        other.loads(record, "m")
    shown.append(str(missing.value))
    with pytest.raises(CorruptedMemoryError) as moved:
        keyring.loads(record, "n")
    shown.append(str(moved.value))
    for text in shown:
        assert secret.hex() not in text and repr(secret) not in text
    assert "2026-12" in shown[0] and "other" not in shown[1] and "'2026-12'" in shown[1]


def test_a_sealed_record_names_its_key_and_hides_its_text() -> None:
    keyring = Keyring({"k1": KEY}, "k1")
    record = keyring.dumps(UserMessage("the launch code is 0000"), "m")
    assert record.startswith(MAGIC) and is_sealed(record) and record_key_id(record) == "k1"
    assert b"launch" not in record
    assert keyring.dumps(UserMessage("same"), "m") != keyring.dumps(UserMessage("same"), "m")  # fresh nonces
    assert keyring.loads(record, "m") == UserMessage("the launch code is 0000")
    assert not is_sealed(dumps_message(UserMessage("plain"))) and record_key_id(b"{}") is None


def test_positions_bind_where_given() -> None:
    keyring = Keyring({"k1": KEY}, "k1")
    record = keyring.dumps(UserMessage("row 3"), "m", 3)
    assert keyring.loads(record, "m", 3) == UserMessage("row 3")
    for position in (4, None):
        with pytest.raises(CorruptedMemoryError):
            keyring.loads(record, "m", position)


def test_plain_records_are_refused_unless_migrating() -> None:
    plain = dumps_message(UserMessage("old"))
    with pytest.raises(PlaintextRecordError):
        Keyring({"k": KEY}, "k").loads(plain, "m")
    migrating = Keyring({"k": KEY}, "k", read_plaintext=True)
    assert migrating.loads(plain, "m") == UserMessage("old")
    changes, current = reseal_plan(migrating, "m", enumerate([plain, migrating.dumps(UserMessage("new"), "m")]))
    assert current == 1 and [index for index, _, _ in changes] == [0]
    assert migrating.loads(changes[0][2], "m") == UserMessage("old")


def test_errors_are_serialization_errors_and_name_the_memory() -> None:
    with pytest.raises(SerializationError) as raised:
        PLAIN.loads(Keyring({"k": KEY}, "k").dumps(UserMessage("x"), "m"), "m")
    assert isinstance(raised.value, EncryptionKeyError) and raised.value.memory_id == "m"


def test_a_store_refuses_what_is_not_a_keyring_when_built() -> None:
    with pytest.raises(TypeError, match="Keyring"):
        InMemoryChatMemoryStore(encryption=KEY)  # type: ignore[arg-type]
    assert codec_of(None) is PLAIN


def test_per_tenant_primaries_and_lazy_key_lookup() -> None:
    fetched: list[str] = []

    class Vault(dict[str, bytes]):
        def __getitem__(self, key_id: str) -> bytes:
            fetched.append(key_id)
            return super().__getitem__(key_id)

    vault = Vault({"tenant-a": os.urandom(32), "tenant-b": os.urandom(32)})
    keyring = Keyring(vault, lambda memory_id: "tenant-" + memory_id.split(":")[0])
    assert record_key_id(keyring.dumps(UserMessage("x"), "a:1")) == "tenant-a"
    assert record_key_id(keyring.dumps(UserMessage("x"), "b:1")) == "tenant-b"
    with pytest.raises(EncryptionKeyError) as raised:
        keyring.dumps(UserMessage("x"), "c:1")
    assert raised.value.key_id == "tenant-c"


def test_the_langchain4j_layout_refuses_a_keyring() -> None:
    from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore

    with pytest.raises(ValueError, match="JVM"):
        LangChain4jRedisChatMemoryStore("redis://127.0.0.1:1/0", encryption=Keyring({"k": KEY}, "k"))
