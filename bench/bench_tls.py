"""What TLS costs: fetch and produce throughput over SASL_SSL against PLAINTEXT, and TLS+SCRAM
connection set-ups per second, against one broker in one run.

One ZooKeeper and one ``tributary broker`` with two listeners: ``PLAINTEXT`` and ``SECURE``
(SASL_SSL, SCRAM-SHA-512; an EC P-256 certificate from a throw-away CA; TLS 1.3). Each shape
alternates the two paths round after round (rotating who goes first) and reports the median
rate of each and the median of the per-round ratios, secure over plaintext; the broker's CPU
seconds per round (``/proc/<pid>/stat``) give its cost per GB.

Shapes:

* ``fetch``: a raw Fetch v11 loop (the ``protocol`` package; responses read into one buffer,
  only batch headers walked) reading a preloaded 1 KiB-record topic, 1 MiB per request. Over
  PLAINTEXT the broker sends the records with ``os.sendfile``; over TLS it reads them with
  ``os.preadv`` into a pooled buffer and encrypts them (broker/transport.py). The client side
  decrypts in this process with Python's ``ssl`` (OpenSSL).
* ``produce``: confluent-kafka (librdkafka) sends 1 KiB uncompressed values, acks=1, 1 MB
  batches (linger.ms 5); the broker decrypts the requests.
* ``send``: the broker's send path alone, in this process: a segment file sent over a
  connected socket pair by ``broker/transport.py`` as a fetch response's file region is, through
  trio's SSLStream (``os.preadv`` into a pooled 256 KiB buffer, the broker's way), through the
  same stream reading a new ``bytes`` object per 1 MiB chunk (``os.pread``, the obvious way),
  and with ``os.sendfile`` on the plain socket; the reader (decrypting) runs in a thread. The
  figure is the sending thread's CPU per GB.
* ``connect``: set-ups one after another by the appliance's blocking client: TCP and
  ApiVersions over PLAINTEXT, against TCP, a TLS handshake, ApiVersions, SaslHandshake and the
  two SCRAM-SHA-512 round trips over SECURE. The client's own PBKDF2 (4096 iterations) is part
  of each set-up, as it is for every real client; the broker's CPU per set-up says what a flood
  of logins costs it.

Run from the repository root (about 2 minutes; --quick about 20 s)::

    .venv/bin/python -m bench.bench_tls [--quick] [--repeat N] [--json] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import trio
from confluent_kafka.admin import AdminClient, NewTopic

from bench import common
from bench.bench_broker import MIB, RawFetcher
from bench.common import log
from bench.processes import cpu_seconds
from tributary.broker import transport
from tributary.client.blocking import BlockingConnection
from tributary.client.config import ClientConfig
from tributary.client.security.login import sasl_login
from tributary.client.security.settings import SecurityConfig
from tributary.client.wire.versions import BrokerApiVersions, api_versions_request, decode_api_versions
from tributary.deploy.cli.users import set_user
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.secrets import Secret
from tributary.testing.cluster import Cluster
from tributary.testing.tls import CertificateAuthority
from tributary.testing.zookeeper import LocalZooKeeper, new_chroot

USER, PASSWORD = "bench", "bench-secret"
VALUE_SIZE = 1024
TOPIC = "tls"


@dataclass(frozen=True)
class Sizes:
    fetch_bytes: int  # per round and path
    send_bytes: int  # per round and path (the send shape)
    produce_messages: int  # per round and path
    connections: int  # per round and path
    preload_bytes: int
    repeat: int

    @classmethod
    def pick(cls, quick: bool, repeat: int | None) -> Sizes:
        if quick:
            return cls(16 * MIB, 16 * MIB, 5_000, 10, 16 * MIB, repeat or 2)
        return cls(512 * MIB, 128 * MIB, 100_000, 100, 128 * MIB, repeat or 7)


@dataclass
class Round:
    seconds: float
    work: float
    broker_cpu: float


class SecureFetcher(RawFetcher):
    """The benchmark's raw fetch loop on an already logged-in (TLS) socket."""

    def __init__(self, sock: socket.socket, topic: str) -> None:
        self.sock = sock
        self.topic = topic
        self.buf = bytearray(8 * MIB)
        self.correlation_id = 100


def _exchange(sock: socket.socket, decoder: FrameDecoder, body: Any, version: int, correlation_id: int) -> bytes:
    sock.sendall(encode_request(body, version, correlation_id, "bench-tls"))
    while (frame := decoder.next_frame()) is None:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        decoder.feed(data)
    return frame


def logged_in_socket(address: tuple[str, int], security: SecurityConfig) -> socket.socket:
    """A TLS socket that has done ApiVersions and the SASL login, ready for raw requests."""
    raw = socket.create_connection(address)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock = security.ssl_context().wrap_socket(raw, server_hostname=address[0])
    decoder = FrameDecoder()
    frame = _exchange(sock, decoder, api_versions_request(), 3, 1)
    _, response, version = decode_api_versions(frame, 3)
    versions = BrokerApiVersions.from_response(response, "bench", version)
    login = sasl_login(security, versions, "bench")
    step = next(login)
    correlation_id = 2
    while True:
        request, version = step
        frame = _exchange(sock, decoder, request, version, correlation_id)
        _, answer = decode_response(type(request).SPEC.api_key, version, frame)
        correlation_id += 1
        try:
            step = login.send(answer)
        except StopIteration:
            return sock


def timed(pid: int, job: Callable[[], float]) -> Round:
    """``job`` returns its work (bytes, messages, connections); the round's time and broker CPU."""
    cpu = cpu_seconds(pid) or 0.0
    start = time.perf_counter()
    work = job()
    seconds = time.perf_counter() - start
    return Round(seconds, work, (cpu_seconds(pid) or 0.0) - cpu)


def paired(jobs: Sequence[Callable[[], Round]], repeat: int) -> list[list[Round]]:
    """Each job once per round, rotating who goes first; one untimed warm-up round first."""
    for job in jobs:
        job()
    rounds: list[list[Round]] = [[] for _ in jobs]
    for r in range(repeat):
        for i in range(len(jobs)):
            which = (r + i) % len(jobs)
            rounds[which].append(jobs[which]())
    return rounds


def summarise(unit: str, plain: list[Round], secure: list[Round]) -> dict[str, Any]:
    def rate(rounds: list[Round]) -> float:
        return statistics.median(r.work / r.seconds for r in rounds)

    def cpu_per(rounds: list[Round]) -> float:
        return statistics.median(r.broker_cpu / r.work for r in rounds if r.work)

    return {
        "unit": unit,
        "rounds": len(plain),
        "plaintext": rate(plain),
        "secure": rate(secure),
        "ratio": statistics.median(
            s.work / s.seconds / (p.work / p.seconds) for p, s in zip(plain, secure, strict=True)
        ),
        "broker_cpu_per_unit_plaintext": cpu_per(plain),
        "broker_cpu_per_unit_secure": cpu_per(secure),
    }


def preload(bootstrap: str, total: int) -> int:
    """``total`` bytes of 1 KiB records in the topic (one partition); its end offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    count = total // VALUE_SIZE
    values = [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(64)]
    common.confluent_produce(
        bootstrap, TOPIC, values, count, {"linger.ms": 5, "batch.size": 1_000_000, "acks": 1}, label="preload"
    )
    return count


def fetch_pass(fetcher: RawFetcher, end_offset: int, want: int) -> float:
    total, offset = 0, 0
    while total < want:
        nbytes, reached = fetcher.fetch(offset, MIB)
        if reached == offset:
            raise RuntimeError(f"nothing at offset {offset} of {end_offset}")
        total += nbytes
        offset = 0 if reached >= end_offset else reached
    return float(total)


def measure(root: Path, sizes: Sizes) -> dict[str, Any]:
    with LocalZooKeeper(root / "zk") as zookeeper:
        hosts = new_chroot(zookeeper.hosts, "bench")
        set_user(hosts, USER, "SCRAM-SHA-512", PASSWORD)
        ca = CertificateAuthority.create(root / "tls")
        server = ca.issue("broker")
        settings = {
            "ssl.keystore.location": json.dumps(str(server.keystore)),
            "sasl.enabled.mechanisms": '"SCRAM-SHA-512"',
            "inter.broker.listener.name": '"PLAINTEXT"',
            "log.segment.bytes": str(1 << 30),
        }
        listeners = {"PLAINTEXT": "PLAINTEXT", "SECURE": "SASL_SSL"}
        with Cluster(hosts, root / "cluster", 1, settings, listeners=listeners) as cluster:
            broker = cluster.brokers[0]
            assert broker.proc is not None
            pid = broker.proc.pid
            security = SecurityConfig(
                protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_username=USER,
                sasl_password=Secret(PASSWORD),
                ssl_ca_location=ca.path,
            )
            plain_address, secure_address = broker.address, broker.listener_address("SECURE")
            log(f"preloading {sizes.preload_bytes / MIB:.0f} MiB")
            end_offset = preload(cluster.bootstrap, sizes.preload_bytes)
            results: dict[str, Any] = {}

            log("fetch")
            plain_fetcher = RawFetcher(plain_address[1], TOPIC)
            secure_fetcher = SecureFetcher(logged_in_socket(secure_address, security), TOPIC)
            try:
                rounds = paired(
                    [
                        lambda: timed(pid, lambda: fetch_pass(plain_fetcher, end_offset, sizes.fetch_bytes)),
                        lambda: timed(pid, lambda: fetch_pass(secure_fetcher, end_offset, sizes.fetch_bytes)),
                    ],
                    sizes.repeat,
                )
            finally:
                plain_fetcher.close()
                secure_fetcher.close()
            results["fetch"] = summarise("MB", *_scaled(rounds, 1e6))

            log("produce")
            values = [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(64)]
            base = {"linger.ms": 5, "batch.size": 1_000_000, "acks": 1}
            secure_client = {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER,
                "sasl.password": PASSWORD,
                "ssl.ca.location": str(ca.path),
            }

            def produce(bootstrap: str, extra: dict[str, str]) -> Callable[[], Round]:
                def job() -> float:
                    n = sizes.produce_messages
                    common.confluent_produce(bootstrap, TOPIC, values, n, {**base, **extra}, label="produce")
                    return float(n * VALUE_SIZE)

                return lambda: timed(pid, job)

            rounds = paired(
                [produce(cluster.bootstrap, {}), produce(broker.listener_bootstrap("SECURE"), secure_client)],
                sizes.repeat,
            )
            results["produce"] = summarise("MB", *_scaled(rounds, 1e6))

            log("connect")

            def connect(address: tuple[str, int], config: ClientConfig) -> Callable[[], Round]:
                def job() -> float:
                    for _ in range(sizes.connections):
                        BlockingConnection(*address, config=config).close()
                    return float(sizes.connections)

                return lambda: timed(pid, job)

            rounds = paired(
                [connect(plain_address, ClientConfig()), connect(secure_address, ClientConfig(security=security))],
                sizes.repeat,
            )
            results["connect"] = summarise("connections", rounds[0], rounds[1])
            log("send")
            results["send"] = send_paths(root, sizes)
            return results


class _Region:
    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.position, self.size = fd, 0, size


async def _naive_send(stream: trio.abc.SendStream, region: _Region) -> None:
    """The obvious fallback: a new bytes object per 1 MiB chunk."""
    offset, remaining = region.position, region.size
    while remaining:
        chunk = os.pread(region.fd, min(remaining, MIB), offset)
        await stream.send_all(chunk)
        offset += len(chunk)
        remaining -= len(chunk)


def send_paths(root: Path, sizes: Sizes) -> dict[str, Any]:
    """Sender CPU per GB of the three ways to send a file region (see the module's docstring)."""
    ca = CertificateAuthority.create(root / "send-tls")
    server = ca.issue("sender")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(server.keystore)
    client_context = ssl.create_default_context(cafile=ca.path)
    path = root / "segment"
    size = sizes.send_bytes
    path.write_bytes(os.urandom(size))
    fd = os.open(path, os.O_RDONLY)

    def one(kind: str) -> float:
        """The sender's CPU seconds for one pass over the file."""
        sender, receiver = socket.socketpair()
        tls = kind != "sendfile"

        def read() -> None:
            sock = client_context.wrap_socket(receiver, server_hostname="127.0.0.1") if tls else receiver
            buf, got = bytearray(MIB), 0
            while got < size and (n := sock.recv_into(buf)):
                got += n
            sock.close()

        thread = threading.Thread(target=read)
        thread.start()

        async def send() -> float:
            plain = trio.SocketStream(trio.socket.from_stdlib_socket(sender))
            stream: trio.abc.SendStream = plain
            if tls:
                stream = trio.SSLStream(plain, server_context, server_side=True)
                await stream.do_handshake()  # type: ignore[attr-defined]
            start = time.thread_time()
            if kind == "naive":
                await _naive_send(stream, _Region(fd, size))
            else:
                await transport.send_region(stream, _Region(fd, size), sendfile=kind == "sendfile")
            spent = time.thread_time() - start
            await stream.aclose()
            return spent

        spent = trio.run(send)
        thread.join()
        return spent

    try:
        kinds = ["pooled", "naive", "sendfile"]
        rounds = paired([lambda k=k: Round(one(k), size / 1e6, 0.0) for k in kinds], sizes.repeat)  # type: ignore[misc]
    finally:
        os.close(fd)
    return {
        kind: statistics.median(r.seconds / r.work * 1000 for r in side)
        for kind, side in zip(kinds, rounds, strict=True)
    } | {"rounds": len(rounds[0])}


def _scaled(rounds: list[list[Round]], unit: float) -> tuple[list[Round], list[Round]]:
    plain, secure = ([Round(r.seconds, r.work / unit, r.broker_cpu) for r in side] for side in rounds)
    return plain, secure


def render(document: dict[str, Any]) -> str:
    shapes = document["shapes"]
    rows = []
    for name, label in (("fetch", "fetch MB/s"), ("produce", "produce MB/s"), ("connect", "set-ups/s")):
        shape = shapes[name]
        per = 1000.0  # per GB (units are MB), or ms per set-up
        unit = "CPU s/GB" if name != "connect" else "CPU ms/set-up"
        rows.append(
            [
                label,
                f"{shape['plaintext']:,.1f}",
                f"{shape['secure']:,.1f}",
                f"{shape['ratio']:.2f}x",
                f"{shape['broker_cpu_per_unit_plaintext'] * per:.2f}",
                f"{shape['broker_cpu_per_unit_secure'] * per:.2f}",
                unit,
            ]
        )
    header = ["shape", "PLAINTEXT", "SASL_SSL", "ratio", "broker CPU plain", "broker CPU TLS", ""]
    send = shapes.get("send")
    send_lines = []
    if send is not None:
        send_lines = [
            "",
            "the send path alone, sending thread's CPU s/GB (median of "
            f"{send['rounds']} rounds): TLS, preadv into a pooled buffer {send['pooled']:.2f}; "
            f"TLS, a new bytes per 1 MiB chunk {send['naive']:.2f}; plaintext sendfile {send['sendfile']:.2f}",
        ]
    machine = document["machine"]
    return "\n".join(
        [
            f"machine: {machine['date']}; {machine['cpus']} CPUs; {machine['python']}",
            f"command: {document['command']}",
            f"sizes: {document['sizes']}",
            "",
            common.table(header, rows),
            *send_lines,
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 rounds: a smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per shape (default 7; 2 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, data)")
    parser.add_argument("--from-json", type=Path, default=None, metavar="F", help="print the tables of a --json file")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return 0
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = Sizes.pick(args.quick, args.repeat)
    command = shlex.join([sys.executable, "-m", "bench.bench_tls", *(sys.argv[1:] if argv is None else argv)])
    root = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    started = time.monotonic()
    try:
        shapes = measure(root, sizes)
    except (confluent_kafka.KafkaException, RuntimeError, TimeoutError, OSError, ssl.SSLError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    document = {
        "machine": common.machine(),
        "command": command,
        "confluent_kafka": f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})",
        "sizes": asdict(sizes),
        "shapes": shapes,
    }
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
