"""A stand-in for `systemctl`, for tests on machines where systemd does not run.

It does what the Ansible roles ask of systemd (through ansible.builtin.systemd_service) with
the units they rendered: `start` runs every `ExecStartPre=` to completion and then the
`ExecStart=` command line, detached, with the unit's `Environment=` and `WorkingDirectory=`;
`stop` sends SIGTERM and waits; `restart` is both; `show`, `is-enabled`, `enable` and
`daemon-reload` answer what the module needs. No Restart=, no dependencies, no cgroups.

For the rolling-restart test, every `restart` of a broker unit is recorded in `events.jsonl`
with, at the moment it began, whether each other broker of the same cluster answered on its
PLAINTEXT listener (a Metadata answer that lists it): a roll that goes on before a restarted
broker is back shows up as a broker found down.

State lives in $TRIBUTARY_SYSTEMD_STATE (pid files, logs, events); units are looked up in the
directories of $TRIBUTARY_SYSTEMD_UNIT_DIRS (os.pathsep-separated). The test itself starts
units with `start()`, so processes it started and processes Ansible restarts are one set.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

STOP_TIMEOUT = 60.0


@dataclass
class Unit:
    path: Path
    sections: dict[str, dict[str, list[str]]]

    @property
    def name(self) -> str:
        return self.path.name

    def get(self, section: str, key: str) -> list[str]:
        return self.sections.get(section, {}).get(key, [])

    def one(self, section: str, key: str) -> str:
        (value,) = self.get(section, key)
        return value

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.one("Service", "ExecStart"))

    @property
    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for line in self.get("Service", "Environment"):
            for assignment in shlex.split(line):
                key, _, value = assignment.partition("=")
                env[key] = value
        return env


def read_unit(path: Path) -> Unit:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return Unit(path, sections)


def state_dir() -> Path:
    path = Path(os.environ["TRIBUTARY_SYSTEMD_STATE"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def unit_paths() -> list[Path]:
    dirs = [Path(d) for d in os.environ.get("TRIBUTARY_SYSTEMD_UNIT_DIRS", "").split(os.pathsep) if d]
    return sorted(p for d in dirs if d.is_dir() for p in d.iterdir() if p.suffix in (".service", ".timer"))


def find_unit(name: str) -> Unit | None:
    return next((read_unit(p) for p in unit_paths() if p.name == name), None)


def _state(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of process ``pid``; None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def alive(pid: int, started: int | None = None) -> bool:
    """Running and not a zombie (a child the test has not reaped yet counts as gone), and, given
    ``started``, the process that started then: pids are reused (pid_max is 32768 here and the
    suite wraps it), and a unit's process that died long ago has left its number to another."""
    state = _state(pid)
    return state is not None and state[0] != "Z" and (started is None or state[1] == started)


def _pid_file(name: str) -> tuple[int, int | None] | None:
    """The unit's (pid, start time) as start() wrote them; None if it never started."""
    try:
        pid, *started = (state_dir() / f"{name}.pid").read_text().split()
    except FileNotFoundError:
        return None
    return int(pid), int(started[0]) if started else None


def pid_of(name: str) -> int | None:
    recorded = _pid_file(name)
    if recorded is None:
        return None
    pid, started = recorded
    return pid if alive(pid, started) else None


def active(name: str) -> bool:
    if name.endswith(".timer"):
        return (state_dir() / f"{name}.active").exists()
    return pid_of(name) is not None


def start(unit: Unit) -> subprocess.Popen[bytes] | None:
    """Start the unit as systemd would; returns the process (None for a timer)."""
    if unit.name.endswith(".timer"):
        (state_dir() / f"{unit.name}.active").touch()
        return None
    env = {**os.environ, **unit.environment}
    cwd = unit.get("Service", "WorkingDirectory")
    log = state_dir() / f"{unit.name}.log"
    with log.open("ab") as out:
        for pre in unit.get("Service", "ExecStartPre"):
            done = subprocess.run(shlex.split(pre), env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{unit.name}: ExecStartPre exited {done.returncode}: {pre}")
        process = subprocess.Popen(
            unit.argv,
            env=env,
            cwd=cwd[0] if cwd else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Read while the process is this one's unreaped child: its pid cannot be another's yet.
    state = _state(process.pid)
    (state_dir() / f"{unit.name}.pid").write_text(f"{process.pid} {state[1] if state else ''}")
    return process


def stop(name: str, timeout: float = STOP_TIMEOUT) -> None:
    (state_dir() / f"{name}.active").unlink(missing_ok=True)
    recorded = _pid_file(name)
    if recorded is None:
        return
    pid, started = recorded
    try:
        process = os.pidfd_open(pid)  # signals through it reach this process or none
    except ProcessLookupError:
        return
    try:
        if not alive(pid, started):  # asked after the pidfd is taken: about the process it holds
            return
        signal.pidfd_send_signal(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(pid, started):
            if time.monotonic() > deadline:
                signal.pidfd_send_signal(process, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)
    except ProcessLookupError:
        pass  # it exited meanwhile
    finally:
        os.close(process)


def _serves(unit: Unit) -> bool:
    """Whether the unit's broker answers a Metadata request listing itself: registered in
    ZooKeeper and serving (an open port alone is not that: it is bound before registering)."""
    from tributary.protocol.messages import MetadataRequest  # noqa: PLC0415
    from tributary.testing.wire import request  # noqa: PLC0415

    argv = unit.argv
    config = tomllib.loads(Path(argv[argv.index("--config") + 1]).read_text())
    host, _, port = _plaintext_address(config).rpartition(":")
    try:
        response = request((host, int(port)), MetadataRequest(topics=[]), 1, timeout=2)
    except OSError:
        return False
    return any(b.node_id == config["id"] for b in response.brokers)


def _plaintext_address(config: dict[str, object]) -> str:
    """The broker's address on a PLAINTEXT listener: ``listen``, or among named ``listeners``."""
    if "listen" in config:
        return str(config["listen"])
    protocols = dict(item.split(":", 1) for item in str(config["listener.security.protocol.map"]).split(","))
    for listener in str(config["listeners"]).split(","):
        name, _, address = listener.partition("://")
        if protocols.get(name, name) == "PLAINTEXT":
            return address
    raise ValueError("the broker has no PLAINTEXT listener to ask")


def _record_restart(unit: Unit) -> None:
    prefix = "tributary-broker-"
    if not unit.name.startswith(prefix):
        return
    cluster = unit.name.removeprefix(prefix).rsplit("-", 1)[0]
    others = [
        read_unit(p)
        for p in unit_paths()
        if p.name.startswith(f"{prefix}{cluster}-") and p.name.endswith(".service") and p.name != unit.name
    ]
    event = {
        "unit": unit.name,
        "time": time.time(),
        "others_up": {other.name: _serves(other) for other in others},
    }
    with (state_dir() / "events.jsonl").open("a") as events:
        events.write(json.dumps(event) + "\n")


def main(argv: Sequence[str] | None = None) -> int:  # noqa: PLR0911 (one exit status per verb)
    args = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("--")]
    if not args:
        return 0
    command, names = args[0], args[1:]
    if command in ("daemon-reload", "daemon-reexec"):
        return 0
    (name,) = names
    unit = find_unit(name)
    if command == "show":
        running = unit is not None and active(name)
        print(f"Id={name}")
        print(f"LoadState={'loaded' if unit else 'not-found'}")
        print(f"ActiveState={'active' if running else 'inactive'}")
        print(f"SubState={'running' if running else 'dead'}")
        return 0
    if unit is None:
        print(f"Unit {name} not found.", file=sys.stderr)
        return 5
    enabled = state_dir() / f"{name}.enabled"
    if command == "is-enabled":
        print("enabled" if enabled.exists() else "disabled")
        return 0 if enabled.exists() else 1
    if command == "enable":
        enabled.touch()
    elif command == "disable":
        enabled.unlink(missing_ok=True)
    elif command == "start":
        if not active(name):
            start(unit)
    elif command == "stop":
        stop(name)
    elif command == "restart":
        _record_restart(unit)
        stop(name)
        start(unit)
    elif command == "is-active":
        print("active" if active(name) else "inactive")
        return 0 if active(name) else 3
    else:
        print(f"systemctl stand-in: unsupported command {command!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
