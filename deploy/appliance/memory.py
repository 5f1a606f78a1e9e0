"""Resident memory of this process and all its descendants, from /proc (Linux).

The demo samples it to report the appliance's peak memory as a whole: ZooKeeper JVMs,
brokers, mirrors, the Spark driver and its Python workers, and the demo itself.
"""

from __future__ import annotations

import os
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _parents() -> dict[int, int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = text[text.rfind(")") + 2 :].split()
        parents[int(stat.parent.name)] = int(fields[1])
    return parents


def tree_rss(root: int | None = None) -> int:
    """Bytes resident in ``root`` (default: this process) and every descendant."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total
