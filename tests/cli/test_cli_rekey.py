"""``chatmemory rekey``: killed at random points beside live writers, re-run, everything sealed under the primary."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from chatmemory import ChatMemoryStore, MessageWindowChatMemory, UserMessage
from chatmemory.encryption import Keyring, record_key_id
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.redis import RedisChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends import Backend, same_namespace
from support.backends.redis import cluster_url, redis_url

WINDOW = 4
MEMORIES = 8


def _target(backend: Backend, store: ChatMemoryStore) -> list[str]:
    """The URL and namespace flags a ``chatmemory`` process needs to reach ``store``'s memories."""
    if isinstance(store, RedisChatMemoryStore):
        url = cluster_url() if backend.name == "redis_cluster" else redis_url()
        return [url, "--key-prefix", store.key_prefix]
    if isinstance(store, SQLChatMemoryStore):
        return [backend.url, "--table-prefix", store.table_prefix]  # type: ignore[attr-defined]
    assert isinstance(store, MongoChatMemoryStore)
    return [backend.url, "--database", store.collection.database.name, "--collection", store.collection.name]  # type: ignore[attr-defined]


def _rekey(argv: list[str], kill_after: float | None) -> int | None:
    process = subprocess.Popen(
        [sys.executable, "-m", "chatmemory", "rekey", *argv, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if kill_after is None else subprocess.DEVNULL,
    )
    if kill_after is None:
        _, err = process.communicate(timeout=120)
        assert process.returncode in (0, 1), err.decode()
        return process.returncode
    time.sleep(kill_after)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    return None


def test_rekey_killed_at_random_and_rerun_beside_writers_seals_everything(backend: Backend, tmp_path: Path) -> None:
    if backend.name in ("memory", "langchain4j_redis"):
        pytest.skip("needs a store another process reaches (the LangChain4j layout has no encryption=)")
    k1, k2 = os.urandom(32), os.urandom(32)
    keyring_file = tmp_path / "keyring.json"
    keyring_file.write_bytes(
        orjson.dumps(
            {"primary": "k2", "keys": {"k1": base64.b64encode(k1).decode(), "k2": base64.b64encode(k2).decode()}}
        )
    )
    old = backend.make_store(encryption=Keyring({"k1": k1}, "k1"), history=True)
    try:
        rotated = backend.make_store(
            encryption=Keyring({"k1": k1, "k2": k2}, "k2"), history=True, **same_namespace(old)
        )
        said: dict[str, list[Any]] = {f"m{index}": [] for index in range(MEMORIES)}
        for memory_id, messages in said.items():
            memory = MessageWindowChatMemory(memory_id, store=old, max_messages=WINDOW)
            for turn in range(6):
                message = UserMessage(f"{memory_id} secret {turn}")
                memory.add(message)
                messages.append(message)
        stop = threading.Event()
        failures: list[BaseException] = []

        def write() -> None:
            turn = 0
            try:
                while not stop.is_set():
                    memory_id = f"m{turn % 3}"
                    message = UserMessage(f"{memory_id} later {turn}")
                    MessageWindowChatMemory(memory_id, store=rotated, max_messages=WINDOW).add(message)
                    said[memory_id].append(message)
                    turn += 1
                    time.sleep(0.01)
            except BaseException as exc:
                failures.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        argv = [*_target(backend, old), "--keyring", str(keyring_file)]
        chance = random.Random()
        try:
            for _ in range(3):
                _rekey(argv, kill_after=chance.uniform(0.3, 2.0))
            status = _rekey(argv, kill_after=None)
        finally:
            stop.set()
            writer.join(timeout=60)
        assert not failures, failures
        assert status in (0, 1)
        assert _rekey(argv, kill_after=None) == 0  # writers stopped: one run leaves nothing moved
        new_only = backend.make_store(encryption=Keyring({"k2": k2}, "k2"), history=True, **same_namespace(old))
        try:
            for memory_id, messages in said.items():
                assert new_only.get_messages(memory_id) == messages[-WINDOW:]
                entries = new_only.history(memory_id, limit=1000).entries  # type: ignore[attr-defined]
                assert [entry.message for entry in entries] == messages
                keys = {record_key_id(record) for record in new_only.read_raw(memory_id)}  # type: ignore[attr-defined]
                assert keys == {"k2"}
        finally:
            new_only.close()  # type: ignore[attr-defined]
        rotated.close()  # type: ignore[attr-defined]
    finally:
        backend.close_store(old)
