"""Every ```python block of README.md and the pages under docs/ type-checks under ``mypy --strict``.

Each block becomes a module of its own, and all of them are checked in one mypy run. A block may be
preceded by a hidden HTML comment that the page does not show:

    <!-- typecheck as quickstart -->          the block is module ``quickstart``
    <!-- typecheck
    from quickstart import memory, store      Python put before the block (names the page says come
    -->                                       from elsewhere: an earlier block, the reader's own code)

A comment ``<!-- typecheck skip: REASON -->`` leaves a block out (a fragment that is not Python on its own).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from chatmemory.aio.url import ASYNC_STORE_SCHEMES
from chatmemory.stores.url import STORE_SCHEMES

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"<!--\s*typecheck(?P<head>[^\n]*?)(?:\n(?P<prelude>.*?))?\s*-->\Z", re.DOTALL)
_MODULE_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")


@dataclass(frozen=True)
class Snippet:
    """One python block of a page and what its directive says."""

    page: Path
    line: int
    code: str
    module: str
    prelude: str
    skip: str | None

    @property
    def shown(self) -> Path:
        return self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page

    @property
    def where(self) -> str:
        return f"{self.shown}:{self.line}"


def snippets(pages: list[Path]) -> list[Snippet]:
    """The python blocks of ``pages``, in page order, with their directives applied."""
    found: list[Snippet] = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            module = f"{page.stem.lower().replace('-', '_')}_line_{line}"
            prelude, skip = "", None
            before = text[: match.start()].rstrip()
            directive = _DIRECTIVE.match(before, before.rfind("<!--")) if before.endswith("-->") else None
            if directive is not None:
                head = directive.group("head").strip()
                prelude = textwrap.dedent(directive.group("prelude") or "").strip("\n")
                prelude += "\n" if prelude else ""
                if head.startswith("skip"):
                    skip = head.removeprefix("skip").lstrip(":").strip() or "no reason given"
                elif head.startswith("as "):
                    module = head.removeprefix("as ").strip()
                    if not _MODULE_NAME.match(module):
                        raise ValueError(f"{page.name}:{line}: {module!r} is not a module name")
                elif head:
                    raise ValueError(f"{page.name}:{line}: unknown typecheck directive {head!r}")
            found.append(Snippet(page, line, match.group("code"), module, prelude, skip))
    return found


def write_modules(found: list[Snippet], directory: Path) -> dict[Path, Snippet]:
    """Write each snippet as ``directory/<module>.py``; return file → snippet."""
    files: dict[Path, Snippet] = {}
    for snippet in found:
        if snippet.skip is not None:
            continue
        path = directory / f"{snippet.module}.py"
        if path in files:
            raise ValueError(f"{snippet.where}: module {snippet.module!r} is also {files[path].where}")
        # The prelude's lines come first; errors are reported against the page's lines below.
        path.write_text(snippet.prelude + snippet.code, encoding="utf-8")
        files[path] = snippet
    return files


def mypy_strict(directory: Path, files: list[Path]) -> tuple[int, str]:
    """Run ``mypy --strict`` once over ``files`` (a cache in the repository keeps later runs fast)."""
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--python-version",
        "3.10",
        "--config-file",
        str(directory / "mypy.ini"),
        "--cache-dir",
        str(ROOT / ".mypy_cache" / "snippets"),
        "--no-error-summary",
        "--show-error-codes",
        *(path.name for path in files),
    ]
    (directory / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=600, check=False)
    return result.returncode, result.stdout + result.stderr


def url_store_conformance() -> str:
    """A module that mypy accepts only if every class ``open_store`` can return is a ``UrlStore``."""
    lines = ["from chatmemory.aio.url import UrlStore as AsyncUrlStore", "from chatmemory.stores.url import UrlStore"]
    for kind, schemes in (("UrlStore", STORE_SCHEMES), ("AsyncUrlStore", ASYNC_STORE_SCHEMES)):
        for number, target in enumerate(sorted(set(schemes.values()))):
            module, name = target.split(":")
            lines += [
                f"from {module} import {name} as {kind}{number}",
                f"def as_{kind}{number}(store: {kind}{number}) -> {kind}:",
                "    return store",
            ]
    return "\n".join(lines) + "\n"


def page_errors(output: str, files: dict[Path, Snippet]) -> list[str]:
    """mypy's lines, each pointed at the page line it is about."""
    by_name = {path.name: snippet for path, snippet in files.items()}
    lines = []
    for line in output.splitlines():
        name, _, rest = line.partition(":")
        snippet = by_name.get(name)
        number, _, message = rest.partition(":")
        if snippet is None or not number.isdigit():
            lines.append(line)
            continue
        offset = int(number) - snippet.prelude.count("\n")
        place = f"{snippet.shown}:{snippet.line + offset}" if offset > 0 else f"{snippet.where} (prelude)"
        lines.append(f"{place}:{message}")
    return lines


def test_pages_have_python_snippets() -> None:
    found = snippets(PAGES)
    assert len(found) >= 10, [snippet.where for snippet in found]


def test_every_snippet_type_checks_strict_and_every_url_store_is_a_url_store(tmp_path: Path) -> None:
    files = write_modules(snippets(PAGES), tmp_path)
    # In the same mypy run (one run keeps the test fast): what open_store returns is typed truthfully.
    conformance = tmp_path / "url_store_conformance.py"
    conformance.write_text(url_store_conformance(), encoding="utf-8")
    status, output = mypy_strict(tmp_path, [*files, conformance])
    assert status == 0, "\n".join(page_errors(output, files))


def test_a_snippet_that_does_not_type_check_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Fine:\n\n```python\nfrom chatmemory import open_store\n\nwith open_store('memory://') as store:\n"
        "    store.delete_messages('a')\n```\n\nBroken:\n\n<!-- typecheck\nfrom chatmemory import UserMessage\n-->\n"
        "```python\nUserMessage(42)\n```\n",
        encoding="utf-8",
    )
    directory = tmp_path / "modules"
    directory.mkdir()
    files = write_modules(snippets([page]), directory)
    status, output = mypy_strict(directory, list(files))
    assert status == 1
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("page_line_15.py:2: error:"), output
    # Reported at the page's line: the block's first line is line 16 of page.md.
    (located,) = (line for line in page_errors(output, files) if ": error:" in line)
    assert located.startswith(f'{page}:16: error: Argument 1 to "UserMessage"'), located


@pytest.mark.parametrize(
    ("comment", "module", "prelude", "skip"),
    [
        ("<!-- typecheck as quickstart -->\n", "quickstart", "", None),
        (
            "<!-- typecheck\nfrom quickstart import memory\n-->\n",
            "page_line_4",
            "from quickstart import memory\n",
            None,
        ),
        ("<!-- typecheck skip: a fragment -->\n", "page_line_2", "", "a fragment"),
        ("", "page_line_1", "", None),
    ],
)
def test_directives(tmp_path: Path, comment: str, module: str, prelude: str, skip: str | None) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"{comment}```python\nx = 1\n```\n", encoding="utf-8")
    (snippet,) = snippets([page])
    assert (snippet.module, snippet.prelude, snippet.skip, snippet.code) == (module, prelude, skip, "x = 1\n")
