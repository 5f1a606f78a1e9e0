"""Three brokers that replicate over SASL_SSL (inter.broker.listener.name = SECURE, SCRAM-SHA-512 as
user ``broker``): a leader killed with -9 loses no acknowledged record and rejoins over TLS and
SASL; SCRAM credentials set through any broker, or straight in ZooKeeper with ``tributary users``,
reach every broker; AlterUserScramCredentials refuses bad input with Kafka's codes."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.replication.background import BackgroundProducer
from tests.deploy.cli_runner import assert_one_line_error, tributary
from tests.fixtures.security import SecureCluster, security, start_secure_cluster, write_command_config
from tests.fixtures.zookeeper import server_chroot
from tributary.client.admin.users import ScramUpsert, alter_scram_users, describe_scram_users
from tributary.client.blocking import BlockingConnection
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError, SaslAuthenticationFailedError
from tributary.client.security.settings import SecurityConfig
from tributary.client.wire.cluster import Cluster
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    MetadataRequest,
)
from tributary.protocol.secrets import Secret
from tributary.testing.cluster import METADATA_VERSION, BrokerProcess
from tributary.testing.history import read_partitions, wait_until_served
from tributary.testing.polling import eventually
from tributary.testing.wire import request
from tributary.testing.zookeeper import ZooKeeperServer

SESSION_TIMEOUT_MS = 4_000
SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
}


@pytest.fixture(scope="module")
def secure(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from start_secure_cluster(
        server_chroot(zookeeper_server, "secure3"), tmp_path_factory.mktemp("secure3"), 3, SETTINGS, metrics=True
    )


def metric(broker: BrokerProcess, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def isr(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, list[int]]]:
    metadata = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    (found,) = request(broker.address, metadata, METADATA_VERSION).topics
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for p in found.partitions}


def fully_replicated(secure: SecureCluster, topic: str) -> bool:
    for broker in secure.cluster.brokers:
        if broker.proc is None or broker.proc.poll() is not None:
            continue
        try:
            states = isr(broker, topic)
        except OSError:
            return False
        if not states or any(leader < 0 or len(nodes) != 3 for leader, nodes in states.values()):
            return False
    return True


def logs_in(secure: SecureCluster, broker: BrokerProcess, user: str, password: str) -> bool:
    """Whether ``user`` can log in with ``password`` on this broker's SASL_SSL listener."""
    base = security(secure.pki, "scram")
    config = SecurityConfig(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user,
        sasl_password=Secret(password),
        ssl_ca_location=base.ssl_ca_location,
    )
    try:
        with BlockingConnection(*broker.listener_address("SECURE"), config=ClientConfig(security=config)):
            return True
    except SaslAuthenticationFailedError:
        return False


def test_brokers_replicate_over_sasl_ssl_and_a_killed_leader_loses_nothing(secure: SecureCluster) -> None:
    cluster = secure.cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("replicated", 3, 3)], operation_timeout=30)["replicated"].result(30)
    eventually(lambda: fully_replicated(secure, "replicated"), 60, "an ISR of 3 on every partition")
    # Only the replica fetchers use the SASL_SSL listener so far (a new topic's ISR starts full,
    # so they may still be logging in): each broker follows the other two, and each login is
    # counted by the broker it logged in to.
    secure_logins = {"listener": "SECURE", "mechanism": "SCRAM-SHA-512"}
    for broker in cluster.brokers:
        eventually(
            lambda b=broker: metric(b, "tributary_broker_successful_authentication_total", **secure_logins) >= 2,
            30,
            f"the replica fetchers' logins to broker {broker.broker_id}",
        )
        assert (
            metric(broker, "tributary_broker_failed_authentication_total", listener="SECURE", reason="bad_credentials")
            == 0
        )
    with BackgroundProducer(secure.bootstrap("scram"), "replicated", secure.client("scram")) as background:
        time.sleep(1.5)
        victim = cluster.broker(isr(cluster.brokers[0], "replicated")[0][0])
        before = background.acknowledged()
        victim.kill()
        survivor = next(b for b in cluster.brokers if b is not victim)
        eventually(
            lambda: all(leader not in (-1, victim.broker_id) for leader, _ in isr(survivor, "replicated").values()),
            SESSION_TIMEOUT_MS / 1000 + 20,
            "new leaders",
        )
        victim.start()
        victim.wait_ready(expected_brokers=3)
        # Back in sync: its fetchers logged in to the new leaders over SASL_SSL.
        eventually(lambda: fully_replicated(secure, "replicated"), 60, "an ISR of 3 again")
        assert background.acknowledged() > before, "the producer made no progress across the kill"
    wait_until_served(cluster.bootstrap, "replicated", background.history)
    verdict = background.history.check(read_partitions(cluster.bootstrap, "replicated"))
    assert verdict.ok, verdict
    assert verdict.acknowledged > 0 and not background.history.failed


async def test_credentials_set_on_one_broker_reach_every_broker(secure: SecureCluster) -> None:
    brokers = secure.cluster.brokers
    config = ClientConfig(security=security(secure.pki, "scram"))
    async with Cluster(brokers[0].listener_bootstrap("SECURE"), config) as cluster:
        started = time.monotonic()
        errors = await alter_scram_users(cluster, [ScramUpsert("dave", "SCRAM-SHA-512", "dave-1")])
        assert errors == {"dave": None}
        await trio.to_thread.run_sync(
            lambda: eventually(
                lambda: all(logs_in(secure, b, "dave", "dave-1") for b in brokers), 10, "dave everywhere"
            )
        )
        print(f"a new user logs in on every broker {time.monotonic() - started:.2f} s after AlterUserScramCredentials")
        described = await describe_scram_users(cluster, ["dave"])
        assert [(u.name, u.credentials) for u in described] == [("dave", (("SCRAM-SHA-512", 4096),))]
        # A new password: the old one stops working everywhere.
        await alter_scram_users(cluster, [ScramUpsert("dave", "SCRAM-SHA-512", "dave-2", iterations=8192)])
        switched = lambda: all(  # noqa: E731
            logs_in(secure, b, "dave", "dave-2") and not logs_in(secure, b, "dave", "dave-1") for b in brokers
        )
        await trio.to_thread.run_sync(lambda: eventually(switched, 10, "the new password everywhere"))
        assert await alter_scram_users(cluster, deletions=[("dave", "SCRAM-SHA-512")]) == {"dave": None}
        await trio.to_thread.run_sync(
            lambda: eventually(lambda: not any(logs_in(secure, b, "dave", "dave-2") for b in brokers), 10, "gone")
        )
        with pytest.raises(KafkaError, match="RESOURCE_NOT_FOUND"):
            await describe_scram_users(cluster, ["dave"])


async def test_alter_user_scram_credentials_refuses_bad_input_with_kafkas_codes(secure: SecureCluster) -> None:
    up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    down = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    good = {"mechanism": 2, "iterations": 4096, "salt": b"s" * 32, "salted_password": b"p" * 64}
    cases = [
        ([up(name="", **good)], [], "", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([up(name="x1", **{**good, "iterations": 100})], [], "x1", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([up(name="x2", **{**good, "iterations": 100_000})], [], "x2", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([up(name="x3", **{**good, "salted_password": b"short"})], [], "x3", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([up(name="x4", **{**good, "mechanism": 9})], [], "x4", ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([up(name="x5", **good)], [down(name="x5", mechanism=2)], "x5", ErrorCode.DUPLICATE_RESOURCE),
        ([], [down(name="nobody", mechanism=2)], "nobody", ErrorCode.RESOURCE_NOT_FOUND),
    ]
    config = ClientConfig(security=security(secure.pki, "scram"))
    async with Cluster(secure.bootstrap("scram"), config) as cluster:
        for upsertions, deletions, user, code in cases:
            response = await cluster.send_to_any(
                AlterUserScramCredentialsRequest(upsertions=upsertions, deletions=deletions)
            )
            assert [(r.user, r.error_code) for r in response.results] == [(user, code)], response
        # Nothing was stored by any of them.
        listed = await cluster.send_to_any(DescribeUserScramCredentialsRequest(users=None))
        assert {r.user for r in listed.results} == {"broker", "alice", "mirror", "loader"}
        twice = DescribeUserScramCredentialsRequest.UserName
        described = await cluster.send_to_any(
            DescribeUserScramCredentialsRequest(users=[twice("alice"), twice("alice")])
        )
        assert [(r.user, r.error_code) for r in described.results] == [("alice", ErrorCode.DUPLICATE_RESOURCE)]


def test_the_users_command(secure: SecureCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    brokers = secure.cluster.brokers
    password = tmp_path / "erin.password"
    password.write_text("erin-secret\n")
    zk = ["users", "--zookeeper", secure.zookeeper]
    result = tributary(capsys, *zk, "set", "erin", "--password-file", str(password))
    assert result.status == 0, result.err
    # Written to ZooKeeper with a change notification: running brokers pick it up.
    eventually(lambda: all(logs_in(secure, b, "erin", "erin-secret") for b in brokers), 10, "erin everywhere")
    listed = tributary(capsys, "users", "--zookeeper", secure.zookeeper, "list", "--output", "json").json()
    assert {"user": "erin", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]} in listed
    assert "erin-secret" not in result.out + result.err
    # Through the API, as alice, with a command-config file in Kafka's properties form.
    client = {k: v for k, v in secure.client("scram").items() if k != "bootstrap.servers"}
    properties = write_command_config(tmp_path / "alice.properties", client)
    api = ["users", "--bootstrap", secure.bootstrap("scram"), "--command-config", str(properties)]
    table = tributary(capsys, *api, "list")
    assert table.status == 0, table.err
    assert re.search(r"^erin\s+SCRAM-SHA-512 \(4096\)$", table.out, re.M), table.out
    frank = tmp_path / "frank.password"
    frank.write_text("frank-secret")
    setting = tributary(capsys, *api, "set", "frank", "--mechanism", "SCRAM-SHA-256", "--password-file", str(frank))
    assert setting.status == 0, setting.err
    assert tributary(capsys, *api, "delete", "erin").status == 0
    eventually(lambda: not any(logs_in(secure, b, "erin", "erin-secret") for b in brokers), 10, "erin gone")
    assert tributary(capsys, "users", "--zookeeper", secure.zookeeper, "delete", "frank").status == 0
    # Operator errors: one line each, nothing changed.
    empty = tmp_path / "empty"
    empty.write_text("")
    assert_one_line_error(tributary(capsys, *zk, "delete", "nobody"), 1, "has no")
    assert_one_line_error(tributary(capsys, *zk, "set", "x", "--password-file", str(empty)), 2, "is empty")
    assert_one_line_error(tributary(capsys, *zk, "set", "x", "--password-file", str(tmp_path / "no")), 2, "cannot read")
    assert_one_line_error(
        tributary(capsys, *zk, "set", "x", "--password-file", str(password), "--iterations", "10"), 2, "--iterations"
    )
    assert_one_line_error(tributary(capsys, "users", "list"), 2, "exactly one of --zookeeper and --bootstrap")
    bad = write_command_config(tmp_path / "bad.properties", {"security.protocol": "SASL_SSL"})
    assert_one_line_error(
        tributary(capsys, "users", "--bootstrap", secure.bootstrap("scram"), "--command-config", str(bad), "list"),
        2,
        "needs sasl.mechanism",
    )
    wrong = write_command_config(
        tmp_path / "wrong.properties",
        {**{k: v for k, v in secure.client("scram").items() if k != "bootstrap.servers"}, "sasl.password": "guess"},
    )
    wrong_api = ["users", "--bootstrap", secure.bootstrap("scram"), "--command-config", str(wrong)]
    assert_one_line_error(
        tributary(capsys, *wrong_api, "--timeout", "5", "list"),
        1,
        "SASL_AUTHENTICATION_FAILED",
    )
    remaining = tributary(capsys, *zk, "list", "--output", "json").json()
    assert {entry["user"] for entry in remaining} == {"broker", "alice", "mirror", "loader"}


def test_transaction_markers_cross_the_secure_inter_broker_listener(secure: SecureCluster) -> None:
    """A transaction over partitions led by every broker: the coordinator's WriteTxnMarkers reach
    the other leaders over SASL_SSL (the inter-broker listener), so read_committed sees it whole."""
    cluster = secure.cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("txn-secure", 3, 3)], operation_timeout=30)["txn-secure"].result(30)
    eventually(lambda: fully_replicated(secure, "txn-secure"), 60, "an ISR of 3 on every partition")
    assert len({leader for leader, _ in isr(cluster.brokers[0], "txn-secure").values()}) == 3
    producer = Producer({**secure.client("scram"), "transactional.id": "secure-tx", "linger.ms": 5})
    producer.init_transactions(30)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for partition in range(3):
            producer.produce("txn-secure", value=f"{outcome}-{partition}".encode(), partition=partition)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer = Consumer({**secure.client("scram"), "group.id": "secure-readers", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["txn-secure"])
    seen: list[bytes] = []

    def three_read() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
        return len(seen) >= 3

    try:
        eventually(three_read, 60, "the committed transaction on every partition")
        deadline = time.monotonic() + 2  # nothing of the aborted one follows
        while time.monotonic() < deadline:
            three_read()
    finally:
        consumer.close()
    assert sorted(seen) == [b"commit-0", b"commit-1", b"commit-2"]
