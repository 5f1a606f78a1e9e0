"""A standalone Spark cluster on this machine, from the PySpark wheel alone: a master and
workers, each its own JVM started with PySpark's ``spark-class`` (nothing installed by hand).

Executors then run in JVMs the workers start, with Python workers of their own: the
loader's code reaches them only through the archive the driver ships.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tributary.testing.ports import free_ports

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT = 90.0


@dataclass
class SparkStandalone:
    workdir: Path
    workers: int = 2
    master_port: int = 0
    ui_port: int = 0
    #: What the master's web UI last answered when it gave no state (for the timeout's message).
    last_answer: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        env = dict(
            os.environ,
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.workdir),
            SPARK_WORKER_DIR=str(self.workdir / f"{name}-work"),
        )
        # Each in its own process group: killing a worker's group takes its executors with it.
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def start(self) -> None:
        self.master_port, self.ui_port, *worker_ui = free_ports(2 + self.workers)
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.ui_port),
        )
        for n, port in enumerate(worker_ui, start=1):
            self._spawn(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(port),
                self.url,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while self.alive_workers() < self.workers:
            for process in self.processes:
                if process.poll() is not None:
                    raise AssertionError(f"a Spark daemon exited with {process.returncode}: {self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.alive_workers()} of {self.workers} workers registered (the master's last answer: "
                    f"{self.last_answer}): {self.logs()}"
                )
            time.sleep(0.2)

    def state(self) -> dict[str, object]:
        """The master's view (its web UI's ``/json/``), or {} while it cannot give one: not
        listening yet, or answering with a page instead of JSON (a CI run met an HTML page there
        in the master's first second, its log showing the UI bound to the right port; the cause
        is not established). A master that never answers JSON fails :meth:`start` by its
        deadline, with the last answer in the message."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                body = response.read()
        except OSError as exc:
            self.last_answer = repr(exc)
            return {}
        try:
            state: dict[str, object] = json.loads(body)
        except ValueError:
            self.last_answer = body[:200].decode(errors="replace")
            return {}
        return state

    def alive_workers(self) -> int:
        workers = self.state().get("workers", [])
        assert isinstance(workers, list)
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self.processes[1:] if p.poll() is None]

    def kill_worker_holding(self, pid: int) -> int:
        """Kill -9 the worker JVM under which process ``pid`` runs, and everything under it (its
        executors and their Python workers, which Spark starts in groups of their own), as the
        loss of that machine would; returns the worker's pid."""
        workers = set(self.worker_pids())
        current = pid
        while current not in workers:
            assert current > 1, f"process {pid} runs under no worker of this cluster"
            current = _parent(current)
        for victim in [current, *_descendants(current)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        return current

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in self.workdir.glob("*.log"))

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _parent(pid: int) -> int:
    # Fields after the command name's last ')': state, then the parent's pid.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                children.setdefault(_parent(int(entry.name)), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@contextlib.contextmanager
def spark_standalone(workdir: Path, workers: int = 2) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(workdir, workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
