"""A real ZooKeeper for tests, as a local ``java`` process from Debian's ``zookeeper`` package.

:class:`LocalZooKeeper` runs ``ZooKeeperServerMain`` on a free port with its own data directory
(short ticks, no fsync: durability of ZooKeeper is not what these tests test); it is a context
manager. :func:`new_chroot` gives each cluster or test a namespace of its own on a shared server,
and :func:`expire_session` makes the server expire a client's session, as a long partition would.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from kazoo.client import KazooClient

from tributary.deploy.appliance.launcher import ZOOKEEPER_JAR, zookeeper_command
from tributary.testing.ports import free_port

# Short ticks let tests negotiate short sessions (the server allows 2 ticks at the least).
TICK_TIME_MS = 200
# ...and the server's default ceiling is 20 ticks, 4 s here: a broker asking for 30 s got 4 without
# a word, and a test pausing a broker "past nothing" lost its registration under load. Sessions
# are granted up to this instead.
MAX_SESSION_TIMEOUT_MS = 120_000
START_TIMEOUT = 30.0


class ZooKeeperServer(Protocol):
    """What tests may do with a ZooKeeper server, whichever way it runs."""

    host: str
    port: int
    kind: str

    @property
    def hosts(self) -> str: ...
    def start(self) -> None: ...
    def stop(self, *, kill: bool = False) -> None: ...
    def restart(self) -> None: ...
    def running(self) -> bool: ...


def _four_letter(host: str, port: int, command: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def serving(host: str, port: int) -> bool:
    """Whether a ZooKeeper server answers on host:port with its database loaded."""
    try:
        # `srvr` (unlike `ruok`) answers "not currently serving" until the database is loaded.
        return b"Mode:" in _four_letter(host, port, b"srvr")
    except OSError:
        return False


def _wait_serving(host: str, port: int, deadline: float, alive: Any = None) -> None:
    delay = 0.02
    while not serving(host, port):
        if alive is not None and not alive():
            raise RuntimeError(f"ZooKeeper on port {port} exited while starting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"ZooKeeper on {host}:{port} did not answer within the start timeout")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def expire_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Make the server expire a live session, as a long network partition would.

    A second client attaches to the session (the server drops the owner's connection) and closes
    it; when the owner reconnects it is told its session expired, and its ephemeral nodes are gone.
    """
    server_only = hosts.split("/", 1)[0]
    client = KazooClient(hosts=server_only, client_id=client_id, timeout=5.0)
    try:
        client.start(timeout=10)
        client.stop()
    finally:
        client.close()


class LocalZooKeeper:
    """ZooKeeperServerMain in a child process, with its own port and data directory."""

    kind = "local process"

    def __init__(self, workdir: Path) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        data_dir = self._workdir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        config = self._workdir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={TICK_TIME_MS}",
                    f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
                    f"dataDir={data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=srvr,ruok",
                    # Durability is not under test; fsyncs only slow the suite down.
                    "forceSync=no",
                    "preAllocSize=1024",
                    "",
                ]
            )
        )
        return config

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        if self.running():
            return
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"{ZOOKEEPER_JAR} is missing: apt-get install zookeeper (Debian's package)")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not on PATH: ZooKeeper needs a Java runtime")
        for attempt in range(3):
            config = self._write_config()
            self._log = (self._workdir / "zookeeper.log").open("ab")
            self._process = subprocess.Popen(
                zookeeper_command(config, java),
                cwd=self._workdir,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                _wait_serving(self.host, self.port, time.monotonic() + START_TIMEOUT, self.running)
            except RuntimeError:
                self._reap()
                if attempt == 2:
                    raise
                # Someone else took the port between free_port() and the bind: pick another.
                self.port = free_port()
            except BaseException:
                self.stop(kill=True)
                raise
            else:
                return

    def _reap(self) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.wait(timeout=10)
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self, *, kill: bool = False) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        self._reap()

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(kill=True)


def new_chroot(hosts: str, prefix: str = "t") -> str:
    """A fresh, empty chroot on the server at ``hosts``, created now; returns the connection
    string that includes it (``host:port/prefix-<uuid>``). Brokers and tests that share a
    server each take one, so their clusters never see each other."""
    chroot = f"/{prefix}-{uuid.uuid4().hex}"
    client = KazooClient(hosts=hosts, timeout=5.0)
    try:
        client.start(timeout=10)
        client.ensure_path(chroot)
        client.stop()
    finally:
        client.close()
    return f"{hosts}{chroot}"
