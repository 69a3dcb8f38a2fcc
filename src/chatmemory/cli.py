"""The ``chatmemory`` command: ``chatmemory demo`` and ``chatmemory migrate URL``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    from chatmemory.demo import DEFAULT_MAX_MESSAGES, DEFAULT_MEMORY_ID, DEFAULT_STORE_URL

    parser = argparse.ArgumentParser(
        prog="chatmemory",
        description="Bounded, persistent chat memory for LLM applications.",
        epilog="Run 'chatmemory COMMAND --help' for a command's options.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="play a scripted conversation with tool calls and print the memory window after each turn",
        description=(
            "Play a scripted travel-assistant conversation (a weather tool and a currency tool; no model, no "
            "network) through a MessageWindowChatMemory and print the window after every turn, marking what "
            "was evicted. Against a persistent store a second run continues the first."
        ),
    )
    demo.add_argument(
        "--store",
        default=DEFAULT_STORE_URL,
        metavar="URL",
        help=(f"store URL, e.g. sqlite:///chat.db or redis://localhost:6379/0 (default: {DEFAULT_STORE_URL})"),
    )
    demo.add_argument(
        "--memory-id", default=DEFAULT_MEMORY_ID, metavar="ID", help=f"memory id to use (default: {DEFAULT_MEMORY_ID})"
    )
    demo.add_argument(
        "--max-messages",
        type=_positive_int,
        default=DEFAULT_MAX_MESSAGES,
        metavar="N",
        help=f"window size in messages, system message included (default: {DEFAULT_MAX_MESSAGES})",
    )
    migrate = commands.add_parser(
        "migrate",
        help="create or upgrade the chatmemory tables of a SQL database",
        description="Upgrade the chatmemory schema of a SQL database to the newest revision (Alembic).",
    )
    migrate.add_argument("url", metavar="URL", help="database URL, e.g. postgresql+psycopg://user@host/db")
    migrate.add_argument("--table-prefix", default=None, metavar="PREFIX", help="table prefix the store uses")
    return parser


def _demo(arguments: argparse.Namespace) -> int:
    from chatmemory.core.errors import ChatMemoryError
    from chatmemory.core.memory_id import validate_memory_id
    from chatmemory.core.store import SupportsSchema
    from chatmemory.demo import run_demo
    from chatmemory.stores.url import open_store

    try:
        memory_id = validate_memory_id(arguments.memory_id)
        store = open_store(arguments.store)
        if isinstance(store, SupportsSchema):
            # The demo runs on development databases: give it the schema instead of asking for a migration.
            store.create_schema()
    except (ChatMemoryError, ValueError, TypeError) as exc:
        # MissingDependencyError is a ChatMemoryError: its message names the extra to install.
        print(f"chatmemory demo: {exc}", file=sys.stderr)
        return 2
    try:
        return run_demo(store, memory_id=memory_id, max_messages=arguments.max_messages, out=sys.stdout)
    except ChatMemoryError as exc:
        print(f"chatmemory demo: {exc}", file=sys.stderr)
        return 1
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def _migrate(arguments: argparse.Namespace) -> int:
    try:
        from chatmemory.migrations import cli_migrate
    except ImportError as exc:
        print(
            f"chatmemory migrate: migrations are not available ({exc}). Install the SQL extra: "
            "pip install 'chatmemory[sql]'",
            file=sys.stderr,
        )
        return 2
    options = {} if arguments.table_prefix is None else {"table_prefix": arguments.table_prefix}
    status = cli_migrate(arguments.url, **options)
    return int(status or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chatmemory`` command; returns the exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "demo":
        try:
            return _demo(arguments)
        except BrokenPipeError:
            # The reader (e.g. `| head`) went away; that is not an error of the demo. Point stdout at devnull
            # so that the interpreter's final flush does not raise again (as the Python docs advise).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    if arguments.command == "migrate":
        return _migrate(arguments)
    parser.print_help(sys.stderr)
    return 2
