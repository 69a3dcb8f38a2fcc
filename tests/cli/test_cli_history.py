"""``chatmemory history`` and ``trim-history`` on every backend, and the age parser."""

from __future__ import annotations

import datetime
import time

import click
import orjson
import pytest

from chatmemory import AiMessage, SystemMessage, UserMessage
from chatmemory.cli.history_commands import parse_age


def _fill(store, memory_id: str, turns: int) -> list:
    written = [SystemMessage("s")]
    for turn in range(turns):
        written.append(UserMessage(f"q{turn}") if turn % 2 == 0 else AiMessage(f"a{turn}"))
        store.update_messages(memory_id, [written[0], *written[1:][-3:]])
    return written


def test_history_shows_evicted_messages_as_json_lines(stores, run) -> None:
    url = stores.url("h", history=True)
    written = _fill(stores[url], "talk", 12)
    result = run("history", url, "talk", "--json", "--limit", "5", "--all")
    assert result.status == 0, result.err
    lines = [orjson.loads(line) for line in result.out.splitlines()]
    assert [line["message"]["text"] if "text" in line["message"] else None for line in lines][:1] == ["s"]
    assert len(lines) == len(written)
    sequences = [line["sequence"] for line in lines]
    assert sequences == sorted(set(sequences))
    assert all(datetime.datetime.fromisoformat(line["written_at"]).utcoffset() is not None for line in lines)
    assert len(stores[url].get_messages("talk")) == 4  # the window stayed bounded


def test_history_table_pages_and_says_what_follows(stores, run) -> None:
    url = stores.url("h", history=True)
    _fill(stores[url], "talk", 6)
    first = run("history", url, "talk", "--limit", "3")
    assert first.status == 0, first.err
    assert "history of 'talk': 3 entries" in first.out
    assert "q0" in first.out and "a5" not in first.out
    assert "more entries follow: --after" in first.err
    after = first.err.split("--after ")[1].split()[0]
    rest = run("history", url, "talk", "--after", after)
    assert "a5" in rest.out and "q0" not in rest.out
    assert "more entries follow" not in rest.err
    newest = run("history", url, "talk", "--reverse", "--limit", "1")
    assert "a5" in newest.out and "q4" not in newest.out


def test_history_of_an_unknown_memory_is_empty(stores, run) -> None:
    url = stores.url("h", history=True)
    result = run("history", url, "nobody")
    assert result.status == 0, result.err
    assert "0 entries" in result.out


def test_history_rejects_bad_arguments(stores, run) -> None:
    url = stores.url("h", history=True)
    assert run("history", url, "talk", "--limit", "0").status == 2
    assert run("history", url, "talk", "--after", "-1").status == 2
    assert run("history", url, "").status == 2


def test_trim_history_removes_old_entries_and_keeps_windows(stores, run) -> None:
    url = stores.url("h", history=True)
    store = stores[url]
    store.update_messages("talk", [UserMessage(f"old{index}") for index in range(5)])
    store.update_messages("talk", [UserMessage("old4")])
    # A cutoff time between the old entries and the new one, with room on both sides: a slow machine only
    # widens the gaps (an age such as "0.6s" would count from the trim, and a slow trim took "new" too).
    time.sleep(0.3)
    cutoff = datetime.datetime.now(datetime.timezone.utc).isoformat()
    time.sleep(0.3)
    store.update_messages("talk", [UserMessage("old4"), UserMessage("new")])
    refused = run("trim-history", url, "--older-than", "1s")
    assert refused.status == 2
    assert "pass --yes" in refused.err
    result = run("trim-history", url, "--older-than", cutoff, "--id", "talk", "--yes")
    assert result.status == 0, result.err
    removed = int(result.out.split("removed ")[1].split()[0])
    assert removed >= 4
    assert store.get_messages("talk") == [UserMessage("old4"), UserMessage("new")]
    remaining = [entry.message for entry in store.history("talk").entries]
    assert remaining[-1] == UserMessage("new")
    assert all(message in (UserMessage("old4"), UserMessage("new")) for message in remaining)
    assert run("trim-history", url, "--older-than", "soon", "--yes").status == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", datetime.timedelta(days=30)),
        ("12h", datetime.timedelta(hours=12)),
        ("90m", datetime.timedelta(minutes=90)),
        ("1.5s", datetime.timedelta(seconds=1.5)),
        ("2w", datetime.timedelta(weeks=2)),
        ("2026-01-31T00:00:00Z", datetime.datetime(2026, 1, 31, tzinfo=datetime.timezone.utc)),
    ],
)
def test_parse_age(text: str, expected: object) -> None:
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "30", "30y", "-1d", "2026-01-31T00:00:00"])
def test_parse_age_refuses(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_age(text)
