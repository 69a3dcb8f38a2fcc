"""The LangChain4j Redis store's decisions without a server: versions, write plans, exact values, URLs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import assume, given

from chatmemory import ConcurrentUpdateError, SerializationError, UserMessage
from chatmemory.stores.langchain4j_redis.keys import glob_literal, memory_id_of
from chatmemory.stores.langchain4j_redis.outcomes import written_version
from chatmemory.stores.langchain4j_redis.plan import (
    EXACT_CONTENT_ATTRIBUTE,
    Planner,
    VersionBook,
    WriteIds,
    client_url,
    decode,
    digest,
    encode,
)
from serialization.strategies import message_lists


def test_a_value_read_again_keeps_its_version_and_a_write_gets_a_greater_one() -> None:
    book = VersionBook(8)
    assert book.read("m", b"") == 0
    first = book.read("m", digest(b"[1]"))
    assert book.read("m", digest(b"[1]")) == first
    written = book.written("m", digest(b"[2]"))
    assert written > first
    # Back to an earlier value: a new version all the same, never one the memory had.
    assert book.read("m", digest(b"[1]")) > written
    assert book.expected_digest("m", first) is None
    assert book.expected_digest("m", 0) == b""


def test_a_write_plan_carries_the_hash_of_the_value_read_and_its_own_write_id() -> None:
    book = VersionBook(8)
    planner = Planner(b"p:", ttl_ms=0)
    version = book.read("m", digest(b"[]"))
    plan = planner.write("m", [UserMessage("hi")], version, book)
    assert (plan.key, plan.expected_digest, plan.new_digest) == (b"p:m", digest(b"[]"), digest(plan.value))
    assert plan.script_args() == (digest(b"[]"), plan.value, plan.write_id, b"0")
    assert planner.write("m", [UserMessage("hi")], version, book).write_id != plan.write_id
    assert written_version(book, "m", plan, 1, version) > version
    with pytest.raises(ConcurrentUpdateError, match="'m'"):
        written_version(book, "m", plan, 0, version)
    with pytest.raises(ConcurrentUpdateError):
        planner.write("m", [], version, book)  # not the current version any more
    book.forget("m")
    with pytest.raises(ConcurrentUpdateError):
        planner.write("m", [], book.read("m", digest(b"[]")) + 1, book)


def test_write_ids_are_never_repeated_within_a_store_or_across_stores() -> None:
    first, second = WriteIds(), WriteIds()
    ids = [first.next() for _ in range(1000)] + [second.next() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    assert all(each.isascii() and each.isalnum() for each in ids)


@given(message_lists)
def test_every_value_decodes_to_the_messages_encoded(messages: list[object]) -> None:
    try:
        value = encode(messages)  # type: ignore[arg-type]
    except SerializationError:
        assume(False)  # a detail level LangChain4j has no name for, or the reserved attribute
        return
    assert decode(value, "m") == messages


def test_a_version_book_remembers_at_least_one_memory() -> None:
    with pytest.raises(ValueError, match="version_book_size must be >= 1"):
        VersionBook(0)
    with pytest.raises(TypeError, match="version_book_size"):
        VersionBook(None)  # type: ignore[arg-type]


def test_the_reserved_attribute_is_refused() -> None:
    with pytest.raises(SerializationError, match="reserved"):
        encode([UserMessage("x", attributes={EXACT_CONTENT_ATTRIBUTE: 1})])


def test_urls_give_the_driver_url_and_the_store_options() -> None:
    assert client_url("redis+langchain4j://h:6379/0?key_prefix=chat%3A&ttl=60&socket_timeout=2") == (
        "redis://h:6379/0?socket_timeout=2",
        {"key_prefix": "chat:", "ttl": "60"},
    )
    assert client_url("rediss+langchain4j://h/1") == ("rediss://h/1", {})


def test_keys_and_listing_helpers() -> None:
    assert glob_literal(b"a*[b]?\\") == b"a\\*\\[b\\]\\?\\\\"
    assert memory_id_of(b"p:user-1", b"p:") == "user-1"
    assert memory_id_of(b"p:\xff", b"p:") is None


@pytest.mark.parametrize("module", ["chatmemory.stores.langchain4j_redis", "chatmemory.aio.stores.langchain4j_redis"])
def test_without_the_extra_the_error_names_it(module: str) -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        f"try:\n    from {module} import LangChain4jRedisChatMemoryStore\nexcept ImportError as exc:\n    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LangChain4jRedisChatMemoryStore requires the 'redis' extra" in result.stdout
