"""``chatmemory delete``, ``purge-expired``, ``rekey``, ``migrate`` and ``demo``."""

from __future__ import annotations

import os
import sys

import click

from chatmemory import telemetry
from chatmemory.cli.app import cli, namespace_flags, opened_store, quiet_flag, reports_failures
from chatmemory.cli.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Reporter
from chatmemory.cli.stores import namespace_options, store_kind, url_for_display
from chatmemory.core.errors import ChatMemoryError, SerializationError, install_hint
from chatmemory.core.store import (
    SupportsExpiryPurge,
    SupportsListing,
    SupportsReseal,
    SupportsVersioning,
    validate_memory_id,
)

__all__ = ["delete", "demo", "migrate", "purge_expired", "rekey"]

_DRIVER_EXTRAS = {"psycopg": "postgres", "psycopg2": "postgres", "pymysql": "mysql", "MySQLdb": "mysql"}
"""Driver module → the extra that installs it, for ``migrate``'s one-line message."""


@cli.command()
@click.argument("url")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@namespace_flags()
@quiet_flag
@reports_failures("delete")
def delete(url: str, ids: tuple[str, ...], yes: bool, quiet: bool, **namespace: str | None) -> int:
    """Delete memories. Asks first, unless --yes (required when stdin is not a terminal)."""
    reporter = Reporter("delete", quiet=quiet)
    try:
        memory_ids = [validate_memory_id(value) for value in ids]
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from exc
    if not yes:
        if not sys.stdin.isatty():
            reporter.error("not deleting without confirmation: stdin is not a terminal; pass --yes")
            return EXIT_USAGE
        shown = ", ".join(repr(memory_id) for memory_id in memory_ids[:5]) + (", ..." if len(memory_ids) > 5 else "")
        if not click.confirm(f"Delete {len(memory_ids)} memories ({shown}) from {url_for_display(url)}?", err=True):
            reporter.error("nothing deleted")
            return EXIT_FAILED
    deleted = missing = 0
    with opened_store(url, namespace_options(url, namespace)) as store:
        with telemetry.operation(backend=store_kind(url), name="cli.delete") as op:
            for memory_id in memory_ids:
                if isinstance(store, SupportsVersioning) and store.load(memory_id).version == 0:
                    missing += 1
                    continue
                store.delete_messages(memory_id)
                deleted += 1
            op.record(items=deleted)
    reporter.info(f"{deleted} deleted" + (f", {missing} did not exist" if missing else ""))
    return EXIT_OK


@cli.command(name="purge-expired")
@click.argument("url")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True, help="Rows per batch.")
@namespace_flags()
@quiet_flag
@reports_failures("purge-expired")
def purge_expired(url: str, batch_size: int, quiet: bool, **namespace: str | None) -> int:
    """Delete expired memories where the database does not do it by itself (SQL)."""
    reporter = Reporter("purge-expired", quiet=quiet)
    with opened_store(url, namespace_options(url, namespace)) as store:
        if not isinstance(store, SupportsExpiryPurge):
            reporter.info(
                f"{type(store).__name__} removes expired memories by itself (they already read as empty); "
                "nothing to purge"
            )
            return EXIT_OK
        with (
            reporter.progress("purging expired memories", None),
            telemetry.operation(backend=store_kind(url), name="cli.purge_expired") as op,
        ):
            purged = store.purge_expired(batch_size=batch_size)
            op.record(items=purged)
    reporter.info(f"{purged} expired memories deleted")
    return EXIT_OK


@cli.command()
@click.argument("url")
@namespace_flags()
@quiet_flag
@reports_failures("rekey")
def rekey(url: str, quiet: bool, **namespace: str | None) -> int:
    """Re-seal every memory (window and history) under the keyring's primary key.

    Safe beside live writers and resumable: each record is replaced only where it still holds what was
    read, and a re-run skips what is sealed under the primary key already. Memories that hold a record
    no key of the ring opens are reported by id and left as they are (exit status 1).
    """
    reporter = Reporter("rekey", quiet=quiet)
    options = namespace_options(url, namespace)
    if "encryption" not in options:
        raise click.UsageError("rekey needs the keyring to seal with: --keyring FILE (or $CHATMEMORY_KEYRING)")
    options["history"] = True  # a store keeping no history has none to re-seal: nothing more is read
    resealed = current = moved = memories = 0
    failed: list[str] = []
    with opened_store(url, options) as store:
        if not isinstance(store, SupportsListing) or not isinstance(store, SupportsReseal):
            reporter.error(f"{type(store).__name__} cannot list and re-seal its memories; nothing was re-sealed")
            return EXIT_USAGE
        memory_ids = list(store.memory_ids())
        with telemetry.operation(backend=store_kind(url), name="cli.rekey") as op:
            for memory_id in reporter.track(memory_ids, "re-sealing", len(memory_ids)):
                try:
                    done = store.reseal(memory_id)
                except SerializationError as exc:  # a key the ring lacks, a record that does not open
                    failed.append(memory_id)
                    reporter.error(str(exc))
                    continue
                memories += 1
                resealed, current, moved = resealed + done.resealed, current + done.current, moved + done.moved
            op.record(items=resealed)
    note = f", {moved} moved by writers meanwhile (run rekey again)" if moved else ""
    reporter.info(
        f"{memories} memories: {resealed} records re-sealed, {current} already under the primary key{note}"
        + (f"; {len(failed)} could not be opened" if failed else "")
    )
    return EXIT_FAILED if failed or moved else EXIT_OK


@cli.command()
@click.argument("url")
@click.option("--table-prefix", default=None, metavar="PREFIX", help="Table prefix the store uses.")
def migrate(url: str, table_prefix: str | None) -> int:
    """Create or upgrade the chatmemory tables of a SQL database to the newest revision (Alembic)."""
    reporter = Reporter("migrate", quiet=False)
    try:
        kind = store_kind(url)
    except click.BadParameter as exc:  # one line, as every refusal of migrate
        reporter.error(exc.message)
        return EXIT_USAGE
    if kind != "sql":
        reporter.error(
            f"{url_for_display(url)} is a {kind} store; migrations are for SQL databases "
            "(sqlite:///…, postgresql+psycopg://…, mysql+pymysql://…)"
        )
        return EXIT_USAGE
    try:
        from chatmemory.migrations import cli_migrate
    except ImportError as exc:
        reporter.error(f"migrations are not available ({exc}). Install the SQL extra: {install_hint('sql')}")
        return EXIT_USAGE
    options = {} if table_prefix is None else {"table_prefix": table_prefix}
    try:
        status = cli_migrate(url, **options)
    except ImportError as exc:  # the database driver the URL names
        module = (exc.name or str(exc)).split(".")[0]
        extra = _DRIVER_EXTRAS.get(module)
        hint = f": {install_hint(extra)}" if extra else ""
        reporter.error(f"the database driver {module!r} for {url_for_display(url)} is not installed{hint}")
        return EXIT_USAGE
    return int(status or 0)


@cli.command()
@click.option("--store", "store_url", default=None, metavar="URL", help="Store URL (default: a SQLite file here).")
@click.option("--memory-id", default=None, metavar="ID", help="Memory id to use (default: demo).")
@click.option(
    "--max-messages",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Window size in messages (default: 6).",
)
@click.option(
    "--summarize",
    is_flag=True,
    help="Use a SummarizingChatMemory: what leaves the window is kept in a summary (a toy summarizer, no model).",
)
def demo(store_url: str | None, memory_id: str | None, max_messages: int | None, summarize: bool) -> int:
    """Play a scripted conversation with tool calls and print the memory window after each turn.

    A travel assistant with a weather tool and a currency tool (no model, no network) through a
    MessageWindowChatMemory, marking what was evicted. With --summarize, a SummarizingChatMemory keeps
    what leaves the window in a summary right after the system message. Against a persistent store a
    second run continues the first.
    """
    from chatmemory.core.store import SupportsSchema
    from chatmemory.demo import DEFAULT_MAX_MESSAGES, DEFAULT_MEMORY_ID, DEFAULT_STORE_URL, run_demo
    from chatmemory.stores.url import open_store

    reporter = Reporter("demo", quiet=False)
    url = store_url or DEFAULT_STORE_URL
    try:
        chosen_id = validate_memory_id(DEFAULT_MEMORY_ID if memory_id is None else memory_id)
        store = open_store(url)
        if isinstance(store, SupportsSchema):
            # The demo runs on development databases: give it the schema instead of asking for a migration.
            store.create_schema()
    except (ChatMemoryError, ValueError, TypeError) as exc:
        # MissingDependencyError is a ChatMemoryError: its message names the extra to install.
        reporter.error(str(exc))
        return EXIT_USAGE
    try:
        return run_demo(
            store,
            memory_id=chosen_id,
            max_messages=max_messages or DEFAULT_MAX_MESSAGES,
            summarize=summarize,
            out=sys.stdout,
        )
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; that is not an error of the demo. Point stdout at devnull
        # so that the interpreter's final flush does not raise again (as the Python docs advise).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except ChatMemoryError as exc:
        reporter.error(str(exc))
        return EXIT_FAILED
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
