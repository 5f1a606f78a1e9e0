"""CPU seconds of whole process trees, sampled while they run (Linux ``/proc``).

A Spark load is a Python driver, the JVM it starts, and the Python workers that JVM starts;
what a load costs is the CPU of all of them, and what each phase costs is the difference
between two samples taken at the phase's log lines. :class:`TreeCpu` sums user and system
time over every live descendant of its roots, plus the time of descendants already reaped
(``cutime``/``cstime`` of their parents), so nothing is lost when a worker exits between
two samples and nothing is counted twice (a child's time moves into its parent's ``cutime``
only when it is reaped). This is what ``/work/notes/cpurun`` measures with a cgroup, without
needing one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, str] | None:
    """(parent pid, own and reaped children's CPU seconds, command name) of a process, or
    None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            line = stat.read()
    except OSError:
        return None
    name, fields = line[line.find("(") + 1 : line.rfind(")")], line.rsplit(")", 1)[1].split()
    # After the command's closing parenthesis: state, ppid, ... utime (14th field of the
    # line, index 11 here), stime, cutime, cstime.
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICK, name


class TreeCpu:
    """The CPU seconds used so far by ``roots`` and all their descendants."""

    def __init__(self, roots: Iterable[int]) -> None:
        self.roots = set(roots)

    def sample(self) -> float:
        return sum(self.by_command().values())

    def by_command(self) -> dict[str, float]:
        """The CPU seconds so far, per command name (``java``, ``python3.11``, ...)."""
        stats: dict[int, tuple[int, float, str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (found := _stat(int(entry))) is not None:
                stats[int(entry)] = found
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        totals: dict[str, float] = {}
        todo = [pid for pid in self.roots if pid in stats]
        seen: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            _, used, name = stats[pid]
            totals[name] = totals.get(name, 0.0) + used
            todo += children.get(pid, ())
        return totals


__all__ = ["TreeCpu"]
