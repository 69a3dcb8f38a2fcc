"""The MongoDB store's pure write planning: which message is held aside, and when a turn is one $push."""

from __future__ import annotations

from chatmemory import AiMessage, SystemMessage, UserMessage
from chatmemory.stores.mongodb import MongoLayout, plan_layout, plan_write


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
    assert (plan.head_trim, plan.appended, plan.array_length, plan.system_changed) == (
        2, tuple(_users(5)), 3, False)


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
