"""The MongoDB store's pure write planning: which message is held aside, and when a turn is one $push."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatmemory import AiMessage, ChatMessage, SystemMessage, UserMessage
from chatmemory.stores.mongodb_layout import MongoLayout, MongoWritePlan, plan_layout, plan_write


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


def test_the_first_system_message_is_held_aside_with_its_position() -> None:
    system = SystemMessage("be brief")
    layout = plan_layout([UserMessage("0"), system, UserMessage("1"), SystemMessage("second")])
    assert layout.system == system
    assert layout.system_at == 1
    assert layout.array == (UserMessage("0"), UserMessage("1"), SystemMessage("second"))
    assert layout.messages() == [UserMessage("0"), system, UserMessage("1"), SystemMessage("second")]


def test_without_a_system_message_everything_is_in_the_array() -> None:
    layout = plan_layout(_users(1, 2))
    assert layout == MongoLayout(tuple(_users(1, 2)))
    assert layout.messages() == _users(1, 2)
    assert plan_layout([]).messages() == []


def test_evicting_right_after_a_system_message_kept_first_is_a_head_trim() -> None:
    system = SystemMessage("s")
    old = plan_layout([system, *_users(1, 2, 3, 4)])
    new = plan_layout([system, *_users(3, 4, 5)])
    plan = plan_write(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length, plan.system_changed) == (2, tuple(_users(5)), 3, False)


def test_a_system_message_in_place_moving_towards_the_head_is_a_head_trim() -> None:
    # Without always_keep_system_message_first the system message sits where it was added, and each
    # eviction before it moves it one position towards the head.
    system = SystemMessage("s")
    old = plan_layout([*_users(1, 2), system, *_users(3)])
    new = plan_layout([*_users(2), system, *_users(3, 4)])
    plan = plan_write(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (1, tuple(_users(4)), False)
    assert new.system_at == 1


def test_a_new_system_message_is_a_field_change_not_a_rewrite() -> None:
    old = plan_layout([SystemMessage("old"), *_users(1, 2)])
    new = plan_layout([*_users(1, 2), SystemMessage("new")])
    plan = plan_write(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, (), True)
    assert (new.system, new.system_at) == (SystemMessage("new"), 2)


def test_dropping_the_system_message_is_a_field_change() -> None:
    plan = plan_write(plan_layout([SystemMessage("s"), *_users(1)]), plan_layout(_users(1, 2)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, tuple(_users(2)), True)


def test_evicting_a_tool_call_and_its_result_from_the_head_is_a_head_trim() -> None:
    call = AiMessage("calling")
    old = plan_layout([UserMessage("q"), call, UserMessage("r")])
    plan = plan_write(old, plan_layout([UserMessage("r"), UserMessage("next")]))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length) == (2, (UserMessage("next"),), 2)


def test_deleting_from_the_middle_needs_a_full_write() -> None:
    assert plan_write(plan_layout(_users(1, 2, 3)), plan_layout(_users(1, 3, 4))) is None


def test_nothing_kept_is_still_a_head_trim_of_everything() -> None:
    plan = plan_write(plan_layout(_users(1, 2)), plan_layout(_users(7)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length) == (2, tuple(_users(7)), 1)


def test_an_unchanged_list_writes_no_messages() -> None:
    plan = plan_write(plan_layout(_users(1, 2)), plan_layout(_users(1, 2)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, (), False)


def _apply(old: MongoLayout, plan: MongoWritePlan, new: MongoLayout) -> list[ChatMessage]:
    """What the server does with the update: $push $each, then $slice to the last n; $set the system."""
    array = [*old.array, *plan.appended]
    if plan.head_trim:
        array = array[-plan.array_length :] if plan.array_length else []
    return MongoLayout(tuple(array), new.system, new.system_at).messages()


_message = st.one_of(
    st.integers(0, 6).map(lambda n: UserMessage(str(n))),
    st.sampled_from([SystemMessage("a"), SystemMessage("b")]),
)


@given(st.lists(_message, max_size=8), st.lists(_message, max_size=8))
def test_an_in_place_plan_applied_as_the_server_would_gives_the_new_list(
    old_messages: list[ChatMessage], new_messages: list[ChatMessage]
) -> None:
    old, new = plan_layout(old_messages), plan_layout(new_messages)
    assert new.messages() == new_messages
    plan = plan_write(old, new)
    if plan is not None:
        assert _apply(old, plan, new) == new_messages


@given(
    st.lists(st.integers(0, 50), max_size=10),
    st.integers(0, 10),
    st.lists(st.integers(51, 99), max_size=4),
    st.booleans(),
)
def test_every_window_turn_is_in_place(window: list[int], evicted: int, added: list[int], system_first: bool) -> None:
    head = [SystemMessage("s")] if system_first else []
    old = [*head, *_users(*window)]
    new = [*head, *_users(*window[evicted:]), *_users(*added)]
    plan = plan_write(plan_layout(old), plan_layout(new))
    assert plan is not None
    assert plan.head_trim == min(evicted, len(window))
    assert _apply(plan_layout(old), plan, plan_layout(new)) == new
