"""Where a benchmarked broker spends its time: py-spy samples and cProfile stats, summarised.

:class:`PySpy` attaches ``py-spy record`` to a running process (py-spy is not a
project dependency: ``.venv/bin/pip install py-spy``) and writes collapsed
stacks; :func:`collapsed_summary` turns them into the frames with the largest
own ("self") and inclusive shares of the samples. :func:`cprofile_summary`
does the same for a cProfile stats file.
"""

from __future__ import annotations

import collections
import io
import pstats
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

_LINE = re.compile(r"\s*\(([^()]*?)(?::\d+)?\)$")


def py_spy_path() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class PySpy:
    """``py-spy record`` of one process (all its threads, idle samples left out) into ``output``."""

    def __init__(self, pid: int, output: Path, rate: int = 250) -> None:
        exe = py_spy_path()
        if exe is None:
            raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
        self.output = output
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--output", str(output)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


#: Leaf frames where a thread waits rather than works; py-spy's own idle
#: detection lets some of these through (kazoo's threads, trio's epoll wait).
IDLE_LEAVES = (
    "Condition.wait (threading.py)",
    "EpollSelector.select (selectors.py)",
    "EpollIOManager.get_events (trio/_core/_io_epoll.py)",
    "WorkerThread._work (trio/_core/_thread_cache.py)",
    "Queue.get (queue.py)",
    "Event.wait (threading.py)",
)
#: Frames every stack of the trio thread passes through: left out of the inclusive list.
_PLUMBING = ("runpy", "deploy/", "trio/_core/_run.py", "serve_listeners", "broker/server.py", "outcome/")


def collapsed_summary(path: Path, top: int = 20) -> str:
    """The frames (function and file, line numbers merged) with the most own and
    inclusive samples of the broker's trio thread, in a py-spy raw (collapsed stacks)
    file; stacks that end waiting (:data:`IDLE_LEAVES`) and other threads' are counted apart."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = idle = other_threads = 0
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(py-spy wrote nothing to {path})"
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_LINE.sub(r" (\1)", frame) for frame in stack.split(";")]
        if frames[-1] in IDLE_LEAVES:
            idle += n
            continue
        if any(frame.startswith("Thread._bootstrap") for frame in frames):
            other_threads += n
            continue
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return "(no busy samples)"
    lines = [
        f"{total} busy samples of the trio thread ({other_threads} busy in other threads, {idle} waiting); own time:"
    ]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines.append("inclusive time:")
    shown = 0
    for frame, n in inclusive.most_common():
        if shown >= top:
            break
        if not any(skip in frame for skip in _PLUMBING):
            lines.append(f"  {100 * n / total:5.1f}%  {frame}")
            shown += 1
    return "\n".join(lines)


def cprofile_summary(path: Path, top: int = 18) -> str:
    if not path.exists():
        return f"(no profile written to {path})"
    out = io.StringIO()
    pstats.Stats(str(path), stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


__all__ = ["PySpy", "collapsed_summary", "cprofile_summary", "py_spy_path"]
