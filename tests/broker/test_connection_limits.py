"""Connection and request-memory limits on a live broker: max.connections,
max.connections.per.ip, connections.max.idle.ms and queued.max.request.bytes.

Each test runs a broker with a small limit, pushes past it, and checks three
things: the offender gets Kafka's treatment (a closed connection, or a throttled
one), the broker's metrics and log say so, and a bystander producing and
consuming on a connection of its own all along was served throughout.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.fixtures.prometheus import Scrape, poll, scrape
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.headers import encode_request
from tributary.protocol.messages import ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse
from tributary.testing.cluster import BrokerProcess
from tributary.testing.processes import rss_kib
from tributary.testing.wire import WireConnection

from .wire_helpers import (
    FETCH_V,
    PRODUCE_V,
    ActiveBystander,
    assert_closed,
    batch,
    connect,
    create_topic,
    decode,
    fetch_request,
    latest,
    no_tracebacks,
    produce_request,
    raw_request,
    receive_one,
    running_broker,
    send_and_expect_close,
)

MIB = 1024 * 1024
API_VERSIONS = raw_request(ApiVersionsRequest(), 0, 42)


def _served(sock: socket.socket) -> bool:
    """One ApiVersions v0 on a raw socket: answered (True) or closed unanswered (False)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(API_VERSIONS)
    try:
        answer = receive_one(sock)
    except (ConnectionError, OSError):
        return False
    correlation_id, response = decode(18, 0, answer)
    return correlation_id == 42 and isinstance(response, ApiVersionsResponse) and response.error_code == 0


def _open(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(broker.address, timeout=10, source_address=(source, 0))


def _metrics(broker: BrokerProcess) -> int:
    assert broker.metrics_port is not None
    return broker.metrics_port


def _log_lines(broker: BrokerProcess, pattern: str) -> list[str]:
    return [line for line in broker.log_path.read_text().splitlines() if re.search(pattern, line)]


def _open_connections(broker: BrokerProcess, count: int) -> Scrape:
    """Until the broker counts exactly ``count`` client connections (the readiness checks'
    connections may still be closing when a test starts)."""
    return poll(
        _metrics(broker), lambda s: s.value("tributary_broker_connections") == count, f"{count} connections open"
    )


# --- max.connections and max.connections.per.ip --------------------------------------------------


def test_connections_over_max_connections_are_closed_and_the_others_served(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_broker(zookeeper_server, tmp_path, {"max.connections": "5"}, metrics=True) as cluster:
        broker = cluster.brokers[0]
        with no_tracebacks(broker), ActiveBystander(broker) as bystander, contextlib.ExitStack() as stack:
            _open_connections(broker, 1)  # the bystander's
            held = [stack.enter_context(_open(broker)) for _ in range(4)]
            assert [_served(sock) for sock in held] == [True] * 4
            for _ in range(20):
                with _open(broker) as refused:
                    assert not _served(refused)
            assert [_served(sock) for sock in held] == [True] * 4
            counted = scrape(_metrics(broker))
            assert counted.value("tributary_broker_connections_refused_total", reason="max_connections") == 20
            assert counted.value("tributary_broker_connections") == 5
            # A slot frees when a connection closes, and the next client gets it.
            held.pop().close()
            _open_connections(broker, 4)
            with _open(broker) as late:
                assert _served(late)
            bystander.finish()
        # Twenty refusals, one log line: a flood of connections is not a flood of log lines.
        assert len(_log_lines(broker, r"refusing connection from .*: max\.connections \(5\) reached")) == 1


def test_connections_over_max_connections_per_ip_are_closed_and_other_addresses_served(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_broker(zookeeper_server, tmp_path, {"max.connections.per.ip": "3"}, metrics=True) as cluster:
        broker = cluster.brokers[0]
        with no_tracebacks(broker), ActiveBystander(broker) as bystander, contextlib.ExitStack() as stack:
            flood = [stack.enter_context(_open(broker, "127.0.0.2")) for _ in range(3)]
            assert [_served(sock) for sock in flood] == [True] * 3
            for _ in range(10):
                with _open(broker, "127.0.0.2") as refused:
                    assert not _served(refused)
            # Another address is not affected by 127.0.0.2's quota, nor are its own connections.
            others = [stack.enter_context(_open(broker, "127.0.0.3")) for _ in range(3)]
            assert [_served(sock) for sock in others + flood] == [True] * 6
            counted = scrape(_metrics(broker))
            assert counted.value("tributary_broker_connections_refused_total", reason="max_connections_per_ip") == 10
            assert counted.get("tributary_broker_connections_refused_total", reason="max_connections") == 0
            bystander.finish()
        assert len(_log_lines(broker, r"refusing connection from 127\.0\.0\.2:\d+: max\.connections\.per\.ip")) == 1


# --- connections.max.idle.ms -----------------------------------------------------------------------

IDLE_MS = 500


def test_idle_connections_are_closed_and_active_ones_are_not(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    settings = {"connections.max.idle.ms": str(IDLE_MS)}
    with running_broker(zookeeper_server, tmp_path, settings, metrics=True) as cluster:
        broker = cluster.brokers[0]
        with no_tracebacks(broker), ActiveBystander(broker) as bystander, contextlib.ExitStack() as stack:
            # Silent since connecting; answered once then silent; stuck in the middle of a frame.
            # Each clock starts when this side began its last step, so no later than the broker's
            # last activity on the connection (its accept, its response written, its receive).
            last_activity: dict[socket.socket, float] = {}
            for kind in range(60):
                began = time.monotonic()
                sock = stack.enter_context(_open(broker))
                if kind % 3 == 1:
                    began = time.monotonic()
                    assert _served(sock)
                elif kind % 3 == 2:
                    began = time.monotonic()
                    sock.sendall(API_VERSIONS[:7])
                last_activity[sock] = began
            active = stack.enter_context(WireConnection(*broker.address))
            closed_at: dict[socket.socket, float] = {}
            started = time.monotonic()
            # The active client asks every 100 ms until every idle one is gone (3 s at most).
            while len(closed_at) < len(last_activity):
                assert time.monotonic() - started < 3 + IDLE_MS / 1000, f"{len(closed_at)} closed"
                assert active.request(ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
                waiting = [s for s in last_activity if s not in closed_at]
                readable, _, _ = select.select(waiting, [], [], 0.1)
                for sock in readable:
                    closed_at[sock] = time.monotonic()
                    assert_closed(sock)
            silences = [closed_at[s] - last_activity[s] for s in last_activity]
            assert min(silences) >= IDLE_MS / 1000, min(silences)  # never before the timeout
            # The active connection outlived them all, several timeouts long.
            assert time.monotonic() - started > IDLE_MS / 1000
            assert active.request(ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
            assert scrape(_metrics(broker)).value("tributary_broker_connections_closed_idle_total") >= 60
            bystander.finish()
        print(f"idle connections closed after {min(silences):.3f}-{max(silences):.3f} s of silence")


# --- queued.max.request.bytes ------------------------------------------------------------------------

BUDGET = 8 * MIB
# Two of these would fit the budget, but not one connection's share of it.
FRAME = 4 * MIB - 16 * 1024
FRAMES = 12
LONG_POLL_MS = 3000


@contextlib.contextmanager
def _peak_rss(pid: int) -> Iterator[list[int]]:
    """Samples the broker's VmRSS every few milliseconds while the block runs; the list
    holds the peak so far."""
    peak = [rss_kib(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.002):
            peak[0] = max(peak[0], rss_kib(pid))

    thread = threading.Thread(target=sample, name="rss", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join(5)


def _produce_frame(topic: str, correlation_id: int) -> bytes:
    """A Produce request of exactly FRAME bytes (easier sums below): one record of
    incompressible bytes, trimmed until the frame is the right size (varints move)."""
    value = os.urandom(FRAME)
    while True:
        request = encode_request(produce_request(topic, {0: batch(value)}), PRODUCE_V, correlation_id, "pipeliner")
        if len(request) - 4 == FRAME:
            return request
        value = value[: len(value) - (len(request) - 4 - FRAME)]


def test_pipelined_large_requests_are_throttled_answered_in_order_and_memory_stays_bounded(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """A Fetch long-polls in front of twelve 4 MiB produce requests on one connection.
    While it waits the broker reads none of them: one would pass the connection's share
    of the 8 MiB budget (a quarter), so the connection waits for its own answers, and
    every other client keeps the rest. Then every request is answered, in order."""
    settings = {"queued.max.request.bytes": str(BUDGET), "message.max.bytes": str(8 * MIB)}
    with running_broker(zookeeper_server, tmp_path, settings, metrics=True) as cluster:
        broker = cluster.brokers[0]
        assert broker.proc is not None
        port = _metrics(broker)
        with no_tracebacks(broker), ActiveBystander(broker) as bystander, connect(broker) as client:
            quiet, topic = create_topic(client), create_topic(client)
            fetch = encode_request(
                fetch_request([(quiet, 0, 0)], max_wait_ms=LONG_POLL_MS, min_bytes=1), FETCH_V, 0, "pipeliner"
            )
            produces = [_produce_frame(topic, i + 1) for i in range(FRAMES)]
            rss_before = rss_kib(broker.proc.pid)
            with _peak_rss(broker.proc.pid) as peak:
                sender = threading.Thread(target=client.sock.sendall, args=(fetch + b"".join(produces),))
                sender.start()
                try:
                    poll(
                        port,
                        lambda s: (
                            s.value("tributary_broker_queued_request_bytes") == len(fetch) - 4
                            and s.value("tributary_broker_connections_throttled") == 1
                        ),
                        "the budget to hold the fetch alone, and the pipeliner to be throttled",
                        timeout=LONG_POLL_MS / 1000,
                    )
                    # Answered in order: the fetch (empty, after its wait), then each produce at the next offset.
                    client.sock.settimeout(30)
                    first = receive_one(client.sock)
                    correlation_id, fetched = decode(1, FETCH_V, first)
                    assert correlation_id == 0 and isinstance(fetched, FetchResponse)
                    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
                    for i in range(FRAMES):
                        answer = receive_one(client.sock)
                        correlation_id, produced = decode(0, PRODUCE_V, answer)
                        assert correlation_id == i + 1 and isinstance(produced, ProduceResponse)
                        (result,) = produced.responses[0].partition_responses
                        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, i)
                finally:
                    sender.join(30)
            rss_after = rss_kib(broker.proc.pid)
            assert latest(client, topic) == FRAMES
            poll(port, lambda s: s.value("tributary_broker_queued_request_bytes") == 0, "the budget to be whole")
            bystander.finish()
        print(
            f"broker VmRSS: {rss_before} KiB before, peak {peak[0]} KiB, {rss_after} KiB after "
            f"{FRAMES} x {FRAME >> 10} KiB pipelined; bystander's slowest round {bystander.slowest:.2f} s"
        )
        # The budget (8 MiB) plus one frame being assembled and copied; without the
        # budget the broker read 48 MiB ahead here.
        assert peak[0] - rss_before < 24 * 1024, (rss_before, peak[0], rss_after)
        # The bystander was never queued behind the long poll.
        assert bystander.slowest < LONG_POLL_MS / 1000
        assert rss_after - rss_before < 24 * 1024, (rss_before, peak[0], rss_after)


def test_frame_larger_than_the_budget_closes_only_its_connection(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = {"queued.max.request.bytes": str(BUDGET)}
    with running_broker(zookeeper_server, tmp_path, settings, metrics=True) as cluster:
        broker = cluster.brokers[0]
        with no_tracebacks(broker), ActiveBystander(broker) as bystander, connect(broker) as neighbour:
            # Refused on its length alone (under socket.request.max.bytes, over the budget).
            send_and_expect_close(broker, struct.pack(">i", BUDGET + 1) + b"\0" * 1000)
            # A frame of exactly the budget is still served, as is a connection opened before.
            at_limit = raw_request(ApiVersionsRequest(), 0, 7)
            at_limit = struct.pack(">i", BUDGET) + at_limit[4:] + b"\0" * (BUDGET - len(at_limit) + 4)
            with _open(broker) as sock:
                sock.sendall(at_limit)
                assert struct.unpack_from(">i", receive_one(sock)) == (7,)
            assert neighbour.request(ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
            poll(_metrics(broker), lambda s: s.value("tributary_broker_queued_request_bytes") == 0, "a whole budget")
            bystander.finish()
        assert _log_lines(broker, rf"frame of {BUDGET + 1} bytes exceeds queued\.max\.request\.bytes \({BUDGET}\)")
