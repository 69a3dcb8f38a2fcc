"""The ``chatmemory`` command group, its shared options, and how failures become exit statuses.

Why Click and Rich: Click is the long-kept base of Python command lines (Flask, pip-tools, black); it
gives subcommands, ``--help``, typed options, prompts and usage errors with exit status 2 out of the box
and runs in-process for tests. Typer builds on it with annotations but adds little for a dozen
commands and pins Click tightly. Rich draws tables and progress bars that know whether they write to a
terminal, and is what Typer and pip themselves use for that. Both are small, pure Python, and imported
only by the command, never by ``import chatmemory``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import click

from chatmemory.cli.console import EXIT_FAILED, EXIT_USAGE, Reporter
from chatmemory.cli.stores import CommandContext, url_for_display
from chatmemory.core.errors import ChatMemoryError, MissingDependencyError
from chatmemory.core.store import ChatMemoryStore

__all__ = ["cli", "command_context", "namespace_flags", "opened_store", "quiet_flag", "reports_failures"]

F = TypeVar("F", bound=Callable[..., Any])

GUIDE = "docs/cli.md"
"""The page of the docs site about the command (``mkdocs serve`` shows it at ``/cli/``)."""


def guide_pointer(command: str | None = None) -> str:
    """The paragraph of a help text that points to the command's section of the guide (never rewrapped)."""
    anchor = f"#chatmemory-{command}" if command else ""
    return f"\b\nGuide: {GUIDE}{anchor}\n(on the docs site: cli/{anchor})"


class _GuidedGroup(click.Group):
    """A group whose commands' help ends by pointing to their section of the guide."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        if cmd.epilog is None:
            cmd.epilog = guide_pointer(name or cmd.name)


DISTRIBUTION_NAME = "llm-window-memory"
"""The name this project is published under (``chatmemory`` on the index is another project)."""


def version_text() -> str:
    """``chatmemory X.Y.Z (llm-window-memory)``: the installed version and the distribution it came from."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(DISTRIBUTION_NAME)
    except PackageNotFoundError:  # running from a source tree that was never installed
        from chatmemory import __version__ as installed
    return f"chatmemory {installed} ({DISTRIBUTION_NAME})"


def _version(context: click.Context, _parameter: click.Parameter, value: bool) -> None:
    if not value or context.resilient_parsing:
        return
    click.echo(version_text())
    context.exit(0)


@click.group(
    cls=_GuidedGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="Run 'chatmemory COMMAND --help' for a command's options. Exit status: 0 ok, 1 some items failed, 2 usage."
    f"\n\n{guide_pointer()}",
)
@click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_version, help="Show the version and exit."
)
def cli() -> None:
    """Bounded, persistent chat memory for LLM applications: the demo and the operators' commands."""


def quiet_flag(function: F) -> F:
    """``-q/--quiet``: no progress bar and no summary line (failures are still reported)."""
    return click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary; failures still print.")(
        function
    )


def namespace_flags(side: str = "", *, describe: str = "the store") -> Callable[[F], F]:
    """``--key-prefix``, ``--table-prefix``, ``--database``, ``--collection``, ``--keyring``; sided: ``--src-…``."""
    dash = f"{side}-" if side else ""
    under = f"{side}_" if side else ""

    def decorate(function: F) -> F:
        for name, meta, kind in reversed(
            [
                ("key-prefix", "PREFIX", "Redis"),
                ("table-prefix", "PREFIX", "SQL"),
                ("database", "NAME", "MongoDB"),
                ("collection", "NAME", "MongoDB"),
            ]
        ):
            function = click.option(
                f"--{dash}{name}",
                f"{under}{name.replace('-', '_')}",
                default=None,
                metavar=meta,
                help=f"{name.replace('-', ' ')} of {describe} ({kind}).",
            )(function)
        envvar = f"CHATMEMORY_{side.upper()}_KEYRING" if side else "CHATMEMORY_KEYRING"
        return click.option(
            f"--{dash}keyring",
            f"{under}keyring",
            default=None,
            metavar="FILE",
            envvar=envvar,
            help=f"JSON keyring {describe} is encrypted with (or ${envvar}): see docs/encryption.md.",
        )(function)

    return decorate


def reports_failures(command: str) -> Callable[[F], F]:
    """Turn the library's errors escaping a command into one line on stderr and an exit status.

    A missing driver is a usage problem (2: install the extra); any other library error means the work
    was not (all) done (1). Click's own usage errors pass through and exit 2.
    """

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*arguments: Any, **options: Any) -> int:
            reporter = Reporter(command, quiet=False)
            try:
                status: int = function(*arguments, **options)
            except MissingDependencyError as exc:
                reporter.error(str(exc))
                return EXIT_USAGE
            except ChatMemoryError as exc:
                reporter.error(str(exc))
                return EXIT_FAILED
            return status

        return wrapper  # type: ignore[return-value]

    return decorate


def command_context() -> CommandContext:
    """The :class:`CommandContext` ``main`` put on the Click context."""
    context = click.get_current_context().find_object(CommandContext)
    return context if context is not None else CommandContext()


@contextlib.contextmanager
def opened_store(url: str, options: Mapping[str, Any]) -> Iterator[ChatMemoryStore]:
    """The store ``url`` names, opened with ``options`` and closed afterwards.

    Raises:
        click.UsageError: the store refuses the URL or the options (exit status 2).
    """
    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(command_context().open_store(url, options))
        except (ValueError, TypeError) as exc:
            raise click.UsageError(f"{url_for_display(url)}: {exc}") from exc
        yield store
