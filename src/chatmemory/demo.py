"""``chatmemory demo``: a scripted travel-assistant conversation through a small window memory.

Nothing here calls a model or the network. The assistant's answers and its two tools (weather and
currency) are canned, so every run prints the same windows: old turns leave, the system message stays,
and a tool call leaves together with its result. With ``summarize=True`` the memory is a
:class:`~chatmemory.SummarizingChatMemory` whose summarizer is a toy (:func:`toy_summarizer`: notes taken
from the evicted messages, no model), so what leaves the window is kept as a summary after the system
message.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from chatmemory.core.memory import MessageWindowChatMemory
from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.store import ChatMemoryStore
from chatmemory.core.summarizing_memory import SummarizingChatMemory
from chatmemory.core.summary import is_summary, summary_text
from chatmemory.stores.memory import InMemoryChatMemoryStore

__all__ = [
    "DEFAULT_MAX_MESSAGES",
    "DEFAULT_MEMORY_ID",
    "DEFAULT_STORE_URL",
    "describe_message",
    "run_demo",
    "toy_summarizer",
]


def _default_store_url() -> str:
    import importlib.util

    # With the sql extra installed the demo keeps its memory in a file, so a second run continues the first.
    if importlib.util.find_spec("sqlalchemy") is not None:
        return "sqlite:///chatmemory-demo.sqlite3"
    return "memory://"


DEFAULT_STORE_URL = _default_store_url()
"""Where the demo keeps its memory unless ``--store`` says otherwise: a SQLite file in the current
directory when the ``sql`` extra is installed, else this process's memory."""
DEFAULT_MEMORY_ID = "demo"
DEFAULT_MAX_MESSAGES = 6

SYSTEM_PROMPT = "You are a concise travel assistant. Use the tools for weather and money; never guess."

_WEATHER = {
    ("Lisbon", "Friday"): "sunny, 24 C, light wind",
    ("Porto", "Sunday"): "showers, 17 C, bring an umbrella",
    ("Lisbon", "Monday"): "cloudy, 20 C",
}
_EUR_PER = {"USD": 0.92, "GBP": 1.17}


def _weather(arguments: dict[str, str]) -> str:
    return _WEATHER.get((arguments["city"], arguments["day"]), "no forecast available")


def _convert(arguments: dict[str, str]) -> str:
    amount = float(arguments["amount"])
    return f"{amount:g} {arguments['from']} = {amount * _EUR_PER[arguments['from']]:.2f} EUR"


_TOOLS: dict[str, Callable[[dict[str, str]], str]] = {"get_weather": _weather, "convert_currency": _convert}


@dataclass(frozen=True)
class _Turn:
    user: str
    calls: tuple[tuple[str, dict[str, str]], ...]
    answer: str


_SCRIPT = (
    _Turn(
        "I'm flying to Lisbon on Friday. What will the weather be like?",
        (("get_weather", {"city": "Lisbon", "day": "Friday"}),),
        "Friday in Lisbon looks sunny, around 24 C with a light wind.",
    ),
    _Turn(
        "How much is 200 USD in euros?",
        (("convert_currency", {"amount": "200", "from": "USD"}),),
        "200 USD is about 184 EUR.",
    ),
    _Turn(
        "On Sunday I take the train to Porto. Weather there, and 50 GBP in euros?",
        (("get_weather", {"city": "Porto", "day": "Sunday"}), ("convert_currency", {"amount": "50", "from": "GBP"})),
        "Porto on Sunday: showers and 17 C, so pack an umbrella. 50 GBP is about 58.50 EUR.",
    ),
    _Turn(
        "Thanks! Any tips for the flight back on Monday?",
        (("get_weather", {"city": "Lisbon", "day": "Monday"}),),
        "Monday in Lisbon is cloudy and mild; leave early for the airport.",
    ),
    _Turn(
        "What did I ask you first?",
        (),
        "That part of our chat has left my memory window; I can still see your plans for Monday.",
    ),
)


_NOTES_KEPT = 6


def toy_summarizer(previous: str | None, evicted: list[ChatMessage]) -> str:
    """A summarizer without a model: one note per question and per tool result, the first note and the last few.

    Good enough to show where a summary lives and how it grows; a real one would ask a model.
    """
    notes = previous.split(" | ") if previous else []
    for message in evicted:
        if isinstance(message, UserMessage) and message.has_single_text():
            notes.append("asked: " + textwrap.shorten(message.text, width=60, placeholder="..."))
        elif isinstance(message, ToolExecutionResultMessage):
            notes.append(f"{message.tool_name}: {message.text}")
    if len(notes) > _NOTES_KEPT:
        notes = notes[:1] + notes[-(_NOTES_KEPT - 1) :]
    return " | ".join(notes)


_SUMMARY_ANSWER = "Your first question is in my summary of our earlier chat: the weather in Lisbon on Friday."


def describe_message(message: ChatMessage, width: int) -> tuple[str, str]:
    """(role, one-line summary shortened to ``width`` characters) of a message, as the demo and ``show`` print it."""
    if is_summary(message):
        assert isinstance(message, UserMessage)
        role, text = "summary", summary_text(message)
    elif isinstance(message, SystemMessage):
        role, text = "system", message.text
    elif isinstance(message, UserMessage):
        role = "user"
        text = message.text if message.has_single_text() else f"[{len(message.contents)} parts]"
    elif isinstance(message, AiMessage):
        if message.tool_execution_requests:
            role = "ai -> tools"
            text = "; ".join(f"{r.name}({_compact(r.arguments)}) [{r.id}]" for r in message.tool_execution_requests)
        else:
            role, text = "ai", message.text or ""
    elif isinstance(message, ToolExecutionResultMessage):
        role = "tool result"
        text = f"{message.tool_name} [{message.id}]: {message.text}"
    else:
        assert isinstance(message, CustomMessage)
        role, text = "custom", json.dumps(message.attributes)
    return role, textwrap.shorten(text, width=width, placeholder="...")


def _compact(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(parsed, dict):
        return ", ".join(f"{key}={value}" for key, value in parsed.items())
    return arguments


def _print_window(
    out: TextIO, window: Sequence[ChatMessage], evicted: Sequence[ChatMessage], limit: int, gone: str = "evicted"
) -> None:
    width = 100
    out.write(f"  {'#':>3}  {'role':<12} content   ({len(window)}/{limit} messages)\n")
    for index, message in enumerate(window):
        role, text = describe_message(message, width)
        out.write(f"  {index:>3}  {role:<12} {text}\n")
    for message in evicted:
        role, text = describe_message(message, width - 10)
        out.write(f"  {'x':>3}  {role:<12} {text}  <- {gone}\n")
    together = [
        request.id
        for message in evicted
        if isinstance(message, AiMessage)
        for request in message.tool_execution_requests
        if any(isinstance(gone, ToolExecutionResultMessage) and gone.id == request.id for gone in evicted)
    ]
    if together:
        out.write(f"       tool calls evicted together with their results: {', '.join(map(str, together))}\n")


def run_demo(
    store: ChatMemoryStore,
    *,
    memory_id: str = DEFAULT_MEMORY_ID,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    summarize: bool = False,
    out: TextIO,
) -> int:
    """Play the scripted conversation into ``store`` and print the window after every turn.

    Args:
        store: where the memory lives.
        memory_id: the memory.
        max_messages: the window size (the summary, with ``summarize``, takes one place).
        summarize: keep what leaves the window in a summary (:func:`toy_summarizer`, no model).
        out: where to print.

    Returns:
        The exit status (0).
    """
    evicted: list[ChatMessage] = []

    def on_evict(memory_id: str, messages: list[ChatMessage]) -> None:
        evicted.extend(messages)

    memory: MessageWindowChatMemory | SummarizingChatMemory
    if summarize:
        memory = SummarizingChatMemory(
            memory_id,
            max_messages=max_messages,
            summarizer=toy_summarizer,
            store=store,
            always_keep_system_message_first=True,
            on_evict=on_evict,
        )
    else:
        memory = MessageWindowChatMemory(
            memory_id, max_messages=max_messages, store=store, always_keep_system_message_first=True, on_evict=on_evict
        )
    existing = memory.messages()
    kind = ", summarizing what leaves it" if summarize else ""
    out.write(f"chatmemory demo: memory {memory.id!r}, window of {max_messages} messages{kind}, store {store!r}\n")
    # Runs go on from what is stored, so a second run against a persistent store continues the first.
    calls_so_far = sum(len(m.tool_execution_requests) for m in existing if isinstance(m, AiMessage))
    if existing:
        out.write(f"Continuing an earlier conversation: {len(existing)} messages already in the store.\n")
        _print_window(out, existing, [], max_messages)
    out.write("\n")
    memory.add(SystemMessage(SYSTEM_PROMPT))
    call_number = calls_so_far
    total_evicted = 0
    for turn_number, turn in enumerate(_SCRIPT, start=1):
        # on_evict collects what each write evicted, once the write is done.
        evicted.clear()

        def add(message: ChatMessage) -> None:
            memory.add(message)

        add(UserMessage(turn.user))
        if turn.calls:
            requests = []
            for name, arguments in turn.calls:
                call_number += 1
                requests.append(ToolExecutionRequest(f"call_{call_number}", name, json.dumps(arguments)))
            add(AiMessage(None, requests))
            for request, (name, arguments) in zip(requests, turn.calls, strict=True):
                add(ToolExecutionResultMessage(request.id, name, _TOOLS[name](arguments)))
        last = turn_number == len(_SCRIPT)
        add(AiMessage(_SUMMARY_ANSWER if summarize and last else turn.answer))
        after = memory.messages()
        total_evicted += len(evicted)
        out.write(f"Turn {turn_number}: {turn.user}\n")
        _print_window(out, after, evicted, max_messages, "summarized" if summarize else "evicted")
        out.write("\n")
    follow_up = (
        "Run again to continue this conversation."
        if not isinstance(store, InMemoryChatMemoryStore)
        else "Run again with a persistent --store (e.g. sqlite:///chat.db) to continue this conversation."
    )
    if summarize:
        out.write(
            f"Done: {total_evicted} messages left the window into the summary; the system message stayed, and a "
            f"tool call was summarized together with its results. {follow_up}\n"
        )
    else:
        out.write(
            f"Done: {total_evicted} messages evicted; the system message stayed, and no tool result outlived "
            f"its call. {follow_up}\n"
        )
    return 0
