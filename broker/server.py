"""The broker process: open the logs, join the cluster, serve connections.

Everything runs in one nursery. Cancelling it (SIGTERM) stops the listener and
every connection; then, shielded, the logs are flushed and closed with a clean
shutdown marker and a fresh recovery checkpoint, and the registry removes this
broker from ZooKeeper.
"""

from __future__ import annotations

import contextlib
import logging
import time
from functools import partial

import trio

from tributary.broker.cluster.controller import LeaderBalance
from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.config import BrokerConfig
from tributary.broker.connection import serve_connection
from tributary.broker.connection_limits import ConnectionLimits, RateLimitedLog, Refusal
from tributary.broker.dispatch import advertised_versions
from tributary.broker.log.cleaner.metrics import CleanerCollector
from tributary.broker.log.cleaner.service import LogCleaner
from tributary.broker.log.errors import StorageError
from tributary.broker.log.manager import LogManager
from tributary.broker.log.scrubber import Scrubber
from tributary.broker.metrics import BrokerMetrics
from tributary.broker.metrics_http import open_metrics_listeners, serve_metrics
from tributary.broker.metrics_state import BrokerStateCollector
from tributary.broker.security.config import ListenerConfig
from tributary.broker.security.handshake import secure_connection
from tributary.broker.state import Broker

log = logging.getLogger(__name__)

#: A refused connection is logged at most once this often per reason: a flood of
#: them must not become a flood of log lines.
REFUSAL_LOG_INTERVAL = 10.0
#: Where the Prometheus endpoint binds unless ``metrics.host`` says otherwise.
DEFAULT_METRICS_HOST = "127.0.0.1"


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _follow_assignments(broker: Broker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Keep local partitions in line with the registry's assignment; started once
    the first change (everything assigned now) has been applied."""
    first = True
    async for change in broker.registry.assignment_changes():
        broker.partitions.apply(change, first)
        broker.metrics.forget_topics_not_in(broker.snapshot().topics)
        if first:
            task_status.started()
            first = False


async def _flush_scheduler(broker: Broker) -> None:
    checkpoint_failed = False
    while True:
        await trio.sleep(broker.config.flush_scheduler_interval_ms / 1000)
        for partition_log in broker.logs.flush_due(_now_ms()):
            # A disk that fails a flush fails that log (logged and counted by the log itself),
            # not the broker: the others keep flushing, and this one is tried again next time.
            with contextlib.suppress(StorageError):
                await trio.to_thread.run_sync(partition_log.flush)
        try:
            broker.logs.checkpoint_recovery_points()
            broker.logs.checkpoint_high_watermarks()
            broker.logs.checkpoint_log_start_offsets()
        except OSError as exc:
            if not checkpoint_failed:
                log.warning("cannot write the recovery point or high watermark checkpoints (tried each flush): %s", exc)
            checkpoint_failed = True
        else:
            if checkpoint_failed:
                log.warning("the recovery point checkpoint is written again")
            checkpoint_failed = False


#: How often the scrubber reads, in seconds: each step reads a second's worth of its rate or less.
SCRUB_STEP_SECONDS = 0.25


async def _scrub_scheduler(broker: Broker) -> None:
    """One pass over the closed segments every ``log.scrub.interval.ms``, at
    ``log.scrub.bytes.per.second``; a log that does not read back goes offline."""
    interval = broker.config.scrub_interval_ms
    if interval < 0:
        return
    scrubber = Scrubber()
    budget = max(1, int(broker.config.scrub_bytes_per_second * SCRUB_STEP_SECONDS))
    while True:
        passes = scrubber.passes
        while scrubber.passes == passes:
            found = await trio.to_thread.run_sync(scrubber.step, broker.logs.all_logs(), budget)
            for (topic, partition), error in found:
                broker.logs.take_offline(topic, partition, error)
            await trio.sleep(SCRUB_STEP_SECONDS)
        await trio.sleep(interval / 1000)


async def _retention_scheduler(broker: Broker) -> None:
    while True:
        await trio.sleep(broker.config.retention_check_interval_ms / 1000)
        deleted = broker.logs.apply_retention(_now_ms())
        if deleted:
            log.info("retention deleted %d segments", deleted)


def _peer(stream: trio.SocketStream) -> tuple[str, str]:
    """(client IP, "ip:port") of an accepted socket."""
    try:
        host, port, *_ = stream.socket.getpeername()
    except OSError:
        return "unknown", "unknown"
    return str(host), f"{host}:{port}"


async def _accept(
    broker: Broker,
    limits: ConnectionLimits,
    refusals: RateLimitedLog,
    listener: ListenerConfig,
    stream: trio.SocketStream,
) -> None:
    ip, peer = _peer(stream)
    refusal = limits.admit(ip)
    if refusal is not None:
        # Closed before anything is read: the flood costs a file descriptor for a moment.
        broker.metrics.connection_refused(refusal)
        limit, value = (
            ("max.connections", limits.max_connections)
            if refusal is Refusal.MAX_CONNECTIONS
            else ("max.connections.per.ip", limits.max_per_ip)
        )
        refusals.note(refusal, f"refusing connection from {peer}: {limit} ({value}) reached")
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return
    broker.metrics.connection_opened()
    try:
        secured = await secure_connection(
            listener, stream, peer, lookup=broker.credentials.lookup, metrics=broker.metrics, auth_log=broker.auth_log
        )
        if secured is not None:
            await serve_connection(broker, secured[0], peer, secured[1])
    except Exception:
        # A bug in one request's handling must not take the broker down.
        log.exception("connection %s failed", peer)
    finally:
        limits.release(ip)
        broker.metrics.connection_closed()


async def _stop_when_asked(broker: Broker, stop: trio.Event, scope: trio.CancelScope) -> None:
    """A controlled shutdown: leaderships handed over while still serving, then everything stops."""
    await stop.wait()
    config = broker.config
    if config.controlled_shutdown:
        log.info("broker %d: controlled shutdown: moving leadership to other in-sync replicas", config.broker_id)
        moved = await broker.registry.controlled_shutdown(config.controlled_shutdown_timeout_ms / 1000)
        if not moved:
            log.warning(
                "broker %d: leadership not fully moved within controlled.shutdown.timeout.ms; stopping anyway",
                config.broker_id,
            )
    scope.cancel()


async def start_services(broker: Broker, nursery: trio.Nursery) -> None:
    """Start everything a registered broker runs besides its listeners, in ``nursery``; returns
    once it can serve requests (tests run a broker in-process this way, without listeners)."""
    await nursery.start(_follow_assignments, broker)
    # Leaders, followers and their fetchers, as the partition states say.
    await nursery.start(broker.replicas.run)
    # The coordinator loads the __consumer_offsets partitions this broker leads;
    # until a partition is loaded its groups get COORDINATOR_LOAD_IN_PROGRESS.
    await nursery.start(broker.groups.run)
    await nursery.start(broker.groups.follow_leadership, broker.registry)
    # The same for the transaction coordinator and __transaction_state.
    await nursery.start(broker.transactions.run)
    await nursery.start(broker.transactions.follow_leadership, broker.registry)
    # The ACLs, loaded before the first request is served (a no-op without an authorizer).
    await nursery.start(broker.authorizer.run)
    # The SCRAM credentials likewise: a client's first SASL login finds its user.
    await nursery.start(broker.credentials.run, broker.registry.zk_session)
    nursery.start_soon(_flush_scheduler, broker)
    nursery.start_soon(_retention_scheduler, broker)
    nursery.start_soon(_scrub_scheduler, broker)
    # Compaction, off the event loop (docs/compaction.md).
    cleaner = LogCleaner(broker.logs, broker.config.cleaner)
    broker.metrics.registry.register(CleanerCollector(cleaner))
    await nursery.start(cleaner.run)


async def run(
    config: BrokerConfig,
    *,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled, or until `stop` is set: then shut down in a controlled way
    (leadership handed over first, see `controlled.shutdown.enable`) and return. Started with
    every listener's sockets, in the order of ``listeners``."""
    max_open = None if config.max_open_logs < 0 else max(1, config.max_open_logs)
    logs = await trio.to_thread.run_sync(partial(LogManager, config.data_dir, config.log, max_open=max_open))
    metrics = BrokerMetrics()
    logs.on_flush = metrics.flushed
    try:
        security = config.security
        inter_broker = security.listener(security.inter_broker.listener).advertised
        registry = ClusterRegistry(
            config.zookeeper,
            BrokerInfo(
                config.broker_id,
                inter_broker.host,
                inter_broker.port,
                config.datacenter,
                config.rack,
                endpoints=security.advertised,
            ),
            session_timeout=config.zookeeper_session_timeout_ms / 1000,
            balance=LeaderBalance(
                config.auto_leader_rebalance,
                config.leader_imbalance_check_interval_seconds,
                config.leader_imbalance_per_broker_percentage,
            ),
        )
        # Bind before registering: a broker that cannot listen (address in use)
        # must never appear in the cluster's metadata.
        bound: list[tuple[ListenerConfig, list[trio.SocketListener]]] = []
        for listener in security.listeners:
            bind = listener.bind
            try:
                bound.append((listener, await trio.open_tcp_listeners(bind.port, host=bind.host or None)))
            except OSError as exc:
                for _, sockets in bound:
                    for sock in sockets:
                        await sock.aclose()
                setting = "listen" if security.from_listen_flag else "listeners"
                where = f"(setting '{setting}', listener {bind.name})"
                raise OSError(exc.errno, f"cannot listen on {bind.address} {where}: {exc.strerror}") from exc
        metrics_listeners = None
        if config.metrics_port is not None:
            metrics_host = config.metrics_host or DEFAULT_METRICS_HOST
            metrics_listeners = await open_metrics_listeners(metrics_host, config.metrics_port)
        async with trio.open_nursery() as nursery:
            await nursery.start(registry.run)
            broker = Broker(config, registry, logs, advertised_versions(), metrics)
            metrics.registry.register(BrokerStateCollector(broker))
            if metrics_listeners is not None:
                await nursery.start(serve_metrics, metrics.registry, metrics_listeners)
                host, port, *_ = metrics_listeners[0].socket.getsockname()
                log.info("broker %d serves metrics on http://%s:%d/metrics", config.broker_id, host, port)
            await start_services(broker, nursery)
            limits = ConnectionLimits(config.max_connections, config.max_connections_per_ip)
            refusals = RateLimitedLog(log, REFUSAL_LOG_INTERVAL, trio.current_time)
            for listener, sockets in bound:
                await nursery.start(trio.serve_listeners, partial(_accept, broker, limits, refusals, listener), sockets)
            log.info(
                "broker %d listening on %s (advertised %s; inter-broker %s), datacenter %s, data in %s",
                config.broker_id,
                ", ".join(str(listener.bind) for listener in security.listeners),
                ", ".join(str(endpoint) for endpoint in security.advertised),
                security.inter_broker.listener,
                config.datacenter,
                config.data_dir,
            )
            if stop is not None:
                nursery.start_soon(_stop_when_asked, broker, stop, nursery.cancel_scope)
            task_status.started([sock for _, sockets in bound for sock in sockets])
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(logs.close)
            log.info("broker %d: logs flushed and closed", config.broker_id)
