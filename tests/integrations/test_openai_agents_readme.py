"""The example of docs/integration-openai-agents.md runs as written, with the network mocked."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import uuid
from pathlib import Path

import pytest
from agents import set_default_openai_client
from agents.models import _openai_shared

from chatmemory import aio
from integrations.openai_agents_transport import ScriptedResponses, call, say

README = Path(__file__).parents[2] / "docs" / "integration-openai-agents.md"


def _section_code() -> str:
    text = README.read_text(encoding="utf-8")
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL))


def _store_url() -> str:
    # The asyncio Redis store, where it is installed; else the in-memory one (same code path in the session).
    if importlib.util.find_spec("chatmemory.aio.stores.redis") is None:
        return "memory://"
    from support.backends.redis import redis_url

    return redis_url()


def test_the_example_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The example's agent names a model, so the SDK's default client answers: a scripted one, put back after.
    monkeypatch.setattr(_openai_shared, "_default_openai_client", _openai_shared.get_default_openai_client())
    script = ScriptedResponses([[call("c1", "Munich")], [say(1, "Munich: sunny.")], [say(2, "Rome: sunny too.")]])
    set_default_openai_client(script.client(), use_for_tracing=False)
    url, memory_id = _store_url(), f"readme-{uuid.uuid4().hex}"
    code = _section_code()
    assert '"redis://localhost:6379/0"' in code and '"user-42"' in code
    code = code.replace('"redis://localhost:6379/0"', repr(url)).replace('"user-42"', repr(memory_id))

    exec(compile(code, str(README), "exec"), {"__name__": "readme"})

    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "Rome: sunny too."
    assert printed[1].startswith("[{") and "Rome: sunny too." in printed[1]
    last = script.requests[-1]["input"]
    assert [item.get("type", "message") for item in last] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    if url != "memory://":
        asyncio.run(_delete(url, memory_id))


async def _delete(url: str, memory_id: str) -> None:
    async with aio.open_store(url) as store:
        await store.delete_messages(memory_id)
