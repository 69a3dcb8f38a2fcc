"""Running the ``chatmemory`` command in-process against the stores of the parametrized ``backend`` fixture.

Commands take URLs; here each URL names a store the test made in a fresh namespace of the current
backend (``backend.make_store()``), so every command runs on every backend with the same isolation as the
contract suite. The URL's scheme is the backend's, so commands see the kind of store they would see.
URL parsing and namespace options are tested on real URLs in test_cli_urls.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from cli_results import Result

from chatmemory import ChatMemoryStore
from chatmemory.cli import main
from support.backends import Backend

SCHEMES = {
    "memory": "memory://",
    "redis": "redis://",
    "redis_cluster": "redis+cluster://",
    "sqlite": "sqlite:///",
    "postgres": "postgresql+psycopg://",
    "mysql": "mysql+pymysql://",
    "mongodb": "mongodb://",
}


@dataclass
class Stores:
    """Stores of one backend, each reachable by a URL of the backend's scheme."""

    backend: Backend
    made: dict[str, ChatMemoryStore] = field(default_factory=dict)
    foreign: set[str] = field(default_factory=set)

    def url(self, label: str, **options: Any) -> str:
        """A URL naming a fresh store (made on first use) of the current backend."""
        url = f"{SCHEMES[self.backend.name]}{label}"
        if url not in self.made:
            self.made[url] = self.backend.make_store(**options)
        return url

    def __getitem__(self, url: str) -> ChatMemoryStore:
        return self.made[url]

    def add(self, url: str, store: ChatMemoryStore) -> str:
        """Make ``url`` name ``store`` (a store of another backend, closed by its own fixture)."""
        self.made[url] = store
        self.foreign.add(url)
        return url

    @contextlib.contextmanager
    def open(self, url: str, options: Mapping[str, Any]) -> Iterator[ChatMemoryStore]:
        assert url in self.made, f"the test did not make a store for {url}"
        yield self.made[url]

    def close(self) -> None:
        for url, store in self.made.items():
            if url not in self.foreign:
                self.backend.close_store(store)


@pytest.fixture
def stores(backend: Backend) -> Iterator[Stores]:
    """Stores of the current backend by URL; closed (and their namespaces dropped) after the test."""
    made = Stores(backend)
    yield made
    made.close()


@pytest.fixture
def run(stores: Stores, capsys: pytest.CaptureFixture[str]) -> Any:
    """``run("ls", url, ...)``: the command in-process against ``stores``; returns a :class:`Result`."""

    def run_command(*argv: str) -> Result:
        capsys.readouterr()
        status = main(list(argv), open_store=stores.open)
        captured = capsys.readouterr()
        return Result(status, captured.out, captured.err)

    return run_command
