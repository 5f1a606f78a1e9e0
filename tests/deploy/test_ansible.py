"""The Ansible roles, applied for real and then run: install, render, start, mirror, load.

`ansible-playbook site.yml` runs (not --check) against the dynamic inventory of a test topology:
three datacenters on their own loopback addresses (east 127.0.1.1, west 127.0.2.1, aggregate
127.0.3.1), free ports, `ansible_connection: local` (the inventory gives loopback hosts that), each
host with its own install root under tmp_path, no privilege escalation and no systemd.

systemd cannot run here, so after the playbook the test reads the rendered units and starts
exactly their `ExecStart` command lines (with their `Environment=` and `WorkingDirectory=`):
the ZooKeeper servers, the brokers, the mirrors; it produces into east and west, waits until the
aggregate holds every record, then runs the load timer's service and checks its summary.
Last, an upgrade: broker.yml again with a changed broker setting and service management on,
`systemctl` being tests/deploy/systemctl.py (same start semantics, same processes): the brokers
restart one at a time while the rest of their cluster serves, and the aggregate keeps its data.

Security, on throughout: every cluster's brokers replicate, and the mirrors and the load connect,
over a SASL_SSL listener (INTERNAL), logging in with SCRAM-SHA-512 as the users the broker role
created in ZooKeeper before the brokers started, with the ACLs the inventory computed
(deploy/appliance/principals.py); the certificates come from the pki role (openssl on the
controller), the passwords from an ansible-vault file the test encrypts. A second listener, APPS
(PLAINTEXT), is what the test's own clients use, as applications of a datacenter would. ZooKeeper
is started by the playbook itself (through the systemctl stand-in), since the users and ACLs are
written into it before any broker runs.

Installing: the roles install a wheel of this checkout with `pip --no-deps` into a virtualenv
per host. The dependencies (pyspark alone is hundreds of MB) are not downloaded again: the test
makes each host's virtualenv first (as the role would) with a `.pth` line naming the project
virtualenv's site-packages, the way a host image with the dependencies preinstalled would (the
broker role runs the installed `tributary` during the play, to create users and ACLs). So what
the role does is what runs (`<root>/venv/bin/tributary`), and the test downloads nothing (the
wheel is built by tests/wheel.py without build isolation).
"""

from __future__ import annotations

import contextlib
import getpass
import grp
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import systemctl
from tests.deploy.systemctl import Unit, read_unit
from tests.fixtures.prometheus import fetch_text
from tests.wheel import build_wheel
from tributary.protocol.messages import MetadataRequest
from tributary.testing.ports import free_ports
from tributary.testing.wire import request
from tributary.testing.zookeeper import serving

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
INVENTORY_SCRIPT = ANSIBLE_DIR / "inventories" / "topology.py"
BIN = Path(sys.executable).parent
HOSTS = {"east": "127.0.1.1", "west": "127.0.2.1", "aggregate": "127.0.3.1"}
START_TIMEOUT = 60.0


def ansible_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        {
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp" / "local"),
            "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-tmp" / "remote"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            # Modules go to the host's Python over stdin instead of as files copied first: a
            # third fewer steps per task (the playbook's time is mostly per-task overhead).
            "ANSIBLE_PIPELINING": "1",
        }
    )
    env.update(extra)
    return env


# ---- the package to deploy


# ---- the test topology and inventory


@dataclass
class Plan:
    """Where everything of the test appliance listens."""

    zookeeper: dict[str, int]
    # cluster -> (id, INTERNAL port (SASL_SSL), metrics port, APPS port (PLAINTEXT))
    brokers: dict[str, list[tuple[int, int, int, int]]]
    mirror_metrics: dict[str, int]

    def bootstrap(self, cluster: str) -> str:
        """The APPS listener (PLAINTEXT): what the test's own clients use."""
        return ",".join(f"{HOSTS[cluster]}:{apps}" for _, _, _, apps in self.brokers[cluster])

    def secure_bootstrap(self, cluster: str) -> str:
        """The INTERNAL listener (SASL_SSL): replication, the mirrors and the load."""
        return ",".join(f"{HOSTS[cluster]}:{port}" for _, port, _, _ in self.brokers[cluster])


def make_plan() -> Plan:
    ports = iter(free_ports(21))
    brokers_per_cluster = {"east": 2, "west": 1, "aggregate": 2}
    return Plan(
        zookeeper={dc: next(ports) for dc in HOSTS},
        brokers={
            dc: [(i, next(ports), next(ports), next(ports)) for i in range(1, count + 1)]
            for dc, count in brokers_per_cluster.items()
        },
        mirror_metrics={"east": next(ports), "west": next(ports)},
    )


#: The users the topology calls for (principals.py), and their passwords, kept in the vault.
PASSWORDS = {
    "broker-east": "east-brokers-pw",
    "broker-west": "west-brokers-pw",
    "broker-aggregate": "aggregate-brokers-pw",
    "admin": "admin-pw",
    "mirror-east": "mirror-east-pw",
    "mirror-west": "mirror-west-pw",
    "loader-nightly": "loader-pw",
}


def write_topology(path: Path, plan: Plan, data: Path) -> None:
    lines = [
        "[datacenters.east]",
        "[datacenters.west]",
        "[datacenters.aggregate]",
        "hadoop = true",
        "",
    ]
    for dc, host in HOSTS.items():
        brokers = ", ".join(
            f'{{ id = {i}, host = "{host}", port = {port}, ports = {{ APPS = {apps} }}, '
            f'data_dir = "{data}/{dc}/broker-{i}", metrics_port = {metrics} }}'
            for i, port, metrics, apps in plan.brokers[dc]
        )
        lines += [
            f"[clusters.{dc}]",
            f'datacenter = "{dc}"',
            # Replication, the mirrors and the load over SASL_SSL; the test's clients on APPS.
            'listeners = { INTERNAL = "SASL_SSL", APPS = "PLAINTEXT" }',
            f'zookeeper = {{ servers = ["{host}:{plan.zookeeper[dc]}"], chroot = "/tributary/{dc}", '
            f'data_dir = "{data}/{dc}/zookeeper" }}',
            'topic_defaults = { "num.partitions" = 2 }',
            f"brokers = [ {brokers} ]",
            "",
        ]
    for alias in ("east", "west"):
        lines += [
            f"[mirrors.{alias}]",
            f'source = "{alias}"',
            'target = "aggregate"',
            'exclude = "^__.*"',
            f"metrics_port = {plan.mirror_metrics[alias]}",
            f'host = "{HOSTS["aggregate"]}"',
            "",
        ]
    lines += [
        "[security]",
        'sasl_mechanism = "SCRAM-SHA-512"',
        "authorizer = true",
        "",
        "[loads.nightly]",
        'cluster = "aggregate"',
        f'output = "{data}/warehouse"',
        'schedule = "*-*-* 02:30:00"',
        'master = "local[2]"',
        'topics = "^(east|west)\\\\..*"',
        f'metrics_file = "{data}/loads/nightly.prom"',
        f'summary_json = "{data}/loads/nightly.json"',
    ]
    path.write_text("\n".join(lines) + "\n")


def write_vault(tmp_path: Path) -> list[str]:
    """The passwords in an ansible-vault encrypted vars file, as an operator keeps them; the
    options that give it to ansible-playbook."""
    password_file = tmp_path / "vault-password"
    password_file.write_text("the-vault-password\n")
    password_file.chmod(0o600)
    secrets = tmp_path / "secrets.yml"
    secrets.write_text(json.dumps({"tributary_passwords": PASSWORDS}))
    subprocess.run(
        [str(BIN / "ansible-vault"), "encrypt", "--vault-password-file", str(password_file), str(secrets)],
        env=ansible_env(tmp_path), capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    assert secrets.read_text().startswith("$ANSIBLE_VAULT;")
    return ["--vault-password-file", str(password_file), "-e", f"@{secrets}"]


def write_local_vars(path: Path, roots: Path, wheel: Path) -> None:
    """The second inventory source: what makes the hosts a sandbox on this machine."""
    user = getpass.getuser()
    group = grp.getgrgid(os.getgid()).gr_name
    java = shutil.which("java") or "/usr/bin/java"
    common = {
        "ansible_python_interpreter": sys.executable,
        "tributary_become": False,
        "tributary_create_user": False,
        "tributary_user": user,
        "tributary_group": group,
        "tributary_manage_services": False,
        "tributary_systemd_dir": "{{ tributary_root }}/systemd",
        "tributary_python": sys.executable,
        "tributary_package_wheel": str(wheel),
        # The dependencies come from the project's virtualenv (module docstring).
        "tributary_pip_extra_args": "--no-deps",
        "zookeeper_install_package": False,
        # ZooKeeper runs from the playbook on (through the systemctl stand-in): the broker role
        # writes the users and ACLs into it before any broker starts.
        "zookeeper_manage_services": True,
        "tributary_pki_dir": str(path.parent / "pki"),
        "zookeeper_java": java,
        "zookeeper_heap": "128m",
        "loader_install_java": False,
    }
    hosts = {host: {"tributary_root": str(roots / dc)} for dc, host in HOSTS.items()}
    path.write_text(json.dumps({"all": {"vars": common, "hosts": hosts}}, indent=2))


def run_playbook(
    tmp_path: Path, topology: Path, local_vars: Path, playbook: str = "site.yml", *extra: str, **env: str
) -> str:
    result = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i", str(INVENTORY_SCRIPT),
            "-i", str(local_vars),
            *extra,
            str(ANSIBLE_DIR / playbook),
        ],
        cwd=tmp_path,
        env=ansible_env(tmp_path, TRIBUTARY_TOPOLOGY=str(topology), **env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"ansible-playbook failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP: host -> {ok, changed, failed, ...}."""
    hosts: dict[str, dict[str, int]] = {}
    for line in output.split("PLAY RECAP", 1)[1].splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if match:
            hosts[match[1]] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match[2])}
    return hosts


# ---- the rendered systemd units, run without systemd


@dataclass
class Running:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Supervisor:
    """Starts units as systemd would (tests/deploy/systemctl.py: ExecStartPre, then ExecStart),
    in the stand-in's state, so `systemctl restart` from a later playbook run finds them."""

    running: list[Running] = field(default_factory=list)

    def start(self, unit: Unit) -> Running:
        process = systemctl.start(unit)
        assert process is not None, unit.name
        child = Running(unit.name, process, systemctl.state_dir() / f"{unit.name}.log")
        self.running.append(child)
        return child

    def stop(self, child: Running, timeout: float = 30.0) -> int:
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
        try:
            return child.process.wait(timeout)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
            raise

    def stop_all(self) -> None:
        for child in reversed(self.running):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.stop(child)
        # What the stand-in started on Ansible's behalf (restarted brokers) is no child of ours.
        for pid_file in systemctl.state_dir().glob("*.pid"):
            systemctl.stop(pid_file.name.removesuffix(".pid"), timeout=30.0)


def wait_until(condition: Any, what: str, timeout: float = START_TIMEOUT, children: Sequence[Running] = ()) -> Any:
    """Poll ``condition`` until it is truthy (returned), failing early if a child exits."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        for child in children:
            if child.process.poll() is not None:
                raise AssertionError(
                    f"{child.name} exited with {child.process.returncode} while waiting for {what}:\n{child.tail()}"
                )
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            details = "\n".join(f"--- {c.name}\n{c.tail(15)}" for c in children)
            raise AssertionError(f"timed out waiting for {what}\n{details}")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def cluster_brokers(host: str, port: int) -> int:
    """How many brokers the cluster's metadata lists (0 while not answering or leaderless)."""
    try:
        response = request((host, port), MetadataRequest(topics=[]), 1, timeout=2)
    except OSError:
        return 0
    return len(response.brokers) if response.controller_id >= 0 else 0


def site_packages_line() -> str:
    """The project virtualenv's site-packages, for the deployed virtualenvs' .pth file."""
    return sysconfig.get_paths()["purelib"] + "\n"


def prepare_virtualenvs(roots: Path) -> None:
    """Each host's virtualenv, made as the role makes it (``python -m venv``, which the role then
    finds and installs into), with the dependencies of the project's own (module docstring)."""
    making = [
        subprocess.Popen([sys.executable, "-m", "venv", str(roots / dc / "venv")], stdout=subprocess.DEVNULL)
        for dc in HOSTS
    ]
    assert all(process.wait(timeout=300) == 0 for process in making)
    for dc in HOSTS:
        (site_packages,) = (roots / dc / "venv").glob("lib/python*/site-packages")
        (site_packages / "tributary-test-deps.pth").write_text(site_packages_line())


# ---- traffic, through a real client


TOPICS = ("pageviews", "clicks")
RECORDS_PER_TOPIC = 300


def produce_activity(bootstrap: str, datacenter: str) -> dict[str, int]:
    """JSON activity events into every topic of TOPICS, zstd batches; returns records per topic."""
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 20, "enable.idempotence": True}
    )
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    for topic in TOPICS:
        for i in range(RECORDS_PER_TOPIC):
            event = {"dc": datacenter, "event": topic, "user": f"u{i % 37}", "url": f"https://example.net/p/{i % 11}",
                     "agent": "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0", "seq": i}  # fmt: skip
            producer.produce(topic, json.dumps(event).encode(), key=f"u{i % 37}".encode(), on_delivery=delivered)
            producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not failures, (remaining, failures[:3])
    return dict.fromkeys(TOPICS, RECORDS_PER_TOPIC)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int] | None:
    """Partition -> high watermark, or None while the topic is not there yet."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tributary-test-watermarks"})
    try:
        metadata = consumer.list_topics(topic, timeout=5)
        partitions = metadata.topics[topic].partitions if topic in metadata.topics else {}
        if not partitions or metadata.topics[topic].error is not None:
            return None
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in partitions}
    finally:
        consumer.close()


def all_end_offsets(bootstrap: str, topics: list[str]) -> dict[str, dict[int, int] | None] | None:
    """End offsets of every topic, or None while a partition has no leader answering yet."""
    from confluent_kafka import KafkaException  # noqa: PLC0415

    try:
        return {t: end_offsets(bootstrap, t) for t in topics}
    except KafkaException:
        return None


def logins_counted(host: str, metrics_ports: list[int]) -> float:
    """SCRAM-SHA-512 logins the brokers counted on their INTERNAL (SASL_SSL) listener."""
    total = 0.0
    for port in metrics_ports:
        body = fetch_text(port, host=host)[2]
        labels = r'\{listener="INTERNAL",mechanism="SCRAM-SHA-512"\}'
        for match in re.finditer(
            rf"^tributary_broker_successful_authentication_total{labels} (\S+)$", body, re.MULTILINE
        ):
            total += float(match[1])
    return total


def denied_write(bootstrap: str, user: str, topic: str, tmp_path: Path) -> bool:
    """Whether ``user``, logged in over SASL_SSL, is refused a write to ``topic``."""
    from confluent_kafka import KafkaError, Producer  # noqa: PLC0415

    outcome: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            "ssl.ca.location": str(tmp_path / "pki" / "ca.pem"),
            "message.timeout.ms": 10000,
        }
    )
    producer.produce(topic, b"not allowed", on_delivery=lambda error, _message: outcome.append(error))
    producer.flush(20)
    return bool(outcome) and outcome[0] is not None and outcome[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# ---- lint


def test_ansible_lint_production_profile_is_clean(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor", "ansible/"],
        cwd=REPO,
        env=ansible_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert "Profile 'production' was required, and it passed" in report, report
    # Not a pass over nothing: every role, playbook and inventory file was read.
    processed = re.search(r"in (\d+) files processed", report)
    assert processed is not None and int(processed[1]) >= 30, report


# ---- the test


def install_systemctl_standin(bin_dir: Path) -> None:
    """`systemctl` on PATH for the playbook: tests/deploy/systemctl.py, run by this Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "systemctl"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.deploy.systemctl import main\n"
        "sys.exit(main())\n"
    )
    script.chmod(0o755)


@pytest.fixture
def deployed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """site.yml applied to the test topology; yields what the test needs to look at."""
    roots = tmp_path / "hosts"
    # The systemctl stand-in's state and where it finds units; the test's own starts use it too.
    monkeypatch.setenv("TRIBUTARY_SYSTEMD_STATE", str(tmp_path / "systemd-state"))
    monkeypatch.setenv("TRIBUTARY_SYSTEMD_UNIT_DIRS", os.pathsep.join(str(roots / dc / "systemd") for dc in HOSTS))
    install_systemctl_standin(tmp_path / "bin")
    wheel = build_wheel(tmp_path / "build")
    plan = make_plan()
    data = tmp_path / "data"
    topology = tmp_path / "topology.toml"
    write_topology(topology, plan, data)
    local_vars = tmp_path / "local-hosts.json"
    write_local_vars(local_vars, roots, wheel)
    vault = write_vault(tmp_path)
    prepare_virtualenvs(roots)
    path = f"{tmp_path / 'bin'}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    started = time.monotonic()
    output = run_playbook(tmp_path, topology, local_vars, "site.yml", *vault, PATH=path)
    yield {
        "plan": plan,
        "data": data,
        "roots": roots,
        "topology": topology,
        "local_vars": local_vars,
        "output": output,
        "seconds": time.monotonic() - started,
        "tmp_path": tmp_path,
        "vault": vault,
        "path": path,
    }


def test_site_playbook_deploys_a_running_appliance(deployed: dict[str, Any]) -> None:
    print(f"ansible-playbook site.yml: {deployed['seconds']:.1f} s")
    phase_started = time.monotonic()
    plan: Plan = deployed["plan"]
    roots: Path = deployed["roots"]
    data: Path = deployed["data"]
    tmp_path: Path = deployed["tmp_path"]
    ran = recap(deployed["output"])
    assert set(ran) == set(HOSTS.values())
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in ran.values()), ran

    # What landed where: units per host, mirrors and the load only in the aggregate datacenter.
    units = {dc: sorted(p.name for p in (roots / dc / "systemd").iterdir()) for dc in HOSTS}
    assert units["east"] == [
        "tributary-broker-east-1.service",
        "tributary-broker-east-2.service",
        "tributary-zookeeper-east.service",
    ]
    assert units["west"] == ["tributary-broker-west-1.service", "tributary-zookeeper-west.service"]
    assert units["aggregate"] == [
        "tributary-broker-aggregate-1.service",
        "tributary-broker-aggregate-2.service",
        "tributary-load-nightly.service",
        "tributary-load-nightly.timer",
        "tributary-mirror-east-1.service",
        "tributary-mirror-west-1.service",
        "tributary-zookeeper-aggregate.service",
    ]
    # The configs say what the topology says.
    east2 = tomllib.loads((roots / "east" / "etc" / "broker-east-2.toml").read_text())
    _, east2_port, east2_metrics, east2_apps = plan.brokers["east"][1]
    assert east2["id"] == 2
    assert (
        east2["listeners"]
        == east2["advertised.listeners"]
        == (f"INTERNAL://127.0.1.1:{east2_port},APPS://127.0.1.1:{east2_apps}")
    )
    assert east2["listener.security.protocol.map"] == "INTERNAL:SASL_SSL,APPS:PLAINTEXT"
    assert east2["inter.broker.listener.name"] == "INTERNAL"
    assert east2["sasl.inter.broker.username"] == "broker-east"
    assert east2["super.users"] == "User:broker-east;User:admin;User:ANONYMOUS"
    assert east2["zookeeper"] == f"127.0.1.1:{plan.zookeeper['east']}/tributary/east"
    # The metrics endpoint on the broker's own address, where a Prometheus elsewhere scrapes it.
    assert east2["metrics"] == {"port": east2_metrics, "host": "127.0.1.1"}
    assert east2["num.partitions"] == 2  # settings keys are quoted: one key each, as Kafka names it
    assert east2["data-dir"] == str(data / "east" / "broker-2")
    # Secrets: the password in a file only the service account reads, never in a config.
    password_file = roots / "east" / "etc" / "secrets" / "broker-east.password"
    assert east2["sasl.inter.broker.password"] == f"${{file:{password_file}}}"
    assert password_file.read_text() == PASSWORDS["broker-east"] + "\n"
    assert password_file.stat().st_mode & 0o077 == 0
    keystore = roots / "east" / "etc" / "tls" / "127.0.1.1-keystore.pem"
    assert east2["ssl.keystore.location"] == str(keystore) and keystore.stat().st_mode & 0o077 == 0
    for path in (roots / "east" / "etc").rglob("*.toml"):
        assert not any(pw in path.read_text() for pw in PASSWORDS.values()), path
    zoo_cfg = (roots / "west" / "etc" / "zookeeper-west.cfg").read_text().splitlines()
    assert f"clientPort={plan.zookeeper['west']}" in zoo_cfg
    assert (data / "west" / "zookeeper" / "myid").read_text().strip() == "1"
    mirror_west = tomllib.loads((roots / "aggregate" / "etc" / "mirror-west-1.toml").read_text())
    assert mirror_west["source"] == plan.secure_bootstrap("west")
    assert mirror_west["target"] == plan.secure_bootstrap("aggregate")
    assert (mirror_west["source-alias"], mirror_west["metrics-port"]) == ("west", plan.mirror_metrics["west"])
    assert mirror_west["metrics-host"] == HOSTS["aggregate"]
    for side in ("source", "target"):
        assert mirror_west["security"][side] == {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "mirror-west",
            "sasl.password": f"${{file:{roots / 'aggregate' / 'etc' / 'secrets' / 'mirror-west.password'}}}",
            "ssl.ca.location": str(roots / "aggregate" / "etc" / "tls" / "ca.pem"),
        }
    load_config = tomllib.loads((roots / "aggregate" / "etc" / "load-nightly.toml").read_text())
    assert load_config["bootstrap"] == plan.secure_bootstrap("aggregate")
    assert load_config["security"]["sasl.username"] == "loader-nightly"
    # One CA for everything, made with openssl on the controller, the key left there.
    assert (tmp_path / "pki" / "ca-key.pem").exists()
    assert not list(roots.rglob("ca-key.pem"))
    timer = read_unit(roots / "aggregate" / "systemd" / "tributary-load-nightly.timer")
    assert timer.one("Timer", "OnCalendar") == "*-*-* 02:30:00"
    assert timer.one("Timer", "Unit") == "tributary-load-nightly.service"
    # Each host got its own virtualenv with the package in it.
    for dc in HOSTS:
        assert list((roots / dc / "venv").glob("lib/python*/site-packages/tributary-*.dist-info")), dc

    supervisor = Supervisor()
    try:

        def unit(dc: str, name: str) -> Unit:
            return read_unit(roots / dc / "systemd" / name)

        # ZooKeeper is running: the playbook started it (the stand-in) and wrote the users and
        # ACLs into it before any broker ran.
        for dc, host in HOSTS.items():
            assert systemctl.pid_of(f"tributary-zookeeper-{dc}.service") is not None, dc
            wait_until(lambda h=host, p=plan.zookeeper[dc]: serving(h, p), f"ZooKeeper {dc}")
        brokers = [
            supervisor.start(unit(dc, f"tributary-broker-{dc}-{i}.service"))
            for dc in HOSTS
            for i, _, _, _ in plan.brokers[dc]
        ]
        for dc, host in HOSTS.items():
            count = len(plan.brokers[dc])
            for _, _, _, apps in plan.brokers[dc]:
                wait_until(lambda h=host, p=apps, n=count: cluster_brokers(h, p) == n, f"cluster {dc} on {apps}",
                           children=brokers)  # fmt: skip
        # The metrics ports came from the topology through the inventory.
        _, _, metrics_port, _ = plan.brokers["aggregate"][1]
        status, _, body = fetch_text(metrics_port, host=HOSTS["aggregate"])
        assert status == 200
        assert "tributary_broker" in body

        print(f"ZooKeeper and brokers from their units: {time.monotonic() - phase_started:.1f} s")
        phase_started = time.monotonic()
        # Traffic at the sources, then the mirrors (in the aggregate datacenter) copy it.
        produced = {dc: produce_activity(plan.bootstrap(dc), dc) for dc in ("east", "west")}
        source_ends = {(dc, t): end_offsets(plan.bootstrap(dc), t) for dc in produced for t in TOPICS}
        mirrors = [supervisor.start(unit("aggregate", f"tributary-mirror-{dc}-1.service")) for dc in produced]
        aggregate = plan.bootstrap("aggregate")
        for (dc, topic), ends in source_ends.items():
            # Batches map one to one, so the copy ends where the source ends, partition by partition.
            wait_until(lambda t=f"{dc}.{topic}", e=ends: end_offsets(aggregate, t) == e,
                       f"{dc}.{topic} in the aggregate", timeout=120, children=mirrors + brokers)  # fmt: skip
        scrape = fetch_text(plan.mirror_metrics["east"], host=HOSTS["aggregate"])[2]
        assert re.search(r'tributary_mirror_copied_records_total\{source="east",topic="clicks"\} 300\.0', scrape), (
            scrape
        )
        # They did log in, over SASL_SSL: the source and aggregate brokers counted the logins.
        for dc in ("west", "aggregate"):
            logins = logins_counted(HOSTS[dc], [m for _, _, m, _ in plan.brokers[dc]])
            assert logins > 0, dc
        # And the ACLs hold: a mirror may not write another mirror's topics.
        assert denied_write(plan.secure_bootstrap("aggregate"), "mirror-east", "west.pageviews", tmp_path)

        print(f"produce and mirror {sum(sum(p.values()) for p in produced.values())} records: "
              f"{time.monotonic() - phase_started:.1f} s")  # fmt: skip
        phase_started = time.monotonic()
        # The nightly load, as its timer would start it: the service's ExecStart, to completion.
        load = unit("aggregate", "tributary-load-nightly.service")
        summary_path = Path(option(load.argv, "--summary-json"))
        loader = supervisor.start(load)
        wait_until(lambda: loader.process.poll() is not None, "the load to finish", timeout=400)
        assert loader.process.returncode == 0, loader.tail(60)
        summary = json.loads(summary_path.read_text())
        assert summary["records"] == sum(sum(per_topic.values()) for per_topic in produced.values())
        loaded = {(row["source_datacenter"], row["source_topic"]): row["records"] for row in summary["by_topic"]}
        assert loaded == {(dc, t): n for dc, per_topic in produced.items() for t, n in per_topic.items()}
        assert list((data / "warehouse").rglob("*.parquet"))
        print(f"the load: {time.monotonic() - phase_started:.1f} s")
        assert denied_write(plan.secure_bootstrap("aggregate"), "loader-nightly", "east.pageviews", tmp_path)
        metrics_file = Path(option(load.argv, "--metrics-file"))
        assert "tributary_loader_last_run_success 1" in metrics_file.read_text()

        # SIGTERM, as `systemctl stop` sends it: the mirrors flush and exit 0.
        for mirror in mirrors:
            assert supervisor.stop(mirror) == 0, mirror.tail()

        # An upgrade: a changed broker setting, broker.yml with service management on. systemd is
        # the stand-in (tests/deploy/systemctl.py): it restarts the very processes started above
        # and notes, as each restart begins, which other brokers of that cluster answer.
        phase_started = time.monotonic()
        aggregate_ends = {
            t: end_offsets(aggregate, t) for t in (f"{dc}.{topic}" for dc in produced for topic in TOPICS)
        }
        pids_before = {b.name: b.process.pid for b in brokers}
        upgrade = tmp_path / "upgrade.json"
        # max.connections and max.connections.per.ip together: TOML holds both only as quoted keys.
        changed = {"log.flush.interval.ms": 500, "max.connections": 1000, "max.connections.per.ip": 500}
        upgrade.write_text(json.dumps({"tributary_manage_services": True, "broker_settings": changed}))
        output = run_playbook(
            tmp_path, deployed["topology"], deployed["local_vars"], "broker.yml", "-e", f"@{upgrade}",
            *deployed["vault"], PATH=deployed["path"],
        )  # fmt: skip
        assert all(r["failed"] == 0 for r in recap(output).values()), output
        events_file = systemctl.state_dir() / "events.jsonl"
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        # One at a time, host after host, and only once the previous broker answered again.
        assert [e["unit"] for e in events] == [f"tributary-broker-{dc}-{i}.service" for dc in HOSTS
                                               for i, _, _, _ in plan.brokers[dc]]  # fmt: skip
        for event in events:
            assert all(event["others_up"].values()), event
        assert sum(len(e["others_up"]) for e in events) == 4  # east and aggregate have two brokers each
        for b in brokers:
            assert systemctl.pid_of(b.name) not in (None, pids_before[b.name]), b.name
        config = tomllib.loads((roots / "east" / "etc" / "broker-east-1.toml").read_text())
        assert {k: config[k] for k in changed} == changed
        # Every broker is back, and the aggregate lost nothing across the roll.
        for dc, host in HOSTS.items():
            count = len(plan.brokers[dc])
            for _, _, _, apps in plan.brokers[dc]:
                wait_until(lambda h=host, p=apps, n=count: cluster_brokers(h, p) == n,
                           f"cluster {dc} on {apps} after the roll")  # fmt: skip
        wait_until(lambda: all_end_offsets(aggregate, list(aggregate_ends)) == aggregate_ends,
                   "the aggregate's partitions to be served again, ending where they ended")  # fmt: skip
        print(f"rolling restart of {len(events)} brokers through broker.yml: {time.monotonic() - phase_started:.1f} s")
    finally:
        supervisor.stop_all()
