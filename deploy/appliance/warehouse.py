"""Count what the loader put into a local (file://) warehouse, by reading the Parquet files.

The demo checks the loader's own report against the files themselves: rows per aggregate
topic and source datacenter, and distinct (partition, offset) pairs, so a duplicated record
would show. The layout is the loader's: ``topic=<t>/source_datacenter=<dc>/event_date=<d>/
*.parquet``; its state directory ``_tributary/`` (staging, plans) is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq

STATE_DIR = "_tributary"


@dataclass
class WarehouseCount:
    rows: int = 0
    bytes: int = 0
    files: int = 0
    offsets: set[tuple[int, int]] = field(default_factory=set, repr=False)

    @property
    def distinct(self) -> int:
        return len(self.offsets)


def _parquet_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.parquet")):
        if STATE_DIR not in path.relative_to(root).parts:
            yield path


def _partition_values(root: Path, path: Path) -> dict[str, str]:
    values = {}
    for part in path.relative_to(root).parts[:-1]:
        name, eq, value = part.partition("=")
        if eq:
            values[name] = unquote(value)
    return values


def count_warehouse(root: Path) -> dict[tuple[str, str], WarehouseCount]:
    """(aggregate topic, source datacenter) -> rows, bytes, files and distinct offsets."""
    counts: dict[tuple[str, str], WarehouseCount] = {}
    if not root.is_dir():
        return counts
    for path in _parquet_files(root):
        values = _partition_values(root, path)
        key = (values.get("topic", "?"), values.get("source_datacenter", ""))
        count = counts.setdefault(key, WarehouseCount())
        table = pq.read_table(path, columns=["partition", "offset"])
        count.rows += table.num_rows
        count.bytes += path.stat().st_size
        count.files += 1
        count.offsets.update(
            zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
        )
    return counts
