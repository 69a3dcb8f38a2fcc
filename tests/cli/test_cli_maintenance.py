"""``chatmemory delete``, ``purge-expired`` and ``migrate`` on every backend (migrate: the SQL ones)."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_results import run_main

from chatmemory import SupportsExpiryPurge, SystemMessage, UserMessage
from chatmemory.memory_times import SupportsExpiryAt

WINDOW = [SystemMessage("s"), UserMessage("u")]


def test_delete_with_yes(stores, run) -> None:
    url = stores.url("a")
    for memory_id in ("a", "b", "keep"):
        stores[url].update_messages(memory_id, WINDOW)
    result = run("delete", url, "a", "b", "nobody", "--yes")
    assert result.status == 0, result.err
    assert "2 deleted, 1 did not exist" in result.err
    assert stores[url].get_messages("a") == []
    assert stores[url].get_messages("keep") == WINDOW


def test_delete_asks_unless_yes(stores, run, monkeypatch: pytest.MonkeyPatch) -> None:
    url = stores.url("a")
    stores[url].update_messages("a", WINDOW)
    # Not a terminal: refuse rather than hang or guess.
    refused = run("delete", url, "a")
    assert refused.status == 2
    assert "pass --yes" in refused.err
    assert stores[url].get_messages("a") == WINDOW
    # A terminal: ask, and take the answer.
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    asked: list[str] = []
    monkeypatch.setattr("click.termui.visible_prompt_func", lambda prompt: asked.append(prompt) or "n")
    declined = run("delete", url, "a")
    assert declined.status == 1
    assert "Delete 1 memories ('a')" in asked[0]
    assert stores[url].get_messages("a") == WINDOW
    monkeypatch.setattr("click.termui.visible_prompt_func", lambda prompt: "y")
    assert run("delete", url, "a").status == 0
    assert stores[url].get_messages("a") == []
    assert run("delete", url).status == 2  # no ids: usage


def wait_until(condition: Callable[[], bool], what: str, deadline: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` only after ``deadline`` seconds (a loaded machine)."""
    give_up = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < give_up, f"{what} did not happen within {deadline} s"
        time.sleep(0.05)


def test_purge_expired(stores, run) -> None:
    url = stores.url("a", ttl=0.5)
    store = stores[url]
    assert isinstance(store, SupportsExpiryAt)
    store.update_messages("old", WINDOW)
    store.update_messages("fresh", WINDOW)
    # "fresh" must outlive the purge however slow the machine is: its expiry is an hour out, not 0.5 s.
    store.expire_at("fresh", datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    wait_until(lambda: store.get_messages("old") == [], "'old' expiring by the store's ttl")
    result = run("purge-expired", url, "--batch-size", "10")
    assert result.status == 0, result.err
    if isinstance(store, SupportsExpiryPurge):
        assert "1 expired memories deleted" in result.err
    else:
        assert "removes expired memories by itself" in result.err
    assert store.get_messages("old") == []
    assert store.get_messages("fresh") == WINDOW
    assert run("purge-expired", url, "--batch-size", "0").status == 2


@pytest.mark.sqlite
def test_migrate_a_sqlite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    first = run_main(["migrate", url], capsys)
    assert first.status == 0, first.err
    assert "schema migrated from empty to" in first.out
    again = run_main(["migrate", url, "--table-prefix", "chatmemory_"], capsys)
    assert "already" in again.out


def test_migrate_on_each_sql_backend(sql_backend, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = sql_backend.fresh_prefix()
    try:
        first = run_main(["migrate", sql_backend.url, "--table-prefix", prefix], capsys)
        assert first.status == 0, first.err
        assert "schema migrated from empty to" in first.out
        assert "already at" in run_main(["migrate", sql_backend.url, "--table-prefix", prefix], capsys).out
    finally:
        from chatmemory.stores.sql import SQLChatMemoryStore

        with SQLChatMemoryStore(sql_backend.url, table_prefix=prefix) as store:
            store.drop_schema()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0 is a redis store; migrations are for SQL databases"),
        ("mongodb://h/", "is a mongodb store"),
        ("memory://", "is a memory store"),
    ],
)
def test_migrate_a_non_sql_url_says_so_in_one_line(url: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(["migrate", url], capsys)
    assert result.status == 2
    assert says in result.err
    assert len(result.err.splitlines()) == 1
    unknown = run_main(["migrate", "nosuch://x"], capsys)
    assert unknown.status == 2
    assert unknown.err.startswith("chatmemory migrate: no chatmemory store for URL scheme 'nosuch'")
    assert len(unknown.err.splitlines()) == 1


def test_migrate_without_a_driver_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in [name for name in sys.modules if name == "psycopg" or name.startswith("psycopg.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = run_main(["migrate", "postgresql+psycopg://user:secret@127.0.0.1:1/db"], capsys)
    assert result.status == 2
    assert result.err.strip().startswith(
        "chatmemory migrate: the database driver 'psycopg' for postgresql+psycopg://user:***@127.0.0.1:1/db "
        "is not installed: pip install 'llm-window-memory[postgres]' (not on PyPI yet: pip install '.[postgres]' "
        "in a clone of the repository, or 'path/to/llm_window_memory-<version>-py3-none-any.whl[postgres]' for a "
        "built wheel; or its packages: pip install "
    )
    assert "'psycopg[binary]>=3.1'" in result.err


def test_migrate_without_the_migrations_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "chatmemory.migrations", None)
    result = run_main(["migrate", "sqlite:///nowhere.db"], capsys)
    assert result.status == 2
    assert "migrations are not available" in result.err
    assert "pip install 'llm-window-memory[sql]'" in result.err
