"""A keyring binds each SQL row's record to its memory and sequence: a payload moved to another row does not open."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select, update

from chatmemory import CorruptedMemoryError, MessageWindowChatMemory, UserMessage
from chatmemory.encryption import Keyring
from support.backends.sqlite import SQLBackend


def test_payloads_swapped_between_rows_do_not_open(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store(encryption=Keyring({"k": os.urandom(32)}, "k"))
    try:
        memory = MessageWindowChatMemory("m", store=store, max_messages=10)
        memory.add(UserMessage("first, to the landlord"), UserMessage("second, to the bank"))
        assert store.get_messages("m") == [UserMessage("first, to the landlord"), UserMessage("second, to the bank")]
        # The store's own table definition (its id column type encodes ids), to change rows as someone with
        # write access to the database would.
        messages = store._tables.messages
        with store.engine.begin() as connection:
            rows = connection.execute(
                select(messages.c.seq, messages.c.payload).where(messages.c.memory_id == "m").order_by(messages.c.seq)
            ).all()
            (first_seq, first), (second_seq, second) = rows
            for seq, payload in ((first_seq, second), (second_seq, first)):
                where = (messages.c.memory_id == "m") & (messages.c.seq == seq)
                connection.execute(update(messages).where(where).values(payload=payload))
        fresh = sql_backend.make_store(encryption=store.encryption, table_prefix=store.table_prefix)
        try:
            with pytest.raises(CorruptedMemoryError) as raised:
                fresh.get_messages("m")
            assert raised.value.memory_id == "m"
        finally:
            fresh.close()
    finally:
        sql_backend.close_store(store)
