"""Print passed/failed/skipped counts per backend from a JUnit report (backend = the test's param id)."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

BACKENDS = ("memory", "sqlite", "postgres", "mysql", "redis_cluster", "redis", "mongodb")


def main(path: str) -> None:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        params = re.findall(r"\[(.*)\]$", name)
        parts = re.split(r"[-\[\]]", params[0]) if params else []
        backend = next((b for b in BACKENDS if b in parts), "core")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        counts[backend][outcome] += 1
    print("== per backend")
    for backend in (*BACKENDS, "core"):
        if backend in counts:
            c = counts[backend]
            print(f"  {backend:<14} passed={c['passed']:<5} failed={c['failed']:<4} skipped={c['skipped']}")


if __name__ == "__main__":
    main(sys.argv[1])
