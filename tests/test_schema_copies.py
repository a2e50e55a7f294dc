"""The official schemas the suite validates against are the files the table of
tests/schema/README.md names, byte for byte: their sha256 is the one written there."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

SCHEMAS = Path(__file__).parent / "schema"


def recorded() -> dict[str, str]:
    rows = re.findall(
        r"^\| `([^`]+\.json)` \|.*\| `([0-9a-f]{64})` \|$",
        (SCHEMAS / "README.md").read_text(),
        re.M,
    )
    return dict(rows)


def test_every_schema_file_is_in_the_table_with_its_hash() -> None:
    table = recorded()
    assert set(table) == {path.name for path in SCHEMAS.glob("*.json")}
    for name, digest in table.items():
        assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == digest, name
