"""Output of the operator commands: aligned text tables for people, JSON for scripts.

Every command that prints data takes ``--output table|json``; the table is
what an operator reads, the JSON what a script parses (numbers stay numbers,
missing values are null).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: Columns whose header is in here are right-aligned (numbers).
Row = Sequence[object]


def cell(value: object) -> str:
    """A table cell: None prints as "-", everything else as str()."""
    return "-" if value is None else str(value)


def render_table(headers: Sequence[str], rows: Sequence[Row], *, right: Sequence[str] = ()) -> str:
    """Columns separated by two spaces, each as wide as its widest cell; the
    columns named in ``right`` are right-aligned. No trailing spaces."""
    table = [[str(h) for h in headers], *[[cell(v) for v in row] for row in rows]]
    widths = [max(len(line[i]) for line in table) for i in range(len(headers))]
    lines = []
    for line in table:
        cells = [
            text.rjust(width) if header in right else text.ljust(width)
            for text, width, header in zip(line, widths, headers, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def human_bytes(size: int | None) -> str:
    """1536 -> "1.5 KiB"; None -> "-" (the broker did not report it)."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)
