"""The README's main command: the whole job end to end on one machine.

1. start the topology's appliance (deploy/appliance.py, in this process);
2. produce an activity stream (deploy/activity.py) into every mirrored source cluster;
3. wait until the aggregate holds every record (and the mirrors report no lag);
4. run the topology's load (`tributary load`) into the warehouse;
5. count every record at the source, in the aggregate and in the warehouse's Parquet files,
   and compare bytes (raw JSON, zstd batches on the brokers' disks, Parquet);
6. stop everything, print the summary; exit status 1 when any count disagrees.

It starts from empty clusters and an empty warehouse, so the counts must agree exactly:
directories it created before (marked with a `.tributary-demo` file) are wiped first,
and any other non-empty directory is refused rather than touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import trio

from tributary.broker.log.manager import partition_dir_name
from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.producer.producer import Producer
from tributary.client.wire.cluster import Cluster as ClientCluster
from tributary.deploy.appliance.activity import TOPICS, ActivityStream
from tributary.deploy.appliance.launcher import Appliance
from tributary.deploy.appliance.links import links, load_link
from tributary.deploy.appliance.memory import tree_rss
from tributary.deploy.appliance.probe import ProbeError, scrape, split_address
from tributary.deploy.appliance.security_files import SecurityFiles, client_settings, tool_security, write_properties
from tributary.deploy.appliance.status import MirrorStatus, mirror_numbers, topic_records
from tributary.deploy.appliance.supervisor import describe_returncode
from tributary.deploy.appliance.topology import Cluster, Load, Topology
from tributary.deploy.appliance.warehouse import WarehouseCount, count_warehouse
from tributary.deploy.audit.collect import collect as collect_audit
from tributary.deploy.audit.model import Row as AuditRow
from tributary.deploy.audit.model import Verdict, audit
from tributary.deploy.audit.report import render as render_audit
from tributary.deploy.tables import render_table

MARKER = ".tributary-demo"
Say = Callable[[str], None]


class DemoError(Exception):
    """The demo could not run; the message says why."""


def claim_directory(path: Path, what: str) -> None:
    """Make ``path`` an empty directory of the demo's own (wiping an earlier demo's)."""
    if path.exists():
        if not path.is_dir():
            raise DemoError(f"{what} {path} is not a directory")
        if any(path.iterdir()) and not (path / MARKER).exists():
            raise DemoError(
                f"{what} {path} holds data the demo did not write; empty it or choose another "
                f"({'--warehouse' if what == 'warehouse' else '--run-dir'})"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("written by `tributary demo`, which wipes this directory on its next run\n")


@dataclass
class Produced:
    records: Counter[str] = field(default_factory=Counter)  # per topic
    raw_bytes: int = 0  # key + value, uncompressed
    target: int = 0


@dataclass
class LinkUse:
    """One link of the appliance and what ran over it, for the summary."""

    client: str
    cluster: str
    listener: str
    protocol: str
    cross_datacenter: bool
    #: Successful logins on the listener (every broker of its cluster), by mechanism: what the
    #: brokers' metrics count, so proof that the link did authenticate.
    logins: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    """Everything the summary prints."""

    sources: dict[str, str]  # mirror alias -> source cluster
    produced: dict[str, Produced] = field(default_factory=dict)  # per alias
    source_records: dict[tuple[str, str], int] = field(default_factory=dict)  # (alias, topic)
    aggregate_records: dict[tuple[str, str], int] = field(default_factory=dict)
    hadoop: dict[tuple[str, str], WarehouseCount] = field(default_factory=dict)
    loader_records: dict[tuple[str, str], int] = field(default_factory=dict)
    loader_bytes: int = 0
    source_disk_bytes: int = 0
    aggregate_disk_bytes: int = 0
    mirrors: dict[str, MirrorStatus] = field(default_factory=dict)
    caught_up_after: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    load_exit: int | None = None
    peak_rss: int = 0  # bytes, this process and all its descendants together
    #: The audit's rows (per topic and hour, every stage) and its window, in ms.
    audit: list[AuditRow] = field(default_factory=list)
    audit_window: tuple[int, int] = (0, 0)
    links: list[LinkUse] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def streams(self) -> list[tuple[str, str]]:
        return [(alias, topic) for alias in self.sources for topic in TOPICS]

    def check(self) -> None:
        for alias, topic in self.streams():
            produced = self.produced[alias].records[topic] if alias in self.produced else 0
            counts = {
                "acknowledged to the producer": produced,
                "at the source": self.source_records.get((alias, topic), 0),
                "in the aggregate": self.aggregate_records.get((alias, topic), 0),
                "in Hadoop": self.hadoop.get((f"{alias}.{topic}", alias), WarehouseCount()).rows,
                "in the loader's report": self.loader_records.get((alias, topic), 0),
            }
            if len(set(counts.values())) != 1:
                detail = ", ".join(f"{v:,} {k}" for k, v in counts.items())
                self.problems.append(f"{alias}/{topic}: {detail}")
            hadoop = self.hadoop.get((f"{alias}.{topic}", alias))
            if hadoop is not None and hadoop.distinct != hadoop.rows:
                self.problems.append(f"{alias}/{topic}: {hadoop.rows - hadoop.distinct} duplicate offsets in Hadoop")
        # Everything has settled by the end of the demo: every hour must agree at every stage.
        for row in self.audit:
            if row.verdict is not Verdict.OK:
                hour = time.strftime("%Y-%m-%d %H:00", time.gmtime(row.hour / 1000))
                self.problems.append(f"audit {row.datacenter}/{row.topic} {hour}: {row.verdict} ({row.why})")
        if self.load_exit not in (0, None):
            self.problems.append(f"the load {describe_returncode(self.load_exit)}")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def render(report: Report) -> str:
    lines = ["", "== summary", ""]
    header = ("datacenter", "topic", "produced", "source", "aggregate", "hadoop", "")
    rows: list[tuple[str, ...]] = []
    totals = [0, 0, 0, 0]
    for alias, topic in report.streams():
        values = [
            report.produced[alias].records[topic] if alias in report.produced else 0,
            report.source_records.get((alias, topic), 0),
            report.aggregate_records.get((alias, topic), 0),
            report.hadoop.get((f"{alias}.{topic}", alias), WarehouseCount()).rows,
        ]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        verdict = "ok" if len(set(values)) == 1 else "MISMATCH"
        rows.append((alias, topic, *(f"{v:,}" for v in values), verdict))
    rows.append(("total", "", *(f"{v:,}" for v in totals), "ok" if len(set(totals)) == 1 else "MISMATCH"))
    lines.append(render_table(header, rows, right=header[2:6]))
    raw = sum(p.raw_bytes for p in report.produced.values())
    lines += ["", "bytes"]
    if report.source_disk_bytes:
        ratio = raw / report.source_disk_bytes
        lines += [
            f"  raw JSON produced           {_mb(raw):>12}",
            f"  zstd batches, source disks  {_mb(report.source_disk_bytes):>12}  ({ratio:.1f}x smaller)",
            f"  zstd batches, aggregate     {_mb(report.aggregate_disk_bytes):>12}  (copied without recompressing)",
        ]
    copied = sum(m.copied_bytes or 0 for m in report.mirrors.values())
    lines.append(f"  mirrored between DCs        {_mb(copied):>12}")
    if report.loader_bytes:
        lines.append(f"  Parquet (zstd) in Hadoop    {_mb(report.loader_bytes):>12}")
    if report.links:
        lines += ["", "links (each over the protocol of its listener)"]
        rows = [
            (
                link.client,
                f"{link.cluster} {link.listener}",
                link.protocol,
                "cross-datacenter" if link.cross_datacenter else "local",
                ", ".join(f"{count:,} {mechanism} logins" for mechanism, count in sorted(link.logins.items())),
            )
            for link in report.links
        ]
        table = render_table(("link", "listener", "protocol", "", "logins the brokers counted"), rows)
        lines += ["  " + line for line in table.splitlines()]
    lines += ["", "mirror lag"]
    for alias, mirror in report.mirrors.items():
        lag_records = "?" if mirror.lag_records is None else f"{mirror.lag_records:,.0f}"
        lag_seconds = "?" if mirror.lag_seconds is None else f"{mirror.lag_seconds:.1f}"
        lines.append(f"  {alias:<8} {lag_records} records, {lag_seconds} s behind at the end")
    if report.caught_up_after is not None:
        lines.append(
            f"  the aggregate held every record {report.caught_up_after:.1f} s after the last was acknowledged"
        )
    lines += ["", "run time"]
    total = sum(report.phases.values())
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.phases.items())
    lines.append(f"  {total:.1f} s: {phases}")
    if report.peak_rss:
        lines.append(f"  peak memory of all processes together: {report.peak_rss / 2**20:,.0f} MiB")
    if report.audit:
        lines += ["", render_audit(report.audit, *report.audit_window)]
    lines.append("")
    if report.problems:
        lines.append("COUNTS DISAGREE:")
        lines += [f"  {p}" for p in report.problems]
    else:
        lines.append("every count agrees: produced = source = aggregate = Hadoop")
    return "\n".join(lines)


class Demo:
    def __init__(
        self,
        topology: Topology,
        warehouse: Path,
        *,
        events: int,
        say: Say,
        catch_up_timeout: float = 600.0,
    ) -> None:
        if not topology.mirrors:
            raise DemoError("the topology has no mirrors: nothing would reach the aggregate")
        if not topology.loads:
            raise DemoError("the topology has no loads: nothing would reach Hadoop")
        self.load: Load = replace(next(iter(topology.loads.values())), output=warehouse.resolve().as_uri())
        targets = {m.target for m in topology.mirrors.values()}
        if targets != {self.load.cluster}:
            raise DemoError(f"the mirrors feed {', '.join(sorted(targets))} but the load reads '{self.load.cluster}'")
        self.topology = replace(topology, loads=MappingProxyType({self.load.name: self.load}))
        self.warehouse = warehouse.resolve()
        self.events = events
        self.say = say
        self.catch_up_timeout = catch_up_timeout
        self.report = Report({alias: m.source for alias, m in topology.mirrors.items()})
        self.produce_started_ms = int(time.time() * 1000)

    def _quiet(self, line: str) -> None:
        # Every child's start and stop would bury the progress; crashes and restarts still show.
        if ": started (pid" in line or ": stopped (pid" in line:
            return
        self.say(line)

    def _phase(self, name: str, started: float) -> None:
        self.report.phases[name] = time.monotonic() - started

    async def run(self) -> Report:
        claim_directory(self.topology.run_dir, "run directory")
        claim_directory(self.warehouse, "warehouse")
        appliance = Appliance(self.topology, say=self._quiet)
        self.say(f"== 1/6 starting {len(appliance.components)} processes under {self.topology.run_dir}")
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sample_memory)
            await nursery.start(appliance.run)
            self._phase("start", started)
            try:
                await self._produce_all()
                await self._wait_for_mirrors()
                await self._load()
                await self._count()
            finally:
                self.say("== 6/6 stopping mirrors, brokers, ZooKeeper")
                started = time.monotonic()
                appliance.stop()
                await appliance.stopped.wait()
                nursery.cancel_scope.cancel()
        self._phase("stop", started)
        self.report.check()
        return self.report

    async def _sample_memory(self) -> None:
        while True:
            rss = await trio.to_thread.run_sync(tree_rss)
            self.report.peak_rss = max(self.report.peak_rss, rss)
            await trio.sleep(1.0)

    # --- 2. produce ------------------------------------------------------------------------------

    async def _produce_all(self) -> None:
        self.produce_started_ms = int(time.time() * 1000)
        sources = {alias: self.topology.clusters[m.source] for alias, m in self.topology.mirrors.items()}
        self.say(
            f"== 2/6 producing {self.events:,} events (page views, searches, clicks; JSON, zstd) into each of "
            + ", ".join(f"{alias} ({c.bootstrap.split(',')[0]}...)" for alias, c in sources.items())
        )
        for alias in sources:
            self.report.produced[alias] = Produced(target=self.events)
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            progress = trio.CancelScope()
            nursery.start_soon(self._progress, progress, "producing", self._production_line)
            async with trio.open_nursery() as producers:
                for alias, cluster in sources.items():
                    producers.start_soon(self._produce, alias, cluster)
            progress.cancel()
        self._phase("produce", started)
        self._produced_at = time.monotonic()
        raw = sum(p.raw_bytes for p in self.report.produced.values())
        total = sum(sum(p.records.values()) for p in self.report.produced.values())
        seconds = self.report.phases["produce"]
        self.say(
            f"   acknowledged {total:,} records, {_mb(raw)} of JSON, in {seconds:.1f} s ({total / seconds:,.0f}/s)"
        )

    def _production_line(self) -> str:
        return "  ".join(
            f"{alias} {sum(p.records.values()):,}/{p.target:,}" for alias, p in self.report.produced.items()
        )

    async def _progress(self, scope: trio.CancelScope, what: str, line: Callable[[], str]) -> None:
        with scope:
            while True:
                await trio.sleep(2.0)
                self.say(f"   {what}: {line()}")

    def _client_config(self, cluster: Cluster) -> ClientConfig:
        """How the demo, an application of the cluster's datacenter, connects: on the local
        listener (logged in as the admin user where that listener authenticates)."""
        return ClientConfig(security=tool_security(self.topology, cluster))

    async def _produce(self, alias: str, cluster: Cluster) -> None:
        try:
            await self._create_topics(cluster)
            await self._produce_into(alias, cluster)
        except KafkaError as exc:
            raise DemoError(f"producing into {alias} ({cluster.bootstrap}): {exc}") from None

    async def _create_topics(self, cluster: Cluster) -> None:
        """As an operator would: the topics exist before applications write (partitions: the cluster's default)."""
        async with ClientCluster(cluster.bootstrap, self._client_config(cluster)) as client:
            admin = Admin(client)
            for topic in TOPICS:
                await admin.create_topic(topic, exist_ok=True, timeout=30.0)

    async def _produce_into(self, alias: str, cluster: Cluster) -> None:
        produced = self.report.produced[alias]
        stream = ActivityStream(cluster.datacenter)
        pending: deque[tuple[str, int, Any]] = deque()
        # Big batches compress best; linger lets them fill.
        async with Producer(
            cluster.bootstrap,
            client_config=self._client_config(cluster),
            linger_ms=20,
            batch_bytes=512 * 1024,
            compression="zstd",
        ) as producer:
            for event in stream.events(self.events):
                handle = await producer.enqueue(event.topic, event.value, key=event.key)
                pending.append((event.topic, len(event.key) + len(event.value), handle))
                # Count acknowledgements as they come; wait only when far ahead of them.
                while pending and (pending[0][2].done() or len(pending) > 50_000):
                    topic, size, oldest = pending.popleft()
                    await oldest.wait()  # raises the error the record failed with
                    produced.records[topic] += 1
                    produced.raw_bytes += size
            await producer.flush()
            for topic, size, handle in pending:
                await handle.wait()
                produced.records[topic] += 1
                produced.raw_bytes += size

    # --- 3. mirrors ------------------------------------------------------------------------------

    async def _aggregate_counts(self) -> dict[tuple[str, str], int]:
        aggregate = self.topology.clusters[self.load.cluster]
        counts: dict[tuple[str, str], int] = {}
        for topic in await topic_records(
            aggregate.bootstrap, timeout=5.0, security=tool_security(self.topology, aggregate)
        ):
            alias, dot, source_topic = topic.name.partition(".")
            if dot and alias in self.report.sources:
                counts[(alias, source_topic)] = topic.records or 0
        return counts

    def _behind(self, counts: dict[tuple[str, str], int]) -> int:
        return sum(
            max(0, self.report.produced[alias].records[topic] - counts.get((alias, topic), 0))
            for alias, topic in self.report.streams()
        )

    async def _wait_for_mirrors(self) -> None:
        self.say("== 3/6 waiting for the mirrors to copy everything into the aggregate")
        started = time.monotonic()
        deadline = started + self.catch_up_timeout
        last_said = 0.0
        counts: dict[tuple[str, str], int] = {}
        while True:
            try:
                counts = await self._aggregate_counts()
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                self.say(f"   aggregate not answering yet: {exc}")
            behind = self._behind(counts)
            if behind == 0:
                break
            now = time.monotonic()
            if now > deadline:
                self.say(f"   gave up after {self.catch_up_timeout:.0f} s with {behind:,} records still missing")
                break
            if now - last_said >= 2.0:
                copied = sum(counts.values())
                self.say(f"   mirrored {copied:,} records; {behind:,} to go")
                last_said = now
            await trio.sleep(0.5)
        self.report.caught_up_after = time.monotonic() - self._produced_at if behind == 0 else None
        self._phase("mirror", started)
        self.say(f"   the aggregate holds all {sum(counts.values()):,} records")

    # --- 4. load ---------------------------------------------------------------------------------

    async def _load(self) -> None:
        load = self.load
        link = load_link(self.topology, load)
        load.summary_json.parent.mkdir(parents=True, exist_ok=True)
        load.metrics_file.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "tributary.deploy.cli", "load",
            "--bootstrap", link.bootstrap,
            "--output", load.output,
            "--topics", load.topics,
            "--master", load.master,
            "--summary-json", str(load.summary_json),
            "--metrics-file", str(load.metrics_file),
        ]  # fmt: skip
        files = SecurityFiles.of(self.topology)
        settings = client_settings(self.topology, files, link.listener, link.user)
        if settings:
            # The load's TLS and login, as its systemd unit would have them (Ansible).
            argv += ["--command-config", str(write_properties(files.client_config(f"load-{load.name}"), settings))]
        log_path = self.topology.run_dir / "logs" / "load.log"
        self.say(f"== 4/6 loading the aggregate into {load.output} (Spark {load.master}; log {log_path})")
        started = time.monotonic()
        with log_path.open("ab") as log:
            process = await trio.lowlevel.open_process(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
            )
            assert process.stdout is not None and process.stderr is not None
            async with trio.open_nursery() as nursery:
                # The table on stdout, and the loader's own progress lines from its log on stderr
                # (Spark's warnings and progress bars go to the log file only).
                nursery.start_soon(self._relay, process.stdout, None, lambda line: True)
                nursery.start_soon(self._relay, process.stderr, log, lambda line: " tributary.load: " in line)
                self.report.load_exit = await process.wait()
        self._phase("load", started)
        try:
            summary = json.loads(load.summary_json.read_text())
        except (OSError, ValueError) as exc:
            self.report.problems.append(f"no load summary at {load.summary_json}: {exc}")
            return
        self.report.loader_bytes = int(summary.get("bytes", 0))
        for row in summary.get("by_topic", []):
            key = (row.get("source_datacenter") or "", row.get("source_topic") or "")
            self.report.loader_records[key] = self.report.loader_records.get(key, 0) + int(row["records"])

    async def _relay(self, stream: trio.abc.ReceiveStream, log: Any, show: Callable[[str], bool]) -> None:
        buffered = b""
        async for chunk in stream:
            if log is not None:
                log.write(chunk)
                log.flush()
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rsplit("\r", 1)[-1]
                if show(line):
                    self.say(f"   load | {line.split(' tributary.load: ', 1)[-1]}")

    # --- 5. count --------------------------------------------------------------------------------

    async def _count(self) -> None:
        self.say("== 5/6 counting records at the source, in the aggregate and in Hadoop, and auditing them per hour")
        for alias, source in self.report.sources.items():
            cluster = self.topology.clusters[source]
            for topic in await topic_records(
                cluster.bootstrap, timeout=5.0, security=tool_security(self.topology, cluster)
            ):
                if topic.name in TOPICS:
                    self.report.source_records[(alias, topic.name)] = topic.records or 0
        self.report.aggregate_records = await self._aggregate_counts()
        self.report.hadoop = await trio.to_thread.run_sync(count_warehouse, self.warehouse)
        window = (self.produce_started_ms, int(time.time() * 1000))
        self.report.audit = audit(await collect_audit(self.topology, *window))
        self.report.audit_window = window
        for alias, mirror in self.topology.mirrors.items():
            status = MirrorStatus(alias, mirror.source, mirror.target)
            for port in mirror.metrics_ports():
                try:
                    mirror_numbers(status, await scrape(*split_address(f"{mirror.host}:{port}")))
                except ProbeError as exc:
                    self.report.problems.append(f"mirror {alias}: metrics unreadable: {exc}")
            self.report.mirrors[alias] = status
        self.report.source_disk_bytes = self._disk_bytes(
            [self.topology.clusters[s] for s in self.report.sources.values()], TOPICS
        )
        self.report.links = await self._links()
        self.report.aggregate_disk_bytes = self._disk_bytes(
            [self.topology.clusters[self.load.cluster]], [f"{a}.{t}" for a, t in self.report.streams()]
        )

    async def _links(self) -> list[LinkUse]:
        """Every link with its protocol, and the logins its listener counted (brokers' metrics)."""
        used = []
        for link in links(self.topology):
            use = LinkUse(link.client, link.cluster.name, link.listener.name, link.protocol, link.cross_datacenter)
            if link.listener.sasl:
                use.logins = await self._logins(link.cluster, link.listener.name)
            used.append(use)
        return used

    @staticmethod
    async def _logins(cluster: Cluster, listener: str) -> dict[str, int]:
        """Successful logins on ``listener`` by mechanism, summed over the brokers whose metrics
        answer (a broker without a metrics port is not counted)."""
        logins: dict[str, int] = {}
        for broker in cluster.brokers:
            if broker.metrics_port is None:
                continue
            try:
                samples = await scrape(broker.host, broker.metrics_port)
            except ProbeError:
                continue
            for sample in samples:
                if sample.name == "tributary_broker_successful_authentication_total" and (
                    sample.labels.get("listener") == listener
                ):
                    mechanism = sample.labels.get("mechanism", "?")
                    logins[mechanism] = logins.get(mechanism, 0) + int(sample.value)
        return logins

    @staticmethod
    def _disk_bytes(clusters: Iterable[Any], topics: Iterable[str]) -> int:
        """Bytes of the segment files (record batches as produced: zstd) of these topics."""
        topics = list(topics)
        total = 0
        for cluster in clusters:
            for broker in cluster.brokers:
                for topic in topics:
                    prefix = partition_dir_name(topic, 0)[: -len("0")]
                    for directory in broker.data_dir.glob(f"{prefix}*"):
                        if directory.name[len(prefix) :].isdigit():
                            total += sum(f.stat().st_size for f in directory.glob("*.log"))
        return total
