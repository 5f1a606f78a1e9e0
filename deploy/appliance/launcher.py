"""The whole appliance of a topology on this machine, as supervised child processes.

`Appliance.run` starts, in tiers, waiting for each before the next:

1. one ZooKeeper server per datacenter (Debian's package, standalone), then the
   clusters' chroots in it, and the users and ACLs of every cluster that authenticates
   (principals.py; the CA, certificates and passwords are under ``<run_dir>/security``,
   security_files.py);
2. every broker (`tributary broker ...`), until every cluster answers: each broker
   returns Metadata listing all of its cluster's brokers and a controller;
3. every mirror instance (`tributary mirror ...`), until its metrics endpoint answers.

It then runs until `stop()` (or cancellation), and stops in the reverse order: mirrors
first (they flush what they copied), then brokers, then ZooKeeper. Crashed children
are restarted by the Supervisor with backoff; a broker is started only once the
registration of its previous incarnation has left ZooKeeper (after SIGKILL that takes
its session timeout), since the broker refuses to start while its id is registered.

Data, configs and logs live under the run directory: ``logs/<child>.log``,
``config/``, and the data directories the topology names (by default
``<cluster>/broker-<id>`` and ``zookeeper/<datacenter>``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import trio

from tributary.broker.cluster import zk_paths
from tributary.broker.cluster.errors import ClusterError
from tributary.broker.cluster.session import ChangeNotifier, ZkSession
from tributary.broker.security.acl_store import ZkAclStore
from tributary.deploy.appliance import security_files
from tributary.deploy.appliance.links import mirror_links
from tributary.deploy.appliance.principals import cluster_security
from tributary.deploy.appliance.probe import ProbeError, cluster_ready, scrape, split_address, zookeeper_ok
from tributary.deploy.appliance.security_files import SecurityFiles, broker_settings, client_settings, tool_security
from tributary.deploy.appliance.supervisor import Backoff, ChildSpec, Event, State, Supervisor
from tributary.deploy.appliance.topology import Broker, Cluster, Mirror, Topology
from tributary.deploy.errors import operator_errors
from tributary.deploy.tables import render_table
from tributary.deploy.zookeeper_users import ensure_user
from tributary.protocol.acl import AclBinding

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")


def zookeeper_command(config: Path, java: str | None = None) -> list[str]:
    """Debian's ZooKeeper server on ``config``, in a small JVM (a single server for tests and
    one-machine appliances, not a production ensemble)."""
    return [
        java or shutil.which("java") or "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}",
        "org.apache.zookeeper.server.ZooKeeperServerMain",
        str(config),
    ]


# How long a restarted broker waits for its old registration to go; the broker's
# default ZooKeeper session timeout is 18 s.
REGISTRATION_WAIT = 60.0


class ApplianceError(Exception):
    """The appliance could not start; the message says what and where to look."""


@dataclass(frozen=True)
class Component:
    """One supervised child and where it listens."""

    kind: str  # zookeeper | broker | mirror
    name: str  # unique: zookeeper/east, broker/east/1, mirror/east (mirror/east/2 for more instances)
    listens: str  # HOST:PORT clients use ("" for a mirror)
    metrics: str | None  # HOST:PORT of its Prometheus endpoint
    spec: ChildSpec
    detail: str = ""
    # Config files the child reads: written by Appliance.run (planning touches no disk).
    files: tuple[tuple[Path, str], ...] = ()
    # The addresses of a broker's other listeners (checked free before starting, as ``listens``).
    other_listens: tuple[str, ...] = ()


def _log_path(run_dir: Path, name: str) -> Path:
    return run_dir / "logs" / (name.replace("/", "-") + ".log")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _child_env() -> dict[str, str]:
    return {"PYTHONUNBUFFERED": "1"}


def _tributary(*args: str) -> list[str]:
    """The tributary command of this very installation."""
    return [sys.executable, "-m", "tributary.deploy.cli", *args]


def zookeeper_components(topology: Topology) -> list[Component]:
    """One standalone server for each distinct server address of the topology."""
    by_server: dict[str, list[Cluster]] = {}
    for cluster in topology.clusters.values():
        if len(cluster.zookeeper.servers) != 1:
            raise ApplianceError(
                f"cluster '{cluster.name}' lists {len(cluster.zookeeper.servers)} ZooKeeper servers: "
                "tributary up runs one standalone server per cluster (see deploy/examples/local.toml)"
            )
        by_server.setdefault(cluster.zookeeper.servers[0], []).append(cluster)
    per_dc: dict[str, int] = {}
    components = []
    for server, clusters in by_server.items():
        datacenter = clusters[0].datacenter
        per_dc[datacenter] = per_dc.get(datacenter, 0) + 1
        name = f"zookeeper/{datacenter}" + (f"/{per_dc[datacenter]}" if per_dc[datacenter] > 1 else "")
        host, port = split_address(server)
        data_dir = clusters[0].zookeeper.data_dir
        config = topology.run_dir / "config" / (name.replace("/", "-") + ".cfg")
        argv = zookeeper_command(config)
        spec = ChildSpec(name, argv, _log_path(topology.run_dir, name), cwd=data_dir)
        detail = "chroots " + ", ".join(c.zookeeper.chroot or "/" for c in clusters)
        text = "\n".join(
            [
                "tickTime=2000",
                f"dataDir={data_dir}",
                f"clientPort={port}",
                f"clientPortAddress={host}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=srvr,ruok,mntr",
                "",
            ]
        )
        components.append(Component("zookeeper", name, server, None, spec, detail, ((config, text),)))
    return components


def broker_component(topology: Topology, cluster: Cluster, broker: Broker) -> Component:
    name = f"broker/{cluster.name}/{broker.id}"
    config = topology.run_dir / "config" / f"broker-{cluster.name}-{broker.id}.toml"
    # Listeners, TLS, SASL and the authorizer (none for a cluster with the one default listener,
    # which is given as --listen, as before listeners had names).
    secured = broker_settings(topology, cluster, broker)
    settings = {**cluster.topic_defaults, **secured}
    text = "".join(f'"{k}" = {_toml_value(v)}\n' for k, v in settings.items())
    listen = [] if secured else ["--listen", broker.address]
    argv = _tributary(
        "broker",
        "--id", str(broker.id),
        *listen,
        "--data-dir", str(broker.data_dir),
        "--zookeeper", cluster.zookeeper_connect,
        "--datacenter", cluster.datacenter,
        "--config", str(config),
    )  # fmt: skip
    metrics = None
    if broker.metrics_port is not None:
        # On the broker's own address: the endpoint binds 127.0.0.1 unless told otherwise.
        argv += ["--metrics-port", str(broker.metrics_port), "--metrics-host", broker.host]
        metrics = f"{broker.host}:{broker.metrics_port}"
    spec = ChildSpec(name, argv, _log_path(topology.run_dir, name), env=_child_env())
    others = [listener for listener in cluster.listeners[1:]]
    detail = f"datacenter {cluster.datacenter}"
    if secured:
        detail += "; " + ", ".join(f"{x.name} {x.protocol} {broker.address_on(x.name)}" for x in cluster.listeners)
    return Component(
        "broker", name, broker.address, metrics, spec, detail, ((config, text),),
        tuple(broker.address_on(x.name) for x in others),
    )  # fmt: skip


def mirror_components(topology: Topology, mirror: Mirror) -> list[Component]:
    components = []
    ports: Sequence[int | None] = mirror.metrics_ports() or [None] * mirror.instances
    source, target = mirror_links(topology, mirror)
    files = SecurityFiles.of(topology)
    # Each side's client settings (Kafka's names), for --source- and --target-command-config.
    configs: list[tuple[Path, str]] = []
    security_args: list[str] = []
    for side, link in (("source", source), ("target", target)):
        settings = client_settings(topology, files, link.listener, link.user)
        if settings:
            path = files.client_config(f"mirror-{mirror.alias}-{side}")
            configs.append((path, "".join(f"{key}={value}\n" for key, value in settings.items())))
            security_args += [f"--{side}-command-config", str(path)]
    for instance, port in enumerate(ports, start=1):
        name = f"mirror/{mirror.alias}" + (f"/{instance}" if mirror.instances > 1 else "")
        argv = _tributary(
            "mirror",
            "--source", source.bootstrap,
            "--source-alias", mirror.alias,
            "--target", target.bootstrap,
            "--topics", mirror.topics,
            "--group", mirror.group,
            *security_args,
        )  # fmt: skip
        if mirror.exclude:
            argv += ["--exclude", mirror.exclude]
        metrics = None
        others = [alias for alias in topology.mirrors if alias != mirror.alias]
        if others:
            # Copies made by the other mirrors (topics <alias>.*) are never copied again.
            argv += ["--known-aliases", ",".join(others)]
        if port is not None:
            argv += ["--metrics-port", str(port), "--metrics-host", mirror.host]
            metrics = f"{mirror.host}:{port}"
        spec = ChildSpec(name, argv, _log_path(topology.run_dir, name), env=_child_env())
        detail = f"{mirror.source} -> {mirror.target} as {mirror.alias}.<topic>; source {source.protocol}"
        components.append(Component("mirror", name, "", metrics, spec, detail, tuple(configs)))
    return components


def plan(topology: Topology) -> list[Component]:
    """Every child of the appliance, in start order."""
    components = zookeeper_components(topology)
    for cluster in topology.clusters.values():
        components += [broker_component(topology, cluster, b) for b in cluster.brokers]
    for mirror in topology.mirrors.values():
        components += mirror_components(topology, mirror)
    return components


def _addresses_to_bind(components: Sequence[Component]) -> Iterator[tuple[str, str]]:
    for c in components:
        if c.listens:
            yield c.listens, c.name
        for address in c.other_listens:
            yield address, c.name
        if c.metrics:
            yield c.metrics, f"{c.name} metrics"


def check_addresses_free(components: Sequence[Component]) -> None:
    """Fail before starting anything if an address is taken or not on this machine."""
    for address, owner in _addresses_to_bind(components):
        host, port = split_address(address)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except socket.gaierror as exc:
                raise ApplianceError(f"{owner}: cannot resolve {host}: {exc.strerror}") from None
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise ApplianceError(
                        f"{owner}: {host} is not an address of this machine; tributary up runs topologies "
                        "whose hosts are local (like deploy/examples/local.toml)"
                    ) from None
                if exc.errno == errno.EADDRINUSE:
                    raise ApplianceError(
                        f"{owner}: {address} is in use (another `tributary up` on this topology?)"
                    ) from None
                raise ApplianceError(f"{owner}: cannot bind {address}: {exc.strerror}") from None


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def describe(components: Sequence[Component], supervisor: Supervisor | None = None) -> str:
    """The table `tributary up` prints: where everything listens and where it logs."""
    rows = []
    for c in components:
        child = supervisor.children.get(c.name) if supervisor else None
        pid = str(child.pid) if child and child.pid else "-"
        rows.append((c.name, c.listens or "-", c.metrics or "-", pid, str(c.spec.log_path), c.detail))
    return render_table(("component", "listens", "metrics", "pid", "log", ""), rows)


async def _create_acls(connect: str, bindings: Sequence[AclBinding]) -> list[str]:
    """Add ``bindings`` to the ACLs in ZooKeeper at ``connect`` (those there already stay as
    they are); why any could not be written."""
    store = ZkAclStore(connect, connect_timeout=10.0, reconnect_max_delay=1.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        errors = [e for e in await store.create(bindings) if e is not None]
        nursery.cancel_scope.cancel()
    return errors


class Appliance:
    """Runs a topology's children; `await nursery.start(appliance.run)` returns when all answer."""

    def __init__(
        self,
        topology: Topology,
        *,
        say: Callable[[str], None] = print,
        start_timeout: float = 120.0,
        grace: float = 15.0,
        backoff: Callable[[], Backoff] = Backoff,
    ) -> None:
        self.topology = topology
        self.components = plan(topology)
        # kazoo (our short ZooKeeper sessions) warns on every closed connection; the children log their own.
        logging.getLogger("kazoo").setLevel(logging.ERROR)
        self._say = say
        self._start_timeout = start_timeout
        self.supervisor = Supervisor(grace=grace, backoff=backoff, on_event=self._on_event)
        self._stop = trio.Event()
        self._starting = trio.CancelScope()
        #: Set once every tier answers, and once everything has stopped.
        self.ready = trio.Event()
        self.stopped = trio.Event()
        self._lock: IO[str] | None = None

    def stop(self) -> None:
        """Stop everything, in order (also while starting); `run` returns when it is done."""
        self._stop.set()
        self._starting.cancel()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def _on_event(self, event: Event) -> None:
        self._say(f"{time.strftime('%H:%M:%S')} {event.describe()}")

    def _lock_run_dir(self) -> None:
        run_dir = self.topology.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = (run_dir / "up.lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise ApplianceError(f"run directory {run_dir} is in use by `tributary up` (pid {holder})") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def _prepare(self) -> None:
        if not ZOOKEEPER_JAR.exists():
            raise ApplianceError(f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package (scripts/setup.sh)")
        if shutil.which("java") is None:
            raise ApplianceError("java is not on PATH: ZooKeeper needs a JRE (scripts/setup.sh)")
        self._lock_run_dir()
        check_addresses_free(self.components)
        security_files.prepare(self.topology)
        for component in self.components:
            for path, text in component.files:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Client settings name password files only, yet keep them to their owner.
                path.unlink(missing_ok=True)
                path.touch(mode=0o600)
                path.write_text(text)
        for cluster in self.topology.clusters.values():
            cluster.zookeeper.data_dir.mkdir(parents=True, exist_ok=True)
            for broker in cluster.brokers:
                broker.data_dir.mkdir(parents=True, exist_ok=True)

    async def run(self, *, task_status: trio.TaskStatus[Appliance] = trio.TASK_STATUS_IGNORED) -> None:
        self._prepare()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.supervisor.run)
                try:
                    with self._starting:
                        await self._start_all()
                    if not self._stop.is_set():
                        self.ready.set()
                        task_status.started(self)
                        await self._stop.wait()
                finally:
                    with trio.CancelScope(shield=True):
                        await self._stop_all()
                    self.stopped.set()
        finally:
            if self._lock is not None:
                self._lock.close()

    def _of_kind(self, kind: str) -> list[Component]:
        return [c for c in self.components if c.kind == kind]

    async def _start_all(self) -> None:
        for component in self._of_kind("zookeeper"):
            self.supervisor.add(component.spec)
        await self._wait("ZooKeeper", self._of_kind("zookeeper"), self._zookeepers_ready)
        await self._create_chroots()
        await self._create_principals()
        for component in self._of_kind("broker"):
            self.supervisor.add(self._with_registration_wait(component))
        await self._wait("brokers", self._of_kind("broker"), self._clusters_ready)
        mirrors = self._of_kind("mirror")
        for component in mirrors:
            self.supervisor.add(component.spec)
        if mirrors:
            await self._wait("mirrors", mirrors, self._mirrors_ready)

    async def _stop_all(self) -> None:
        for kind in ("mirror", "broker", "zookeeper"):
            names = [c.name for c in self._of_kind(kind) if c.name in self.supervisor.children]
            if names:
                await self.supervisor.stop_children(names)
        self.supervisor.stop()

    async def _wait(self, what: str, components: Sequence[Component], ready: Callable[[], Awaitable[None]]) -> None:
        """Poll ``ready`` (an async check raising ProbeError) until it passes; fail fast on crash loops."""
        started = time.monotonic()
        deadline = trio.current_time() + self._start_timeout
        last = "not checked yet"
        while True:
            for component in components:
                child = self.supervisor.children[component.name]
                if child.starts >= 3 and child.state is State.BACKOFF:
                    raise ApplianceError(
                        f"{component.name} keeps exiting (last: {child.last_exit}); "
                        f"{component.spec.log_path} ends with:\n{log_tail(component.spec.log_path)}"
                    )
            try:
                await ready()
            except ProbeError as exc:
                last = str(exc)
            else:
                self._say(f"{time.strftime('%H:%M:%S')} {what} ready ({time.monotonic() - started:.1f} s)")
                return
            if trio.current_time() > deadline:
                raise ApplianceError(f"{what} not ready after {self._start_timeout:g} s: {last}")
            await trio.sleep(0.25)

    async def _zookeepers_ready(self) -> None:
        for component in self._of_kind("zookeeper"):
            await zookeeper_ok(*split_address(component.listens))

    async def _clusters_ready(self) -> None:
        for cluster in self.topology.clusters.values():
            await cluster_ready((b.address for b in cluster.brokers), security=tool_security(self.topology, cluster))

    async def _mirrors_ready(self) -> None:
        for component in self._of_kind("mirror"):
            if component.metrics:
                await scrape(*split_address(component.metrics))

    async def _create_chroots(self) -> None:
        for cluster in self.topology.clusters.values():
            if not cluster.zookeeper.chroot:
                continue
            session = ZkSession(
                ",".join(cluster.zookeeper.servers), ChangeNotifier(), session_timeout=10.0, reconnect_max_delay=1.0
            )
            try:
                await session.open(10.0)
                await session.ensure_path(cluster.zookeeper.chroot)
            except ClusterError as exc:
                raise ApplianceError(f"cluster '{cluster.name}': cannot create its ZooKeeper chroot: {exc}") from None
            finally:
                await session.close()

    async def _create_principals(self) -> None:
        """Every cluster's users and ACLs, in its ZooKeeper, before its brokers start (the brokers
        log in to each other as their user; the authorizer denies what no ACL allows). Run on
        every start: users whose password did not change and ACLs already there stay as they are."""
        files = SecurityFiles.of(self.topology)
        started = time.monotonic()
        done = 0
        for cluster in self.topology.clusters.values():
            plan = cluster_security(self.topology, cluster)
            if not plan.users:
                continue
            connect = cluster.zookeeper_connect
            for user in plan.users:
                password = security_files.password_of(files, user)
                await trio.to_thread.run_sync(ensure_user, connect, user, plan.mechanism, password)
            if plan.grants:
                try:
                    errors = await _create_acls(connect, plan.bindings)
                except (ClusterError, BaseExceptionGroup) as exc:
                    found = operator_errors(exc, (ClusterError,))
                    if found is None:
                        raise
                    raise ApplianceError(f"cluster '{cluster.name}': cannot write its ACLs: {found[0]}") from None
                if errors:
                    raise ApplianceError(f"cluster '{cluster.name}': cannot write its ACLs: {errors[0]}")
            done += 1
        if done:
            seconds = time.monotonic() - started
            self._say(f"{time.strftime('%H:%M:%S')} users and ACLs of {done} clusters ready ({seconds:.1f} s)")

    def _with_registration_wait(self, component: Component) -> ChildSpec:
        cluster_name, broker_id = component.name.split("/")[1:]
        connect = self.topology.clusters[cluster_name].zookeeper_connect
        path = zk_paths.broker(int(broker_id))
        say = self._say

        async def registration_gone() -> None:
            # A broker killed with SIGKILL stays registered until its session expires;
            # starting a new one before that only gets "broker id ... is already registered".
            session = ZkSession(connect, ChangeNotifier(), session_timeout=10.0, reconnect_max_delay=1.0)
            try:
                await session.open(10.0)
                if await session.exists(path) is None:
                    return
                say(f"{time.strftime('%H:%M:%S')} {component.name}: waiting for its old ZooKeeper session to expire")
                with trio.move_on_after(REGISTRATION_WAIT):
                    while await session.exists(path) is not None:
                        await trio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await session.close()

        return ChildSpec(
            component.spec.name,
            component.spec.argv,
            component.spec.log_path,
            component.spec.cwd,
            component.spec.env,
            before_start=registration_gone,
        )
