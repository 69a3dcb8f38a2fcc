"""Property tests: window invariants over arbitrary conversations, against a reference model.

The reference model is written here from the *Window rules* of docs/semantics.md, independently of
``chatmemory.core.window``: it finds each tool result's request by looking backwards from the result,
where the library looks forwards from the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

EXAMPLES = 200
PROPERTY_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def token_weight(message: ChatMessage) -> int:
    """A deterministic weight that differs between messages: 1 + a tenth of the text length."""
    if isinstance(message, (SystemMessage, ToolExecutionResultMessage)):
        text = message.text
    elif isinstance(message, UserMessage):
        text = message.text
    elif isinstance(message, AiMessage):
        text = (message.text or "") + "".join(r.arguments for r in message.tool_execution_requests)
    else:
        text = str(message.attributes)
    return 1 + len(text) // 10


class WeightEstimator:
    def estimate_message(self, message: ChatMessage) -> int:
        return token_weight(message)


# ------------------------------------------------------------------------------------------- generation


@dataclass
class Conversation:
    """Batches of messages, each passed to one ``add`` call."""

    batches: list[list[ChatMessage]] = field(default_factory=list)


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    reuse_ids = draw(st.booleans())  # providers that number calls per turn ("call_0" every turn)
    system_texts = ["You are terse.", "You are a travel assistant.", "Reply in French, please, always."]
    pending: list[tuple[str, str]] = []  # (call id, tool name) awaiting a result
    counter = 0
    conversation = Conversation()

    def text(prefix: str) -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}{counter} " + "x" * draw(st.integers(0, 40))

    for _ in range(draw(st.integers(1, 30))):
        batch: list[ChatMessage] = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["user", "user", "ai", "tool_call", "result", "result", "system", "custom"]))
            if kind == "user":
                batch.append(UserMessage(text("u")))
            elif kind == "ai":
                batch.append(AiMessage(text("a")))
            elif kind == "custom":
                batch.append(CustomMessage({"note": text("c")}))
            elif kind == "system":
                batch.append(SystemMessage(draw(st.sampled_from(system_texts))))
            elif kind == "tool_call":
                if reuse_ids and pending:
                    continue  # such providers get every result before the model speaks again
                count = draw(st.integers(1, 3))
                if draw(st.integers(0, 5)) == 0:
                    # Requests without ids: their results must follow directly (positional matching).
                    requests = [ToolExecutionRequest(None, f"tool{i}", text('{"q": "') + '"}') for i in range(count)]
                    batch.append(AiMessage(None, requests))
                    batch.extend(ToolExecutionResultMessage(None, r.name, text("r")) for r in requests)
                    continue
                ids = [f"call_{i}" if reuse_ids else f"c{counter}_{i}" for i in range(count)]
                requests = [ToolExecutionRequest(i, f"tool_{i}", text('{"q": "') + '"}') for i in ids]
                batch.append(AiMessage(draw(st.none() | st.just("let me check")), requests))
                pending.extend((r.id, r.name) for r in requests if r.id is not None)
            elif kind == "result" and pending:
                call_id, name = pending.pop(draw(st.integers(0, len(pending) - 1)))
                batch.append(ToolExecutionResultMessage(call_id, name, text("r"), is_error=draw(st.booleans())))
        if batch:
            conversation.batches.append(batch)
    return conversation


# -------------------------------------------------------------------------------------- reference model


class ReferenceWindow:
    """The window as the *Window rules* of docs/semantics.md describe it, kept in a plain list."""

    def __init__(self, limit: int, weight: Callable[[ChatMessage], int], system_first: bool) -> None:
        self.limit = limit
        self.weight = weight
        self.system_first = system_first
        self.window: list[ChatMessage] = []

    def add(self, batch: Sequence[ChatMessage]) -> None:
        for message in batch:
            if isinstance(message, SystemMessage):
                if message in self.window:
                    continue
                self.window = [m for m in self.window if not isinstance(m, SystemMessage)]
                if self.system_first:
                    self.window.insert(0, message)
                    continue
            self.window.append(message)
        self.fit()

    def fit(self) -> None:
        self.drop_orphans()
        while sum(self.weight(m) for m in self.window) > self.limit:
            others = [i for i, m in enumerate(self.window) if not isinstance(m, SystemMessage)]
            if not others:
                return
            oldest = others[0]
            group = {oldest} | {j for j in range(len(self.window)) if self.owner(j) == oldest}
            self.window = [m for i, m in enumerate(self.window) if i not in group]
            self.drop_orphans()

    def owner(self, index: int) -> int | None:
        """The index of the AI message whose request the result at ``index`` answers."""
        message = self.window[index]
        if not isinstance(message, ToolExecutionResultMessage):
            return None
        if message.id is not None:
            for back in range(index - 1, -1, -1):
                earlier = self.window[back]
                if isinstance(earlier, AiMessage) and any(r.id == message.id for r in earlier.tool_execution_requests):
                    return back
            return None
        back = index - 1
        while back >= 0 and isinstance(self.window[back], ToolExecutionResultMessage):
            back -= 1
        before = self.window[back] if back >= 0 else None
        if isinstance(before, AiMessage) and any(r.id is None for r in before.tool_execution_requests):
            return back
        return None

    def drop_orphans(self) -> None:
        """Drop results at the head, and results whose id no earlier request in the window asked for."""
        while True:
            head = next((i for i, m in enumerate(self.window) if not isinstance(m, SystemMessage)), None)
            orphan = next(
                (
                    i
                    for i, m in enumerate(self.window)
                    if isinstance(m, ToolExecutionResultMessage)
                    and (i == head or (m.id is not None and self.owner(i) is None))
                ),
                None,
            )
            if orphan is None:
                return
            del self.window[orphan]


# ---------------------------------------------------------------------------------------------- checks


def check_invariants(
    window: list[ChatMessage], limit: int, weight: Callable[[ChatMessage], int], latest_system: SystemMessage | None
) -> None:
    systems = [m for m in window if isinstance(m, SystemMessage)]
    assert len(systems) <= 1
    if latest_system is not None:
        assert systems == [latest_system]
    if sum(weight(m) for m in window) > limit:
        assert window == systems, "over the limit with more than the system message"
    head = next((m for m in window if not isinstance(m, SystemMessage)), None)
    assert not isinstance(head, ToolExecutionResultMessage), "a tool result heads the window"
    for index, message in enumerate(window):
        if isinstance(message, ToolExecutionResultMessage) and message.id is not None:
            assert any(
                isinstance(m, AiMessage) and any(r.id == message.id for r in m.tool_execution_requests)
                for m in window[:index]
            ), f"tool result {message.id} without its request"


def run(
    memory: Any,
    store: InMemoryChatMemoryStore,
    conversation: Conversation,
    limit: int,
    weight: Callable[[ChatMessage], int],
    system_first: bool,
) -> None:
    model = ReferenceWindow(limit, weight, system_first)
    latest_system: SystemMessage | None = None
    for batch in conversation.batches:
        memory.add(*batch)
        model.add(batch)
        for message in batch:
            if isinstance(message, SystemMessage):
                latest_system = message
        window = memory.messages()
        assert window == store.get_messages(memory.id), "the window is not the stored state"
        assert window == model.window
        check_invariants(window, limit, weight, latest_system)
        if system_first and latest_system is not None:
            assert window[0] == latest_system


@PROPERTY_SETTINGS
@given(conversation=conversations(), limit=st.integers(1, 8), system_first=st.booleans())
def test_message_window_properties(conversation: Conversation, limit: int, system_first: bool) -> None:
    store = InMemoryChatMemoryStore()
    memory = MessageWindowChatMemory(
        "p", max_messages=limit, store=store, always_keep_system_message_first=system_first
    )
    run(memory, store, conversation, limit, lambda _: 1, system_first)


@PROPERTY_SETTINGS
@given(conversation=conversations(), limit=st.integers(1, 40), system_first=st.booleans())
def test_token_window_properties(conversation: Conversation, limit: int, system_first: bool) -> None:
    store = InMemoryChatMemoryStore()
    memory = TokenWindowChatMemory(
        "p",
        max_tokens=limit,
        token_count_estimator=WeightEstimator(),
        store=store,
        always_keep_system_message_first=system_first,
    )
    run(memory, store, conversation, limit, token_weight, system_first)


@PROPERTY_SETTINGS
@given(conversation=conversations(), limit=st.integers(1, 8), system_first=st.booleans())
def test_set_of_a_whole_conversation_fits_like_the_model(
    conversation: Conversation, limit: int, system_first: bool
) -> None:
    messages: list[ChatMessage] = []
    latest: SystemMessage | None = None
    for batch in conversation.batches:
        for message in batch:
            if isinstance(message, SystemMessage):
                latest = message
            else:
                messages.append(message)
    if latest is not None:
        messages.insert(len(messages) // 2, latest)
    memory = MessageWindowChatMemory("p", max_messages=limit, always_keep_system_message_first=system_first)
    memory.set(messages)
    model = ReferenceWindow(limit, lambda _: 1, system_first)
    model.window = list(messages)
    if system_first and latest is not None:
        model.window.remove(latest)
        model.window.insert(0, latest)
    model.fit()
    assert memory.messages() == model.window
    check_invariants(memory.messages(), limit, lambda _: 1, latest)
