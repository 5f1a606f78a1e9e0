"""Small local topologies for tests, on free ports of 127.0.0.1, and `tributary up` as a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tributary.testing.ports import free_ports

# Short broker sessions: a broker killed with SIGKILL is deregistered (and restartable) sooner.
BROKER_SETTINGS = '"num.partitions" = 2, "zookeeper.session.timeout.ms" = 6000'


def write_topology(
    path: Path,
    *,
    datacenters: tuple[str, ...] = ("east", "aggregate"),
    brokers: int = 1,
    mirrors: bool = False,
    settings: str = "",
    secure: bool = False,
) -> Path:
    """Datacenters with one ZooKeeper and ``brokers`` brokers each; the last one is the aggregate.
    ``settings``: more broker settings for every cluster, as TOML inline-table entries.
    ``secure``: the source clusters get an EXTERNAL SASL_SSL listener besides their PLAINTEXT one,
    so the mirrors read them over SASL_SSL (as deploy/examples/local.toml does)."""
    ports = iter(free_ports(len(datacenters) * (1 + 3 * brokers) + len(datacenters)))
    lines = ["[local]", f'run_dir = "{path.parent / "run"}"', ""]
    for dc in datacenters:
        lines += [f"[datacenters.{dc}]", ""]
    for dc in datacenters:
        external = secure and dc != datacenters[-1]
        lines += [
            f"[clusters.{dc}]",
            f'datacenter = "{dc}"',
            f'zookeeper = {{ servers = ["127.0.0.1:{next(ports)}"], chroot = "/tributary/{dc}" }}',
            f"topic_defaults = {{ {BROKER_SETTINGS}{', ' + settings if settings else ''} }}",
            *(['listeners = { INTERNAL = "PLAINTEXT", EXTERNAL = "SASL_SSL" }'] if external else []),
            "brokers = [",
            *(
                f'    {{ id = {i}, host = "127.0.0.1", port = {next(ports)}, metrics_port = {next(ports)}'
                + (f", ports = {{ EXTERNAL = {next(ports)} }}" if external else "")
                + " },"
                for i in range(1, brokers + 1)
            ),
            "]",
            "",
        ]
    aggregate = datacenters[-1]
    if mirrors:
        for dc in datacenters[:-1]:
            lines += [
                f"[mirrors.{dc}]",
                f'source = "{dc}"',
                f'target = "{aggregate}"',
                'exclude = "^__.*"',
                f"metrics_port = {next(ports)}",
                'host = "127.0.0.1"',
                "",
            ]
    sources = "|".join(datacenters[:-1])
    lines += [
        "[loads.nightly]",
        f'cluster = "{aggregate}"',
        f'output = "{path.parent / "warehouse"}"',
        f'topics = "^({sources})\\\\..*"',
        "",
    ]
    path.write_text("\n".join(lines))
    return path


class Up:
    """`tributary up` running in a subprocess, its output collected in a file."""

    def __init__(self, topology: Path, log: Path, *args: str) -> None:
        self.log = log
        self._out = log.open("wb")
        # No console unless a test asks for one: every test would otherwise want port 8480.
        console = [] if any(a.startswith("--console") for a in args) else ["--console", "off"]
        cmd = [sys.executable, "-m", "tributary.deploy.cli", "up", "--topology", str(topology), "--grace", "10",
               *console, *args]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 120.0, since: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.compile(pattern, re.MULTILINE).search(self.output(), since)
            if match:
                return match
            if self.proc.poll() is not None:
                raise AssertionError(f"tributary up exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.output()}")

    def pids(self) -> dict[str, int]:
        """The latest pid of every child, from the 'started' lines."""
        return {m[1]: int(m[2]) for m in re.finditer(r" (\S+): started \(pid (\d+)\)", self.output())}

    def stop(self, timeout: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._out.close()


@contextmanager
def running_up(topology: Path, log: Path, *args: str) -> Iterator[Up]:
    up = Up(topology, log, *args)
    try:
        up.wait_for(r"^all up")
        yield up
    finally:
        # Whatever happened, leave no child behind: held by pidfds taken while they are up's
        # children, since after the stop their pids are free for any new process or thread to
        # take (pid_max is 32768 here and the suite wraps it), and a kill by number could then
        # hit another test's process, or a pytest worker through one of its threads.
        children = [fd for pid in up.pids().values() if (fd := _child_pidfd(pid, up.proc.pid)) is not None]
        try:
            up.stop()
        finally:
            for fd in children:
                with suppress(ProcessLookupError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                os.close(fd)


def _child_pidfd(pid: int, parent: int) -> int | None:
    """A pidfd of process ``pid`` if it is a child of ``parent`` now, else None."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    try:
        # Asked after the pidfd is taken: the process it holds is the one that had the pid then.
        stat = Path(f"/proc/{pid}/stat").read_text()
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        ppid = -1
    if ppid != parent:
        os.close(fd)
        return None
    return fd


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: its parent has not reaped it yet.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
