"""The sequence diff: the write plan stores execute, checked on shapes and as a property."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import SystemMessage, UserMessage
from chatmemory.core.window import diff_messages, window_shift

EXAMPLES = 200


def u(text: str) -> UserMessage:
    return UserMessage(text)


def test_head_trim_and_append() -> None:
    old = [u("1"), u("2"), u("3"), u("4")]
    plan = diff_messages(old, [u("3"), u("4"), u("5")])
    assert plan.kept == (2, 3)
    assert plan.deleted == (0, 1)
    assert plan.appended == (u("5"),)
    assert plan.head_trim == 2
    assert plan.deleted_span == 2
    assert not plan.is_rewrite
    assert not plan.unchanged


def test_system_first_trim_deletes_positions_after_it() -> None:
    old = [SystemMessage("s"), u("1"), u("2"), u("3"), u("4")]
    plan = diff_messages(old, [SystemMessage("s"), u("3"), u("4"), u("5")])
    assert plan.kept == (0, 3, 4)
    assert plan.deleted == (1, 2)
    assert plan.head_trim is None
    assert plan.deleted_span == 3
    assert plan.appended == (u("5"),)


def test_new_system_message_put_first_is_a_rewrite() -> None:
    old = [SystemMessage("old"), u("1"), u("2")]
    plan = diff_messages(old, [SystemMessage("new"), u("1"), u("2")])
    assert plan.is_rewrite
    assert plan.kept == ()
    assert plan.deleted == (0, 1, 2)
    assert plan.appended == (SystemMessage("new"), u("1"), u("2"))


def test_unchanged() -> None:
    old = [u("1"), u("2")]
    plan = diff_messages(old, [u("1"), u("2")])
    assert plan.unchanged
    assert plan.kept == (0, 1)
    assert plan.head_trim == 0
    assert plan.deleted_span == 0
    assert diff_messages([], []).unchanged
    assert not diff_messages([], []).is_rewrite


def test_from_empty_is_append_not_rewrite() -> None:
    plan = diff_messages([], [u("1")])
    assert not plan.is_rewrite
    assert plan.appended == (u("1"),)


def test_everything_deleted() -> None:
    plan = diff_messages([u("1"), u("2")], [])
    assert plan.deleted == (0, 1)
    assert plan.head_trim == 2
    assert plan.is_rewrite


def test_duplicates_prefer_deleting_at_the_head() -> None:
    old = [u("a"), u("a"), u("a")]
    plan = diff_messages(old, [u("a"), u("a"), u("b")])
    assert plan.kept == (1, 2)
    assert plan.deleted == (0,)
    assert plan.head_trim == 1
    plan = diff_messages([u("a"), u("b"), u("a")], [u("a"), u("c")])
    assert plan.kept == (2,)
    assert plan.head_trim == 2


def test_equal_values_match_across_objects() -> None:
    plan = diff_messages([UserMessage("x", attributes={"k": [1]})], [UserMessage("x", attributes={"k": [1]})])
    assert plan.unchanged
    assert not diff_messages([UserMessage("x", attributes={"k": 1})], [UserMessage("x", attributes={"k": True})]).kept


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    old=st.lists(st.sampled_from("abcde"), max_size=12),
    new=st.lists(st.sampled_from("abcdef"), max_size=12),
)
def test_plan_rebuilds_new_and_partitions_old(old: list[str], new: list[str]) -> None:
    old_messages = [u(text) for text in old]
    new_messages = [u(text) for text in new]
    plan = diff_messages(old_messages, new_messages)
    assert [old_messages[i] for i in plan.kept] + list(plan.appended) == new_messages
    assert sorted(plan.kept + plan.deleted) == list(range(len(old)))
    assert set(plan.kept).isdisjoint(plan.deleted)
    assert list(plan.kept) == sorted(plan.kept)
    assert list(plan.deleted) == sorted(plan.deleted)
    assert plan.old_length == len(old)
    assert plan.unchanged == (old == new)
    if plan.head_trim is not None:
        assert plan.deleted == tuple(range(plan.head_trim))
    assert plan.deleted_span == (max(plan.deleted) + 1 if plan.deleted else 0)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    window=st.lists(st.sampled_from("abc"), max_size=10),
    evict=st.integers(0, 10),
    added=st.lists(st.sampled_from("abcd"), max_size=4),
)
def test_window_turns_cost_no_more_than_a_head_trim(window: list[str], evict: int, added: list[str]) -> None:
    old = [u(text) for text in window]
    new = old[evict:] + [u(text) for text in added]
    plan = diff_messages(old, new)
    assert len(plan.deleted) + len(plan.appended) <= min(evict, len(old)) + len(added)


@settings(max_examples=EXAMPLES, deadline=None)
@given(size=st.integers(0, 10), evict=st.integers(0, 10), added=st.integers(0, 4), system_first=st.booleans())
def test_window_turns_of_distinct_messages_are_trims(size: int, evict: int, added: int, system_first: bool) -> None:
    old = [u(f"old {i}") for i in range(size)]
    tail = [u(f"new {i}") for i in range(added)]
    if system_first:
        old.insert(0, SystemMessage("s"))
        new = [old[0], *old[1 + evict :], *tail]
    else:
        new = old[evict:] + tail
    plan = diff_messages(old, new)
    dropped = min(evict, size)
    assert plan.appended == tuple(tail)
    if system_first:
        assert plan.deleted == tuple(range(1, 1 + dropped))
    else:
        assert plan.head_trim == dropped


def _one_by_one(old: list[UserMessage], new: list[UserMessage]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The plan by plain equality, one element at a time: what the identity runs must reproduce."""
    position = prefix = 0
    for message in new:
        while position < len(old) and old[position] != message:
            position += 1
        if position == len(old):
            break
        position, prefix = position + 1, prefix + 1
    kept: list[int] = []
    position = len(old) - 1
    for message in reversed(new[:prefix]):
        while old[position] != message:
            position -= 1
        kept.append(position)
        position -= 1
    kept.reverse()
    return tuple(kept), tuple(i for i in range(len(old)) if i not in kept), prefix


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    old=st.lists(st.sampled_from("abc"), max_size=12),
    picks=st.lists(st.tuples(st.integers(0, 11), st.booleans()), max_size=12),
    added=st.lists(st.sampled_from("abcd"), max_size=3),
)
def test_runs_of_identical_objects_give_the_plan_of_plain_equality(
    old: list[str], picks: list[tuple[int, bool]], added: list[str]
) -> None:
    # The new list mixes the very objects of the old one with equal copies, as windows read back do.
    old_messages = [u(text) for text in old]
    chosen = sorted({index for index, _ in picks if index < len(old)})
    copies = {index for index, copy in picks if copy}
    new_messages = [u(old[i]) if i in copies else old_messages[i] for i in chosen] + [u(t) for t in added]
    plan = diff_messages(old_messages, new_messages)
    kept, deleted, prefix = _one_by_one(old_messages, new_messages)
    assert (plan.kept, plan.deleted, plan.appended) == (kept, deleted, tuple(new_messages[prefix:]))


# Few distinct messages, some equal but not the same object: repeats are where a shortcut could go wrong.
_FEW = [u("a"), u("b"), u("a"), u("c")]
_few = st.lists(st.sampled_from(_FEW), max_size=10)


@settings(max_examples=EXAMPLES, deadline=None)
@given(old=_few, evicted=st.integers(0, 10), appended=_few, other=_few, as_list=st.booleans())
def test_the_window_shift_shortcut_plans_what_plain_equality_plans(
    old: list[UserMessage], evicted: int, appended: list[UserMessage], other: list[UserMessage], as_list: bool
) -> None:
    # Shifted windows (the shortcut's case) and arbitrary ones (where it must decline or agree), as
    # tuples and as lists: the diff takes the shortcut first, and must still plan what a walk plans.
    for candidate in ((*old[evicted:], *appended), tuple(other)):
        new = list(candidate) if as_list else candidate
        kept, deleted, prefix = _one_by_one(old, list(candidate))
        plan = diff_messages(old, new)
        assert (plan.kept, plan.deleted, plan.appended) == (kept, deleted, tuple(candidate[prefix:]))
        shift = window_shift(old, new)
        if shift is not None:
            span, length = shift
            assert (kept, deleted, prefix) == (tuple(range(span, len(old))), tuple(range(span)), length)


def test_the_window_shift_shortcut_takes_the_common_turns_and_declines_the_rest() -> None:
    a, b, c, d = (u(text) for text in "abcd")
    assert window_shift((a, b, c), (b, c, d)) == (1, 2)
    assert window_shift([a, b, c], (b, c, d)) == (1, 2)
    assert window_shift((a, b, c), (a, b, c, d)) == (0, 3)
    assert window_shift((a, b, c), (c, d, a)) == (2, 1)
    # The walk keeps more here ([x, y, x] is a subsequence of [x, y, x, y]): no shortcut.
    x, y = u("x"), u("y")
    assert window_shift((x, y, x, y), (x, y, x)) is None and diff_messages([x, y, x, y], [x, y, x]).deleted == (3,)
    assert window_shift((a, b), (c,)) is None and window_shift((), (a,)) is None and window_shift((a,), ()) is None
    assert window_shift((a, b, c), (b, d)) is None
    assert window_shift((SystemMessage("s"), a, b), (SystemMessage("s"), b, c)) is None
