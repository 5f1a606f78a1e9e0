"""What a process of the appliance costs before it does anything: CPU-seconds of start-up.

The test suite starts hundreds of ``tributary broker`` processes and more ``tributary`` CLI,
mirror and loader processes; operators pay the same start-up on every ``tributary topics ...``
command and every broker restart of a rolling upgrade. Each round runs, one after another:

* ``python``: ``python -c pass``, the interpreter alone: the peer every figure is divided by.
* ``libraries``: ``python -c "import trio, kazoo.client, prometheus_client"``, the third-party
  floor under a broker.
* ``import messages``: ``python -c "import tributary.protocol.messages"`` (every generated
  message class and its SPEC).
* ``import broker``: ``python -c "import tributary.deploy.cli.broker"``, everything
  ``tributary broker`` loads before it parses its arguments.
* ``broker start``: a ``tributary broker`` process (the ``tributary.testing`` kit's, against a
  LocalZooKeeper, a chroot of its own per round) from exec until it first answers Metadata
  listing itself and a controller; its CPU read from ``/proc/<pid>/stat`` at that moment.
* ``topics list``: ``tributary topics list --bootstrap ...`` against that broker, the whole
  command (a child's CPU from ``getrusage``).

CPU time, not wall time: the machine is shared, and what is measured is what a process costs
the cores. Whether the project's bytecode is cached matters (without ``.pyc`` files every
process compiles every module it imports: an editable install run with
``PYTHONDONTWRITEBYTECODE=1``); the output says which it was.

Run from the repository root (about a minute; --quick about 15 s)::

    .venv/bin/python -m bench.bench_startup [--quick] [--repeat N] [--json]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common
from bench.common import log
from bench.processes import cpu_seconds
from tributary.protocol.messages import MetadataRequest
from tributary.testing.cluster import START_TIMEOUT, BrokerProcess
from tributary.testing.wire import request
from tributary.testing.zookeeper import LocalZooKeeper, new_chroot

PYTHON = sys.executable
#: name -> the ``python -c`` program of the import contenders
PROGRAMS = {
    "python": "pass",
    "libraries": "import trio, kazoo.client, prometheus_client",
    "import messages": "import tributary.protocol.messages",
    "import broker": "import tributary.deploy.cli.broker",
}
CONTENDERS = [*PROGRAMS, "broker start", "topics list"]


def child_cpu(cmd: list[str]) -> float:
    """The CPU-seconds (user + system) of running ``cmd`` to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def serving(broker: BrokerProcess) -> float:
    """Waits until ``broker`` answers Metadata naming itself and a controller (the kit's
    readiness); returns its CPU-seconds at that moment."""
    deadline = time.monotonic() + START_TIMEOUT
    assert broker.proc is not None
    while time.monotonic() < deadline:
        if broker.proc.poll() is not None:
            raise RuntimeError(f"broker exited with {broker.proc.returncode}:\n{broker.log_tail()}")
        try:
            response = request(broker.address, MetadataRequest(topics=[]), 1, timeout=2)
            if response.brokers and response.controller_id >= 0:
                cpu = cpu_seconds(broker.proc.pid)
                assert cpu is not None
                return cpu
        except OSError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"broker not serving after {START_TIMEOUT} s:\n{broker.log_tail()}")


def one_round(zookeeper: str, scratch: Path, number: int) -> dict[str, float]:
    figures = {name: child_cpu([PYTHON, "-c", program]) for name, program in PROGRAMS.items()}
    broker = BrokerProcess(1, new_chroot(zookeeper), scratch / f"data-{number}", scratch / f"broker-{number}.log")
    broker.start()
    try:
        figures["broker start"] = serving(broker)
        topics = [PYTHON, "-m", "tributary.deploy.cli", "topics", "list", "--bootstrap", broker.bootstrap]
        figures["topics list"] = child_cpu(topics)
    finally:
        broker.stop()
    return figures


def bytecode_cached() -> bool:
    """Whether the project's modules have up-to-date ``.pyc`` files (checked on one of them)."""
    spec = importlib.util.find_spec("tributary.broker.server")
    assert spec is not None and spec.origin is not None
    cached = Path(importlib.util.cache_from_source(spec.origin))
    return cached.exists() and cached.stat().st_mtime >= Path(spec.origin).stat().st_mtime


def render(document: dict[str, object]) -> str:
    results: dict[str, dict[str, float]] = document["results"]  # type: ignore[assignment]
    rows = [[name, f"{r['median']:.3f}", f"{r['min']:.3f}", f"{r['ratio']:.1f}x"] for name, r in results.items()]
    cached = "cached" if document["bytecode_cached"] else "not cached (every process compiles the project)"
    return (
        common.table(["process", "CPU s (median)", "CPU s (min)", "vs python"], rows)
        + f"\n{document['rounds']} rounds; the project's bytecode {cached}; {document['machine']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (2 rounds)")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 7, 2 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--from-json", type=Path, default=None, metavar="FILE", help="print the table of a --json file")
    args = parser.parse_args()
    if args.from_json is not None:
        print(render(json.loads(args.from_json.read_text())))
        return 0
    rounds = args.repeat or (2 if args.quick else 7)
    runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp, LocalZooKeeper(Path(tmp) / "zk") as zk:
        for number in range(rounds):
            for name, cpu in one_round(zk.hosts, Path(tmp), number).items():
                runs[name].append(cpu)
            log(f"round {number + 1}/{rounds}: " + ", ".join(f"{n} {v[-1]:.3f}" for n, v in runs.items()))
    # Per-round ratios to the bare interpreter of the same round, then their median.
    results = {
        name: {
            "median": statistics.median(times),
            "min": min(times),
            "ratio": statistics.median(t / p for t, p in zip(times, runs["python"], strict=True)),
        }
        for name, times in runs.items()
    }
    document = {
        "rounds": rounds,
        "bytecode_cached": bytecode_cached(),
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "machine": common.machine_line(),
        "results": results,
    }
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
