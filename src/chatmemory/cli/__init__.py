"""The ``chatmemory`` command: the demo and the operators' commands (``ls``, ``show``, ``export``, ...).

One module per group of commands; :mod:`chatmemory.cli.app` holds the group and the shared options.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatmemory.cli.stores import StoreOpener

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, open_store: StoreOpener | None = None) -> int:
    """Run the ``chatmemory`` command; returns the exit status (0 ok, 1 some items failed, 2 usage).

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).
        open_store: a :data:`chatmemory.cli.stores.StoreOpener` to open stores with instead of
            :func:`chatmemory.open_store` (tests hand in stores they made).
    """
    import click

    # Importing the command modules registers their commands on the group.
    from chatmemory.cli import (  # noqa: F401
        history_commands,
        inspect_commands,
        maintenance_commands,
        transfer_commands,
    )
    from chatmemory.cli.app import cli
    from chatmemory.cli.stores import CommandContext

    context = CommandContext() if open_store is None else CommandContext(open_store=open_store)
    try:
        result = cli.main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name="chatmemory",
            standalone_mode=False,
            obj=context,
        )
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except BrokenPipeError:
        # The reader went away (`| head`): not an error. Point stdout at devnull so the final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return result if isinstance(result, int) else 0
