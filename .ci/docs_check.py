"""The checks of the docs site that ``mkdocs build --strict`` does not make (run by ``.ci/docs``).

``reference SITE_DIR``: every public module has a page under ``docs/reference/`` that renders it
(``::: module``) and sits in the nav of ``mkdocs.yml``, and every name in a module's ``__all__`` has an
entry in the built site's ``objects.inv``.

``blocks``: every ```` ```python ```` block of the pages under ``docs/`` runs, each as the module the snippet test
(``tests/test_readme_snippets_typecheck.py``) type-checks, in a scratch directory, unless a comment
``<!-- not run: REASON -->`` before it (and before its ``<!-- typecheck ... -->`` comment, if any) says
why not (an API key, a network), or it names a database server's URL. Those blocks are type-checked only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"

# Packages whose modules one level down are public (a module named with a leading underscore is not).
PUBLIC_PACKAGES = ["chatmemory.serialization", "chatmemory.stores", "chatmemory.aio.stores", "chatmemory.integrations"]
PUBLIC_MODULES = [
    "chatmemory",
    "chatmemory.aio",
    "chatmemory.encryption",
    "chatmemory.testing",
    "chatmemory.telemetry",
    "chatmemory.migrations",
]

_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>[^>]*?)\s*-->\Z")
# A block that names a database server's URL needs that server: it is type-checked only, marked or not.
_SERVER_URL = re.compile(
    r"\b(?:rediss?|redis\+\w+|postgres(?:ql)?(?:\+\w+)?|mysql(?:\+\w+)?|mariadb(?:\+\w+)?|mongodb(?:\+srv)?)://"
)


def public_modules() -> list[str]:
    """Every module the reference must have a page for."""
    names = list(PUBLIC_MODULES)
    for package in PUBLIC_PACKAGES:
        names.append(package)
        path = importlib.import_module(package).__path__
        names += [f"{package}.{info.name}" for info in pkgutil.iter_modules(path) if not info.name.startswith("_")]
    return sorted(names)


def inventory_names(site: Path) -> set[str]:
    """The object names of the built site's Sphinx inventory (what mkdocstrings rendered)."""
    from mkdocstrings import Inventory

    with (site / "objects.inv").open("rb") as stream:
        return set(Inventory.parse_sphinx(stream))


def check_reference(site: Path) -> list[str]:
    """What the API reference in ``site`` lacks: pages, nav entries, exported names."""
    problems = []
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    rendered = inventory_names(site)
    expected = public_modules()
    for name in expected:
        page = REFERENCE / f"{name}.md"
        if not page.exists():
            problems.append(f"{name}: no reference page (add docs/reference/{name}.md with '::: {name}')")
            continue
        if not re.search(rf"^::: {re.escape(name)}$", page.read_text(encoding="utf-8"), re.MULTILINE):
            problems.append(f"{page.relative_to(ROOT)}: does not render {name} ('::: {name}')")
        if f"reference/{name}.md" not in nav:
            problems.append(f"{page.relative_to(ROOT)}: not in the nav of mkdocs.yml")
        module: ModuleType = importlib.import_module(name)
        missing = [
            export
            for export in getattr(module, "__all__", [])
            if f"{name}.{export}" not in rendered and _ours(getattr(module, export))
        ]
        if missing:
            problems.append(f"{name}: exported but not in the reference: {', '.join(sorted(missing))}")
    extra = sorted({page.stem for page in REFERENCE.glob("chatmemory*.md")} - set(expected))
    problems += [f"docs/reference/{name}.md: not a public module (renamed or removed?)" for name in extra]
    return problems


def _ours(value: object) -> bool:
    """Whether an exported value is chatmemory's own (a driver's class re-exported is documented upstream)."""
    if not (isinstance(value, type) or inspect.isfunction(value)):
        return True  # a constant or a type alias: defined where it is exported
    return value.__module__ == "chatmemory" or value.__module__.startswith("chatmemory.")


def _snippet_test() -> ModuleType:
    """The snippet test module, whose parsing of pages and directives the runner shares."""
    path = ROOT / "tests" / "test_readme_snippets_typecheck.py"
    spec = importlib.util.spec_from_file_location("readme_snippets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


def not_run_reason(page: Path, line: int) -> str | None:
    """The reason a ``<!-- not run: ... -->`` comment gives for the block fenced at ``line``, if any."""
    before = "\n".join(page.read_text(encoding="utf-8").splitlines()[: line - 1]).rstrip()
    if before.endswith("-->") and re.search(r"<!--\s*typecheck", before[before.rfind("<!--") :]):
        before = before[: before.rfind("<!--")].rstrip()
    if not before.endswith("-->"):
        return None
    match = _NOT_RUN.match(before, before.rfind("<!--"))
    return match.group("reason") if match else None


def run_blocks() -> list[str]:
    """Run the blocks of ``docs/*.md`` not marked ``not run``; what failed, with its output."""
    snippet_test = _snippet_test()
    pages = sorted((ROOT / "docs").rglob("*.md"))
    found = snippet_test.snippets(pages)
    problems = []
    with tempfile.TemporaryDirectory(prefix="chatmemory-docs-blocks-") as scratch:
        directory = Path(scratch)
        files = snippet_test.write_modules(found, directory)
        environment = {**os.environ, "PYTHONPATH": str(directory)}
        ran = skipped = 0
        for path, snippet in files.items():
            reason = not_run_reason(snippet.page, snippet.line)
            if reason is not None or _SERVER_URL.search(snippet.prelude + snippet.code):
                skipped += 1
                continue
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, path.name],
                cwd=directory,
                env=environment,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            ran += 1
            took = time.monotonic() - started
            if result.returncode != 0:
                output = (result.stdout + result.stderr).strip()[-2000:]
                problems.append(f"{snippet.where}: exit {result.returncode} after {took:.1f}s\n{output}")
        print(f"docs: {ran} blocks of docs/ ran, {len(problems)} failed; {skipped} type-checked only (not run)")
    return problems


def main(argv: list[str]) -> int:
    """``reference SITE_DIR`` or ``blocks``; exit status 1 when something is missing or failed."""
    if argv[:1] == ["reference"] and len(argv) == 2:
        problems = check_reference(Path(argv[1]))
        if not problems:
            print(f"docs: {len(public_modules())} public modules, each with a reference page listing its exports")
    elif argv == ["blocks"]:
        problems = run_blocks()
    else:
        print("usage: docs_check.py reference SITE_DIR | blocks", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"docs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
