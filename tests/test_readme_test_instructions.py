"""The README's test instructions without Docker use the servers' URLs exactly as .ci/run sets them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_EXPORT = re.compile(r"""^export (CHATMEMORY_TEST_[A-Z_]+_URL)=["']?([^"'\n]+)["']?$""", re.MULTILINE)


def test_the_first_urls_of_the_development_section_are_the_ones_ci_uses() -> None:
    readme = ROOT / "README.md"
    section = readme.read_text(encoding="utf-8").split("\n## Development\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL) if "export " in block]
    without_docker = dict(_EXPORT.findall(blocks[0]))
    ci = dict(_EXPORT.findall((ROOT / ".ci" / "run").read_text(encoding="utf-8")))
    backends = {f"CHATMEMORY_TEST_{name}_URL" for name in ("REDIS", "REDIS_CLUSTER", "POSTGRES", "MYSQL", "MONGODB")}
    assert set(without_docker) == backends
    assert without_docker.items() <= ci.items()
    assert "docker" not in blocks[0].lower()
