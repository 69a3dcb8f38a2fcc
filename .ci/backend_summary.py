"""Print passed/failed/skipped counts per backend from a JUnit report.

A test belongs to the backend its param id names; store-specific modules without one go by module name
(``sql`` covers the SQL-only tests that run on every dialect), and everything else is ``core``.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

BACKENDS = ("memory", "sqlite", "sqlite_aiosqlite", "postgres", "mysql", "redis_cluster", "redis", "mongodb", "langchain4j_redis")


def _by_module(module: str) -> str:
    """Store-specific test modules without a backend param: name the store by the module."""
    kinds = (
        ("langchain4j_redis", "langchain4j_redis"),
        ("redis", "redis"),
        ("mongodb", "mongodb"),
        ("sql", "sql"),
        ("migrations", "sql"),
    )
    for word, backend in kinds:
        if f"test_{word}" in module or f".{word}." in module:
            return backend
    return "core"


def main(path: str) -> None:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        params = re.findall(r"\[(.*)\]$", name)
        parts = re.split(r"[-\[\]]", params[0]) if params else []
        module = case.get("classname", "")
        backend = next((b for b in BACKENDS if b in parts), None) or _by_module(module)
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        counts[backend][outcome] += 1
    print("== per backend")
    for backend in (*BACKENDS, "sql", "core"):
        if backend in counts:
            c = counts[backend]
            print(f"  {backend:<18} passed={c['passed']:<5} failed={c['failed']:<4} skipped={c['skipped']}")


if __name__ == "__main__":
    main(sys.argv[1])
