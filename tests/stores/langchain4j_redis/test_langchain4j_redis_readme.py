"""The example of docs/store-langchain4j.md (a memory shared with a LangChain4j service) runs as written on
the local Redis."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from chatmemory import UserMessage
from chatmemory.serialization import langchain4j
from chatmemory.stores.redis import Redis
from serialization.test_langchain4j import VECTORS
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import redis_url

pytestmark = pytest.mark.redis
README = Path(__file__).parents[3] / "docs" / "store-langchain4j.md"


def _section_code() -> str:
    text = README.read_text(encoding="utf-8")
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL))


@pytest.fixture
def prefix() -> Iterator[str]:
    made = f"readme-lc4j:{uuid.uuid4().hex[:10]}:"
    yield made
    client = Redis.from_url(redis_url())
    drop_prefix(client, made)
    client.close()


def test_the_example_reads_and_extends_a_java_memory(prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    java_json = (VECTORS / "ai_tool_calls.json").read_bytes()
    client = Redis.from_url(redis_url())
    client.set(f"{prefix}user-42", java_json)  # what the Java service wrote
    code = _section_code()
    assert '"redis://localhost:6379/0"' in code and 'key_prefix="chat-memory:"' in code
    code = code.replace('"redis://localhost:6379/0"', repr(redis_url())).replace('"chat-memory:"', repr(prefix))

    exec(compile(code, str(README), "exec"), {"__name__": "readme"})

    stored = client.get(f"{prefix}user-42")
    client.close()
    assert stored is not None
    java = langchain4j.loads(java_json)
    assert stored.decode("utf-8") == langchain4j.dumps([*java, UserMessage("Hello from Python")])
    assert orjson.loads(stored)[: len(java)] == orjson.loads(java_json)
    assert "Hello from Python" in capsys.readouterr().out
