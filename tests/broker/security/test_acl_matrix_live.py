"""The ACL matrix on three live brokers, with real clients logged in as real principals.

The brokers run the ACL authorizer with ``super.users = User:broker;User:admin``: ``broker`` is
the brokers' own SASL_SSL login (replication, transaction markers), ``admin`` the operator who
sets the stage. Every other principal authenticates for real, one client per principal and API:
confluent-kafka (librdkafka) over SASL_SSL with SCRAM-SHA-512, kafka-python over SASL_PLAINTEXT
with SCRAM-SHA-256, kcat over SASL_PLAINTEXT with PLAIN, Tributary's own client where the others
have no call for an API, and a client certificate on the mutual-TLS listener, its subject mapped
by ``ssl.principal.mapping.rules``.

For each API: a principal without the permission gets the API's *_AUTHORIZATION_FAILED as the
client reports it, and nothing changed (log end offsets, topics, partitions, configs, committed
offsets, groups, ACLs, credentials, replicas: read back as ``admin``); with exactly the ACLs Kafka
requires, it succeeds. Then PREFIXED patterns, Deny over Allow, super users, hosts, and an ACL's
creation and removal in force on every broker within a second (Metadata as alice, on each).

Not here: every API and edge of the matrix on one in-process broker (test_acl_matrix.py); the
``tributary acls`` command, and ACLs surviving a restart of every broker (test_acls_live.py, whose
clients are ``User:ANONYMOUS``); ``allow.everyone.if.no.acl.found`` (test_authorizer.py).

One cluster for the module; each test names its own topics and groups, and every ACL a test
granted is removed after it (``clean_acls``), so the tests are independent of their order.
"""

from __future__ import annotations

import gc
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import trio
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AclBinding as CKAclBinding
from confluent_kafka.admin import AclBindingFilter as CKAclBindingFilter
from confluent_kafka.admin import AclOperation as CKAclOperation
from confluent_kafka.admin import AclPermissionType as CKAclPermissionType
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ResourcePatternType as CKResourcePatternType
from confluent_kafka.admin import ResourceType as CKResourceType
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType as KPConfigResourceType
from kafka.admin import NewTopic as KPNewTopic
from kafka.admin._acls import ACLFilter as KPACLFilter
from kafka.admin._acls import ACLOperation as KPACLOperation
from kafka.admin._acls import ACLPermissionType as KPACLPermissionType
from kafka.admin._acls import ACLResourcePatternType as KPACLPatternType
from kafka.admin._acls import ResourcePatternFilter as KPResourcePatternFilter
from kafka.admin._acls import ResourceType as KPResourceType
from kafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdNotFoundError,
)
from kafka.structs import TopicPartition as KPTopicPartition

from tests.fixtures.security import PRINCIPAL_RULES, SecureCluster, start_secure_cluster
from tests.fixtures.zookeeper import server_chroot
from tributary.client.admin.acls import create_request, delete_request
from tributary.client.admin.admin import Admin
from tributary.client.blocking import BlockingConnection
from tributary.client.config import ClientConfig
from tributary.client.security.settings import security_from_settings
from tributary.client.wire.cluster import Cluster as WireCluster
from tributary.client.wire.metadata import TopicPartition as OurTopicPartition
from tributary.deploy.cli.users import set_user
from tributary.protocol.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import MetadataRequest
from tributary.testing.polling import eventually
from tributary.testing.tls import Issued
from tributary.testing.zookeeper import ZooKeeperServer

T = TypeVar("T")
KCAT = shutil.which("kcat") or "/usr/bin/kcat"
TIMEOUT = 30.0
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
#: Users of this module besides the fixture's (broker, alice, mirror, loader).
PASSWORDS = {"admin": "admin-secret", "bob": "bob-secret", "alice": "alice-secret"}
#: carol's certificate (CN=Carol,OU=Ops) maps to User:carol@ops by the second rule.
CAROL = "User:carol@ops"
MTLS_RULES = PRINCIPAL_RULES.replace(",DEFAULT", ",RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT")
SETTINGS = {
    "authorizer.class.name": '"kafka.security.authorizer.AclAuthorizer"',
    "super.users": '"User:broker;User:admin"',
    "allow.everyone.if.no.acl.found": "false",
    "listener.name.mtls.ssl.principal.mapping.rules": f'"{MTLS_RULES}"',
    "default.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}

Op, Res = AclOperation, ResourceType
TOPIC, GROUP, CLUSTER, TXN = Res.TOPIC, Res.GROUP, Res.CLUSTER, Res.TRANSACTIONAL_ID


def allow(kind: ResourceType, name: str, operation: AclOperation, who: str = ALICE, *, host: str = "*",
          prefixed: bool = False, deny: bool = False) -> AclBinding:  # fmt: skip
    pattern = ResourcePattern(kind, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(pattern, AccessControlEntry(who, host, operation, permission))


def deny(kind: ResourceType, name: str, operation: AclOperation, who: str = ALICE, *, host: str = "*",
         prefixed: bool = False) -> AclBinding:  # fmt: skip
    return allow(kind, name, operation, who, host=host, prefixed=prefixed, deny=True)


def exactly(binding: AclBinding) -> AclBindingFilter:
    """The filter that matches ``binding`` and nothing else."""
    pattern, entry = binding.pattern, binding.entry
    return AclBindingFilter(
        ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type),
        AccessControlEntryFilter(entry.principal, entry.host, entry.operation, entry.permission_type),
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def failure(future: Future[Any]) -> int | None:
    """The KafkaError code a confluent-kafka admin future failed with; None when it succeeded."""
    try:
        future.result(TIMEOUT)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


class AdminThread:
    """Tributary's Admin on a trio loop of its own, in a thread, for calls from the tests' thread."""

    def __init__(self, bootstrap: str, config: ClientConfig) -> None:
        self._bootstrap, self._config = bootstrap, config
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="acl-matrix-admin", daemon=True)
        self._thread.start()
        assert self._ready.wait(TIMEOUT), "the admin client did not start"
        if self._failed is not None:
            raise self._failed

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported by __init__ when it happens before ready
            self._failed = exc
            self._ready.set()

    async def _main(self) -> None:
        self._stop = trio.Event()
        async with WireCluster(self._bootstrap, self._config) as cluster:
            self._admin = Admin(cluster)
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()

    def call(self, call: Callable[[Admin], Awaitable[T]]) -> T:
        return trio.from_thread.run(call, self._admin, trio_token=self._token)

    def close(self) -> None:
        trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(TIMEOUT)


class Stage:
    """The cluster, the clients of each principal, and what ``admin`` reads back."""

    def __init__(self, secure: SecureCluster, carol: Issued) -> None:
        self.secure = secure
        self.carol = carol
        self.brokers = secure.cluster.brokers
        self.admin = AdminClient(self.ck("admin"))
        self._admin = AdminThread(secure.bootstrap("scram"), self.ours("admin"))
        #: admin's connection to each broker, for what each broker knows.
        self._metadata = [
            BlockingConnection(*b.listener_address("SECURE"), config=self.ours("admin")) for b in self.brokers
        ]

    def close(self) -> None:
        self._admin.close()
        for conn in self._metadata:
            conn.close()

    # --- clients

    def ck(self, user: str = "alice", **extra: Any) -> dict[str, Any]:
        """librdkafka's settings for ``user`` on the SASL_SSL listener, SCRAM-SHA-512."""
        return {
            "bootstrap.servers": self.secure.bootstrap("scram"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            "ssl.ca.location": str(self.secure.pki.ca.path),
            **extra,
        }

    def kp(self, user: str = "alice", **extra: Any) -> dict[str, Any]:
        """kafka-python's settings for ``user`` on the SASL_PLAINTEXT listener, SCRAM-SHA-256."""
        return {
            "bootstrap_servers": self.secure.bootstrap("plain"),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
            "request_timeout_ms": int(TIMEOUT * 1000),
            **extra,
        }

    def mtls(self, **extra: Any) -> dict[str, Any]:
        """librdkafka's settings for carol's certificate on the mutual-TLS listener."""
        return {
            "bootstrap.servers": self.secure.bootstrap("mtls"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.secure.pki.ca.path),
            "ssl.certificate.location": str(self.carol.certificate),
            "ssl.key.location": str(self.carol.key),
            **extra,
        }

    def kcat(self, user: str = "bob") -> list[str]:
        """kcat's options for ``user`` on the SASL_PLAINTEXT listener, PLAIN."""
        settings = {
            "bootstrap.servers": self.secure.bootstrap("plain"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
        }
        return [KCAT, *(arg for key, value in settings.items() for arg in ("-X", f"{key}={value}"))]

    def ours(self, user: str = "admin") -> ClientConfig:
        """Tributary's client as ``user`` (SASL_SSL, SCRAM-SHA-512)."""
        settings = {k: v for k, v in self.ck(user).items() if k != "bootstrap.servers"}
        return ClientConfig(security=security_from_settings(settings))

    def run(self, call: Callable[[Admin], Awaitable[T]], user: str = "admin") -> T:
        """One call of Tributary's Admin, as ``user``: admin's on the connections it keeps for
        the module (a TLS and SCRAM login to each broker for each call was a third of the
        module's time), anyone else's on connections of its own."""
        if user == "admin":
            return self._admin.call(call)

        async def main() -> T:
            async with WireCluster(self.secure.bootstrap("scram"), self.ours(user)) as cluster:
                return await call(Admin(cluster))

        return trio.run(main)

    # --- the operator's stage, and what it reads back

    def grant(self, *bindings: AclBinding) -> None:
        """As admin; returns once every broker lists them (each hears of ACLs on its own)."""
        self.run(lambda admin: admin.create_acls(list(bindings), timeout=TIMEOUT))

    def revoke(self, *bindings: AclBinding) -> None:
        filters = [exactly(b) for b in bindings]
        self.run(lambda admin: admin.delete_acls(filters, timeout=TIMEOUT))

    def acls(self) -> set[AclBinding]:
        return set(self.run(lambda admin: admin.describe_acls(timeout=TIMEOUT)))

    def create_topic(self, name: str, partitions: int = 1, replicas: int = 3) -> None:
        """Created, and returns once every broker describes it with its leaders (each learns
        of a topic from ZooKeeper on its own; a test's client may ask any of them first)."""
        failed = failure(self.admin.create_topics([NewTopic(name, partitions, replicas)])[name])
        assert failed is None, failed
        asked = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                allow_auto_topic_creation=False)  # fmt: skip

        def everywhere() -> bool:
            for conn in self._metadata:
                (found,) = conn.request(asked).topics
                if found.error_code or len(found.partitions) < partitions:
                    return False
                if any(p.leader_id < 0 for p in found.partitions):
                    return False
            return True

        eventually(everywhere, TIMEOUT, f"{name} on every broker, with its leaders")

    def settle_group_coordinator(self) -> None:
        """``__consumer_offsets`` created and its coordinator loaded, before any test asks for
        a group: librdkafka's admin client (2.16; librdkafka issue #5040, open) dereferences a
        null consumer group when a ListConsumerGroupOffsets answer carries NOT_COORDINATOR,
        which a broker answers (as Kafka's does) while the coordinator a FindCoordinator named
        has not yet taken the partition over: in this module, the moment of the first group
        request, when ``__consumer_offsets`` is created. That segmentation fault took the
        whole pytest worker with it. Tributary's Admin retries NOT_COORDINATOR."""
        self.run(lambda admin: admin.committed_offsets("acl-matrix-settle", timeout=TIMEOUT))

    def topics(self) -> set[str]:
        return {t for t in self.admin.list_topics(timeout=TIMEOUT).topics if not t.startswith("__")}

    def end_offsets(self, topic: str, partitions: int = 1) -> list[int]:
        asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        found = self.admin.list_offsets(asked, request_timeout=TIMEOUT)
        return [found[TopicPartition(topic, p)].result(TIMEOUT).offset for p in range(partitions)]

    def produce(self, topic: str, count: int) -> None:
        producer = Producer(self.ck("admin"))
        for i in range(count):
            producer.produce(topic, value=b"v%d" % i)
        assert producer.flush(TIMEOUT) == 0


@pytest.fixture(scope="module")
def stage(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    hosts = server_chroot(zookeeper_server, "aclmatrix")
    for user in ("admin", "bob"):
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            set_user(hosts, user, mechanism, PASSWORDS[user])
    root = tmp_path_factory.mktemp("acl-matrix-live")
    for secure in start_secure_cluster(hosts, root, 3, SETTINGS):
        carol = secure.pki.ca.issue("carol", common_name="Carol", unit="Ops")
        stage = Stage(secure, carol)
        try:
            stage.settle_group_coordinator()
            yield stage
        finally:
            stage.close()


@pytest.fixture(autouse=True)
def clean_acls(stage: Stage) -> Iterator[None]:
    """Every ACL a test made goes with it (none is needed between tests: the brokers and admin
    are super users). First the test's garbage is collected: librdkafka handles kept alive by
    reference cycles (through a refusal's traceback) are destroyed now, while the cluster runs,
    not by whichever later collection finds them (one left to the end of the run kept calling
    brokers stopped by then)."""
    yield
    gc.collect()
    left = stage.acls()
    if left:
        stage.revoke(*left)


# --- Produce ---------------------------------------------------------------------------------------


def deliveries(producer: Producer, topic: str, count: int) -> list[int | None]:
    """Each message's error code (None: delivered): from its delivery report, or raised by
    ``produce`` itself once librdkafka has the topic's refusal from Metadata (which may come in
    between two messages). A fatal error (the idempotent producer's) is raised."""
    results: list[int | None] = []
    for i in range(count):
        try:
            producer.produce(
                topic,
                value=b"m%d" % i,
                on_delivery=lambda err, _msg: results.append(None if err is None else err.code()),
            )
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            results.append(int(exc.args[0].code()))
    producer.flush(TIMEOUT)
    return results


def test_produce_needs_write_on_the_topic(stage: Stage) -> None:
    topic = unique("produce")
    stage.create_topic(topic)
    # No ACL at all: Metadata already refuses the topic.
    refused = deliveries(Producer(stage.ck(retries=0, **{"enable.idempotence": False})), topic, 3)
    assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    # Describe, not Write: the Produce request itself is refused.
    stage.grant(allow(TOPIC, topic, Op.DESCRIBE))
    refused = deliveries(Producer(stage.ck(retries=0, **{"enable.idempotence": False})), topic, 3)
    assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert stage.end_offsets(topic) == [0]

    stage.grant(allow(TOPIC, topic, Op.WRITE))
    assert deliveries(Producer(stage.ck(acks="all")), topic, 3) == [None] * 3
    assert stage.end_offsets(topic) == [3]
    # kafka-python over SASL_PLAINTEXT, the same principal: refused, then served.
    other = unique("produce-kp")
    stage.create_topic(other)
    producer = KafkaProducer(**stage.kp(enable_idempotence=False, retries=0))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(other, b"refused").get(TIMEOUT)
        stage.grant(allow(TOPIC, other, Op.WRITE))
        producer.send(other, b"served").get(TIMEOUT)
    finally:
        producer.close()
    assert stage.end_offsets(other) == [1]


def test_idempotent_producers_need_idempotent_write_or_write_on_a_topic(stage: Stage) -> None:
    topic = unique("idempotent")
    stage.create_topic(topic)
    stage.grant(allow(TOPIC, topic, Op.DESCRIBE))
    # InitProducerId without IdempotentWrite on the Cluster and without Write on any topic.
    producer = Producer(stage.ck(**{"enable.idempotence": True}))
    with pytest.raises(KafkaException) as refused:  # librdkafka: a fatal error
        deliveries(producer, topic, 1)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert refused.value.args[0].fatal()
    assert stage.end_offsets(topic) == [0]
    # Write on a topic is enough for a producer id (KIP-679), as is IdempotentWrite.
    stage.grant(allow(TOPIC, topic, Op.WRITE))
    assert deliveries(Producer(stage.ck(**{"enable.idempotence": True})), topic, 2) == [None] * 2
    stage.revoke(allow(TOPIC, topic, Op.WRITE))
    stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE), allow(TOPIC, topic, Op.WRITE, "User:bob"))
    producer = KafkaProducer(**stage.kp("alice", enable_idempotence=True))
    try:
        with pytest.raises(TopicAuthorizationFailedError):  # a producer id, but no Write on the topic
            producer.send(topic, b"refused").get(TIMEOUT)
    finally:
        producer.close()
    assert stage.end_offsets(topic) == [2]


def test_transactional_producers_need_write_on_their_transactional_id(stage: Stage) -> None:
    topic, txn = unique("txn"), unique("alice-tx")
    stage.create_topic(topic)
    stage.grant(allow(TOPIC, topic, Op.WRITE))
    producer = Producer(stage.ck(**{"transactional.id": txn}))
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Nothing of it on the coordinator: admin finds no such transactional id.
    admin = KafkaAdminClient(**stage.kp("admin"))
    try:
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([txn])
    finally:
        admin.close()

    stage.grant(allow(TXN, "alice-tx-", Op.WRITE, prefixed=True))
    producer = Producer(stage.ck(**{"transactional.id": txn}))
    producer.init_transactions(TIMEOUT)
    # AddPartitionsToTxn for a topic alice may not write: refused, the transaction abortable.
    # (A record on a writable topic first, flushed, so that the coordinator has a transaction to
    # abort: librdkafka sends EndTxn even when no partition was added, which Kafka's coordinator,
    # like ours, answers INVALID_TXN_STATE, fatal for the producer.)
    other, group = unique("txn-unwritable"), unique("txn-readers")
    stage.create_topic(other)
    stage.grant(allow(TOPIC, other, Op.DESCRIBE))
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    assert producer.flush(TIMEOUT) == 0
    producer.produce(other, value=b"refused")
    with pytest.raises(KafkaException) as refused:
        producer.commit_transaction(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert refused.value.args[0].txn_requires_abort()
    producer.abort_transaction(TIMEOUT)
    # AddOffsetsToTxn for a group alice may not read: refused likewise.
    offsets = [TopicPartition(topic, 0, 1)]
    member = Consumer(stage.ck(**{"group.id": group}))  # never joins: only its group metadata
    metadata = member.consumer_group_metadata()
    member.close()
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    assert producer.flush(TIMEOUT) == 0
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction(offsets, metadata, TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    producer.abort_transaction(TIMEOUT)
    assert committed(stage, group, topic) is None and stage.end_offsets(other) == [0]
    # With Read on the group (and the topic, for TxnOffsetCommit): records and offsets commit together.
    stage.grant(allow(GROUP, group, Op.READ), allow(TOPIC, topic, Op.READ))
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.send_offsets_to_transaction(offsets, metadata, TIMEOUT)
    producer.commit_transaction(TIMEOUT)
    eventually(lambda: committed(stage, group, topic) == 1, TIMEOUT, "the offset, once its marker is written")
    # Two aborted records and their markers, the committed record and its marker (EndTxn is
    # answered before the markers land, as in Kafka).
    eventually(lambda: stage.end_offsets(topic) == [6], TIMEOUT, "the commit marker")


# --- Fetch with a group --------------------------------------------------------------------------


def consumed(config: dict[str, Any], topic: str, count: int) -> tuple[list[bytes], int | None]:
    """What a confluent-kafka consumer with ``config`` reads of ``topic`` (up to ``count``
    values, committing them), or the first error it reports."""
    consumer = Consumer({"auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                return values, int(message.error().code())
            values.append(message.value())
        if values:
            consumer.commit(asynchronous=False)
        return values, None
    finally:
        consumer.close()


def kp_consumed(stage: Stage, topic: str, group: str, count: int) -> list[bytes]:
    """kafka-python, as alice, reads partition 0 of ``topic`` from ``group``'s committed offset
    and commits what it read. (Assigned, not subscribed: kafka-python 3.0.12 was seen spinning
    in its poll loop, sending nothing for 30 s, when the assignment of a second join arrived
    while its poll had returned early; librdkafka's consumers test the joining.)"""
    consumer = KafkaConsumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **stage.kp())
    values: list[bytes] = []
    try:
        consumer.assign([KPTopicPartition(topic, 0)])
        deadline = time.monotonic() + TIMEOUT
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        consumer.commit()
    finally:
        consumer.close()
    return values


def committed(stage: Stage, group: str, topic: str) -> int | None:
    """The offset ``group`` committed for partition 0 of ``topic``, as admin reads it (None: none),
    through Tributary's Admin: librdkafka's ListConsumerGroupOffsets is not safe to read back with
    (see ``Stage.settle_group_coordinator``)."""
    partition = OurTopicPartition(topic, 0)
    found = stage.run(lambda admin: admin.committed_offsets(group, [partition], timeout=TIMEOUT))
    return found[partition].offset if partition in found else None


def commit_error(future: Future[Any]) -> int | None:
    """What confluent-kafka's alter_consumer_group_offsets failed with: the request's error
    (FindCoordinator's), or the partition's (OffsetCommit answers per partition)."""
    try:
        result = future.result(TIMEOUT)
    except KafkaException as exc:
        return int(exc.args[0].code())
    errors = {tp.error.code() for tp in result.topic_partitions if tp.error is not None}
    assert len(errors) <= 1, errors
    return int(errors.pop()) if errors else None


def groups(stage: Stage) -> set[str]:
    return {g.group_id for g in stage.admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT).valid}


def test_consuming_in_a_group_needs_read_on_the_topic_and_the_group(stage: Stage) -> None:
    topic, group = unique("consumed"), unique("readers")
    stage.create_topic(topic)
    stage.produce(topic, 4)
    # Read on the group, nothing on the topic.
    stage.grant(allow(GROUP, group, Op.READ))
    assert consumed(stage.ck(**{"group.id": group}), topic, 4) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert committed(stage, group, topic) is None
    # Read on the topic, nothing on this other group: it is not even created.
    stage.grant(allow(TOPIC, topic, Op.READ))
    other = unique("strangers")
    assert consumed(stage.ck(**{"group.id": other}), topic, 4) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    consumer = KafkaConsumer(topic, group_id=other, **stage.kp())
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=int(TIMEOUT * 1000))
    finally:
        consumer.close()
    assert other not in groups(stage)
    # Both: librdkafka reads and commits; kafka-python, the same principal, carries on from there.
    assert consumed(stage.ck(**{"group.id": group}), topic, 2) == ([b"v0", b"v1"], None)
    assert committed(stage, group, topic) == 2
    assert kp_consumed(stage, topic, group, 2) == [b"v2", b"v3"]
    assert committed(stage, group, topic) == 4


# --- Metadata, auto-creation, topics and partitions -----------------------------------------------


def test_metadata_lists_only_the_topics_the_principal_may_describe(stage: Stage) -> None:
    mine, prefixed, hidden = unique("listed"), unique("team.listed"), unique("unlisted")
    for name in (mine, prefixed, hidden):
        stage.create_topic(name)
    stage.grant(allow(TOPIC, mine, Op.READ), allow(TOPIC, "team.", Op.DESCRIBE, prefixed=True))
    listed = set(AdminClient(stage.ck()).list_topics(timeout=TIMEOUT).topics)
    assert mine in listed and prefixed in listed and hidden not in listed
    assert not {t for t in listed if not (t == mine or t.startswith("team."))}, listed
    consumer = KafkaConsumer(**stage.kp())
    try:
        assert consumer.topics() == {t for t in listed if not t.startswith("__")}
    finally:
        consumer.close()
    # Asked by name, a hidden topic is refused (whether it exists or not), a visible one described.
    asked = AdminClient(stage.ck()).list_topics(hidden, timeout=TIMEOUT).topics[hidden]
    assert asked.error is not None and asked.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert AdminClient(stage.ck()).list_topics(mine, timeout=TIMEOUT).topics[mine].error is None
    # Tributary's own client sees the same listing.
    ours = stage.run(lambda admin: admin.list_topics(), user="alice")
    assert set(ours) == {t for t in listed if not t.startswith("__")}


def test_auto_creation_needs_create(stage: Stage) -> None:
    name = unique("auto.orders")
    # Write and Describe, not Create: the producer's Metadata does not create it, and answers
    # TOPIC_AUTHORIZATION_FAILED for it (as Kafka's KafkaApis does).
    stage.grant(allow(TOPIC, "auto.", Op.WRITE, prefixed=True))
    refused = deliveries(Producer(stage.ck(retries=0)), name, 1)
    assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert name not in stage.topics()
    # Create on the prefix: the first Metadata creates it, the producer writes.
    stage.grant(allow(TOPIC, "auto.", Op.CREATE, prefixed=True))
    assert deliveries(Producer(stage.ck()), name, 2) == [None] * 2
    assert name in stage.topics() and stage.end_offsets(name) == [2]


def test_create_delete_topics_and_partitions(stage: Stage) -> None:
    name = unique("created")
    alice = AdminClient(stage.ck())
    assert failure(alice.create_topics([NewTopic(name, 1, 3)])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name not in stage.topics()
    stage.grant(allow(TOPIC, name, Op.CREATE))
    assert failure(alice.create_topics([NewTopic(name, 1, 3)])[name]) is None
    eventually(lambda: name in stage.topics(), TIMEOUT, f"{name} in the listing")

    assert failure(alice.create_partitions([NewPartitions(name, 3)])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(stage.admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 1
    stage.grant(allow(TOPIC, name, Op.ALTER))
    assert failure(alice.create_partitions([NewPartitions(name, 3)])[name]) is None
    eventually(lambda: len(stage.admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 3,
               TIMEOUT, "three partitions")  # fmt: skip

    assert failure(alice.delete_topics([name])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name in stage.topics()
    stage.grant(allow(TOPIC, name, Op.DELETE))
    assert failure(alice.delete_topics([name])[name]) is None
    eventually(lambda: name not in stage.topics(), TIMEOUT, f"{name} gone")

    # Create on the Cluster: any topic; kafka-python's admin, the same principal.
    other = unique("cluster-created")
    admin = KafkaAdminClient(**stage.kp())
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([KPNewTopic(other, 1, 3)])
        stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.CREATE))
        admin.create_topics([KPNewTopic(other, 1, 3)])
    finally:
        admin.close()
    eventually(lambda: other in stage.topics(), TIMEOUT, f"{other} in the listing")


# --- Configs -------------------------------------------------------------------------------------


def topic_config(stage: Stage, topic: str, key: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return str(stage.admin.describe_configs([resource])[resource].result(TIMEOUT)[key].value)


def test_describe_and_alter_configs(stage: Stage) -> None:
    topic = unique("configured")
    stage.create_topic(topic)
    before = topic_config(stage, topic, "retention.ms")
    alice = AdminClient(stage.ck())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert failure(alice.describe_configs([resource])[resource]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert failure(alice.describe_configs([broker])[broker]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)],
    )
    assert failure(alice.incremental_alter_configs([change])[change]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python's AlterConfigs (not incremental): a result per resource, not an exception.
    # (Its describe_configs, which it asks first by default, drops a resource's error code.)
    admin = KafkaAdminClient(**stage.kp())

    def legacy_alter(value: str) -> str:
        legacy = KPConfigResource(KPConfigResourceType.TOPIC, topic, configs={"retention.ms": value})
        return str(admin.alter_configs([legacy], raise_on_unknown=False, incremental=False)["topic"][topic])

    try:
        assert "TopicAuthorizationFailedError" in legacy_alter("60000")
        assert topic_config(stage, topic, "retention.ms") == before

        # DescribeConfigs alone: described, still not altered.
        stage.grant(allow(TOPIC, topic, Op.DESCRIBE_CONFIGS), allow(CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS))
        assert alice.describe_configs([resource])[resource].result(TIMEOUT)["retention.ms"].value == before
        assert failure(alice.describe_configs([broker])[broker]) is None
        assert failure(alice.incremental_alter_configs([change])[change]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert topic_config(stage, topic, "retention.ms") == before
        # AlterConfigs: both ways of altering work.
        stage.grant(allow(TOPIC, topic, Op.ALTER_CONFIGS))
        assert failure(alice.incremental_alter_configs([change])[change]) is None
        eventually(lambda: topic_config(stage, topic, "retention.ms") == "60000", TIMEOUT, "the new retention")
        assert legacy_alter("70000") == "OK"
        eventually(lambda: topic_config(stage, topic, "retention.ms") == "70000", TIMEOUT, "the newer retention")
    finally:
        admin.close()


# --- Group administration ------------------------------------------------------------------------


def test_group_apis(stage: Stage) -> None:
    """OffsetCommit, OffsetFetch, ListGroups, DescribeGroups and DeleteGroups on a group admin
    filled (an offset of 2 committed on a topic of 4 records)."""
    topic, group = unique("grouped"), unique("billing")
    stage.create_topic(topic)
    stage.produce(topic, 4)
    assert consumed(stage.ck("admin", **{"group.id": group}), topic, 2) == ([b"v0", b"v1"], None)
    alice = AdminClient(stage.ck())
    offsets = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    moved = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])]

    assert group not in {g.group_id for g in alice.list_consumer_groups().result(TIMEOUT).valid}
    assert failure(alice.describe_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert failure(alice.list_consumer_group_offsets(offsets)[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert commit_error(alice.alter_consumer_group_offsets(moved)[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert failure(alice.delete_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert committed(stage, group, topic) == 2 and group in groups(stage)

    # Describe on the group: listed, described, its offsets of the topics alice may Describe.
    stage.grant(allow(GROUP, group, Op.DESCRIBE))
    assert group in {g.group_id for g in alice.list_consumer_groups().result(TIMEOUT).valid}
    assert alice.describe_consumer_groups([group])[group].result(TIMEOUT).group_id == group
    every = [ConsumerGroupTopicPartitions(group)]
    assert alice.list_consumer_group_offsets(every)[group].result(TIMEOUT).topic_partitions == []
    stage.grant(allow(TOPIC, topic, Op.DESCRIBE))
    listed = alice.list_consumer_group_offsets(every)[group].result(TIMEOUT).topic_partitions
    assert [(tp.topic, tp.offset) for tp in listed] == [(topic, 2)]
    # Committing needs Read on the group and on the topic.
    assert commit_error(alice.alter_consumer_group_offsets(moved)[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    stage.grant(allow(GROUP, group, Op.READ))
    assert commit_error(alice.alter_consumer_group_offsets(moved)[group]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert committed(stage, group, topic) == 2
    stage.grant(allow(TOPIC, topic, Op.READ))
    assert commit_error(alice.alter_consumer_group_offsets(moved)[group]) is None
    assert committed(stage, group, topic) == 3
    # kafka-python's admin: the same answers for the same principal.
    kp = KafkaAdminClient(**stage.kp())
    try:
        assert [g["group_id"] for g in kp.list_groups()] == [group]  # the only one alice may Describe
        assert kp.delete_groups([group]) == {group: "GroupAuthorizationFailedError"}
        assert group in groups(stage)
        stage.grant(allow(GROUP, group, Op.DELETE))
        assert kp.delete_groups([group]) == {group: "OK"}
    finally:
        kp.close()
    assert group not in groups(stage) and committed(stage, group, topic) is None


# --- ACLs, credentials, leaders and replicas: the Cluster's Alter and Describe -------------------


def test_acl_apis_need_alter_or_describe_on_the_cluster(stage: Stage) -> None:
    topic = unique("acl-target")
    alice = AdminClient(stage.ck())
    binding = CKAclBinding(CKResourceType.TOPIC, topic, CKResourcePatternType.LITERAL, BOB, "*",
                           CKAclOperation.READ, CKAclPermissionType.ALLOW)  # fmt: skip
    everything = CKAclBindingFilter(CKResourceType.ANY, None, CKResourcePatternType.ANY, None, None,
                                    CKAclOperation.ANY, CKAclPermissionType.ANY)  # fmt: skip
    stage.grant(allow(TOPIC, topic, Op.WRITE, "User:bob"))
    before = stage.acls()
    assert failure(alice.create_acls([binding])[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' error code (rd_kafka_DescribeAclsResponse_parse returns
    # NO_ERROR whatever the broker said): a refusal reads as an empty listing there.
    assert alice.describe_acls(everything).result(TIMEOUT) == []
    kp = KafkaAdminClient(**stage.kp())
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_acls(
                KPACLFilter(
                    None,
                    None,
                    KPACLOperation.ANY,
                    KPACLPermissionType.ANY,
                    KPResourcePatternFilter(KPResourceType.ANY, None, KPACLPatternType.ANY),
                )
            )
    finally:
        kp.close()
    assert failure(alice.delete_acls([everything])[everything]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert stage.acls() == before

    stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    seen = alice.describe_acls(everything).result(TIMEOUT)
    assert {(b.name, b.principal) for b in seen} == {(topic, BOB), (CLUSTER_NAME, ALICE)}
    assert failure(alice.create_acls([binding])[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert stage.acls() == before | {allow(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)}

    stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.ALTER))
    assert failure(alice.create_acls([binding])[binding]) is None
    # Any broker answers admin's DescribeAcls: each learns of the new ACL from ZooKeeper.
    eventually(lambda: allow(TOPIC, topic, Op.READ, BOB) in stage.acls(), TIMEOUT, "bob's new ACL")
    bobs = CKAclBindingFilter(CKResourceType.TOPIC, topic, CKResourcePatternType.LITERAL, BOB, None,
                              CKAclOperation.ANY, CKAclPermissionType.ANY)  # fmt: skip
    removed = alice.delete_acls([bobs])[bobs].result(TIMEOUT)
    assert {b.operation for b in removed} == {CKAclOperation.READ, CKAclOperation.WRITE}
    eventually(lambda: not {b for b in stage.acls() if b.entry.principal == BOB}, TIMEOUT, "bob's ACLs gone")


def test_scram_credential_apis_need_alter_or_describe_on_the_cluster(stage: Stage) -> None:
    alice = AdminClient(stage.ck())
    kp = KafkaAdminClient(**stage.kp())
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-1")
    try:
        # kafka-python for the refused DescribeUserScramCredentials: librdkafka (2.16) aborts the
        # process on any request-level error in that response (it frees an error string it did not
        # allocate), whichever broker sends it; Kafka's brokers answer a refusal the same way.
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_user_scram_credentials(["alice"])
        refused = alice.alter_user_scram_credentials([upsert])["dave"]
        assert failure(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert "dave" not in stage.admin.describe_user_scram_credentials().result(TIMEOUT)

        stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
        described = alice.describe_user_scram_credentials(["alice"])["alice"].result(TIMEOUT)
        assert {(c.mechanism, c.iterations) for c in described.scram_credential_infos} == {
            (ScramMechanism.SCRAM_SHA_256, 4096),
            (ScramMechanism.SCRAM_SHA_512, 4096),
        }
        assert failure(alice.alter_user_scram_credentials([upsert])["dave"]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert "dave" not in stage.admin.describe_user_scram_credentials().result(TIMEOUT)
        stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.ALTER))
        assert failure(alice.alter_user_scram_credentials([upsert])["dave"]) is None
        # Any broker answers admin: each learns of the new credentials from ZooKeeper.
        eventually(lambda: "dave" in stage.admin.describe_user_scram_credentials().result(TIMEOUT), TIMEOUT,
                   "dave's credentials")  # fmt: skip
        gone = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
        assert failure(alice.alter_user_scram_credentials([gone])["dave"]) is None
    finally:
        kp.close()


def replicas(stage: Stage, topic: str) -> list[int]:
    return list(stage.admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions[0].replicas)


def test_elect_leaders_and_reassignments_need_alter_on_the_cluster(stage: Stage) -> None:
    topic = unique("moved")
    stage.create_topic(topic, replicas=2)
    before = replicas(stage, topic)
    target = sorted({1, 2, 3} - {before[0]})[:2]
    alice = AdminClient(stage.ck())
    partition = TopicPartition(topic, 0)
    refused = alice.elect_leaders(ElectionType.PREFERRED, [partition])
    assert failure(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    kp = KafkaAdminClient(**stage.kp())
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.alter_partition_reassignments({KPTopicPartition(topic, 0): target})
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.list_partition_reassignments()
        assert replicas(stage, topic) == before
        stage.grant(allow(CLUSTER, CLUSTER_NAME, Op.ALTER))
        elected = alice.elect_leaders(ElectionType.PREFERRED, [partition]).result(TIMEOUT)
        assert elected[partition] is None or elected[partition].code() == KafkaError.ELECTION_NOT_NEEDED
        kp.alter_partition_reassignments({KPTopicPartition(topic, 0): target})
        eventually(lambda: sorted(replicas(stage, topic)) == target, TIMEOUT, f"{topic} on brokers {target}")
        eventually(lambda: kp.list_partition_reassignments() == {}, TIMEOUT, "the reassignment finished")
    finally:
        kp.close()


# --- KIP-848 consumer groups ---------------------------------------------------------------------


@dataclass
class Member:
    """What a KIP-848 consumer saw: its assignment (as admin describes the group), the first
    error it reported, the values it read."""

    assigned: tuple[tuple[str, int], ...] = ()
    error: int | None = None
    values: list[bytes] = field(default_factory=list)


def kip848_member(stage: Stage, topic: str, group: str, done: Callable[[Member], bool]) -> Member:
    """A librdkafka consumer of ``topic`` in ``group`` with ``group.protocol=consumer`` (KIP-848),
    as alice, until ``done`` holds of what it saw."""
    config = {"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    consumer = Consumer(stage.ck(**config))
    consumer.subscribe([topic])
    seen = Member()
    deadline = time.monotonic() + TIMEOUT
    try:
        while not done(seen):
            assert time.monotonic() < deadline, f"{seen} after {TIMEOUT} s"
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                seen.error = seen.error or int(message.error().code())
            elif message is not None:
                seen.values.append(message.value())
            if not seen.assigned:
                described = stage.run(lambda admin: admin.describe_groups([group], timeout=TIMEOUT))[group]
                seen.assigned = tuple((tp.topic, tp.partition) for m in described.members for tp in m.assignment)
        return seen
    finally:
        consumer.close()


def test_consumer_group_heartbeat_needs_read_on_the_group_and_describe_on_the_topics(stage: Stage) -> None:
    """librdkafka's KIP-848 consumer: refused by ConsumerGroupHeartbeat without Read on the
    group, then without Describe on the topic; with both, a member with an assignment whose
    Fetch is refused; with Read on the topic, it consumes."""
    topic, group = unique("kip848"), unique("kip848-readers")
    stage.create_topic(topic)
    stage.produce(topic, 2)
    refused = lambda seen: seen.error is not None  # noqa: E731
    stage.grant(allow(TOPIC, topic, Op.READ))
    assert kip848_member(stage, topic, group, refused) == Member((), KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert group not in groups(stage)
    stage.revoke(allow(TOPIC, topic, Op.READ))
    stage.grant(allow(GROUP, group, Op.READ))
    assert kip848_member(stage, topic, group, refused) == Member((), KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert group not in groups(stage)
    # The assignment and the Fetch's refusal come in either order: both are waited for.
    stage.grant(allow(TOPIC, topic, Op.DESCRIBE))
    seen = kip848_member(stage, topic, group, lambda seen: seen.error is not None and bool(seen.assigned))
    assert seen == Member(((topic, 0),), KafkaError.TOPIC_AUTHORIZATION_FAILED)
    stage.grant(allow(TOPIC, topic, Op.READ))
    seen = kip848_member(stage, topic, group, lambda seen: len(seen.values) == 2 or seen.error is not None)
    assert seen == Member(((topic, 0),), None, [b"v0", b"v1"])


# --- Patterns, Deny over Allow, super users, hosts, certificates -----------------------------------


def test_prefixed_patterns_deny_over_allow_and_super_users(stage: Stage) -> None:
    prefix = unique("east") + "."
    orders, secret, elsewhere = prefix + "orders", prefix + "secret", unique("west") + ".orders"
    for name in (orders, secret, elsewhere):
        stage.create_topic(name)
    stage.grant(allow(TOPIC, prefix, Op.WRITE, prefixed=True), deny(TOPIC, secret, Op.WRITE))
    producer = Producer(stage.ck(retries=0))
    assert deliveries(producer, orders, 1) == [None]
    assert deliveries(producer, secret, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]  # the deny wins
    assert deliveries(producer, elsewhere, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]  # no pattern applies
    # A deny for every principal, by prefix and for every operation, beats alice's own allow;
    # super users are not even asked.
    stage.grant(deny(TOPIC, prefix, Op.ALL, "User:*", prefixed=True))
    assert deliveries(Producer(stage.ck(retries=0)), orders, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert deliveries(Producer(stage.ck("admin")), secret, 1) == [None]
    assert stage.end_offsets(orders) == [1] and stage.end_offsets(secret) == [1]
    assert stage.end_offsets(elsewhere) == [0]
    # Denying one operation denies nothing else: Describe still lists what Write was denied on.
    stage.revoke(deny(TOPIC, prefix, Op.ALL, "User:*", prefixed=True))
    listed = AdminClient(stage.ck()).list_topics(timeout=TIMEOUT).topics
    assert orders in listed and secret in listed and elsewhere not in listed


def test_host_restricted_acls(stage: Stage) -> None:
    """Every client here connects from 127.0.0.1: an ACL for another host does not apply, one
    for this host does, and a deny from this host stops alice and nobody else."""
    topic = unique("hosts")
    stage.create_topic(topic)
    stage.grant(allow(TOPIC, topic, Op.WRITE, host="10.0.0.9"))
    assert deliveries(Producer(stage.ck(retries=0)), topic, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    stage.grant(allow(TOPIC, topic, Op.WRITE, host="127.0.0.1"), allow(TOPIC, topic, Op.WRITE, BOB))
    assert deliveries(Producer(stage.ck()), topic, 1) == [None]
    stage.grant(deny(TOPIC, topic, Op.WRITE, host="127.0.0.1"))
    assert deliveries(Producer(stage.ck(retries=0)), topic, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert deliveries(Producer(stage.ck("bob")), topic, 1) == [None]
    assert stage.end_offsets(topic) == [2]


def test_a_certificate_subject_mapped_by_rules_is_the_principal(stage: Stage) -> None:
    """carol's certificate, CN=Carol,OU=Ops,O=Tributary Tests, is User:carol@ops by the second
    rule of ``ssl.principal.mapping.rules`` (lower-cased): ACLs for that name apply to her."""
    topic = unique("certified")
    stage.create_topic(topic)
    stage.grant(allow(TOPIC, topic, Op.WRITE, "User:carol"), allow(TOPIC, topic, Op.WRITE, "User:Carol@Ops"))
    assert deliveries(Producer(stage.mtls(retries=0)), topic, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert stage.end_offsets(topic) == [0]
    stage.grant(allow(TOPIC, topic, Op.WRITE, CAROL))
    assert deliveries(Producer(stage.mtls()), topic, 2) == [None] * 2
    assert stage.end_offsets(topic) == [2]


# --- Propagation and restarts --------------------------------------------------------------------


def metadata_error(conn: BlockingConnection, topic: str) -> int:
    asked = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                            allow_auto_topic_creation=False)  # fmt: skip
    (found,) = conn.request(asked).topics
    return int(found.error_code)


def test_a_new_acl_reaches_every_broker_within_a_second(stage: Stage) -> None:
    """CreateAcls on one broker, then alice asks every broker for the topic (Metadata, on a
    connection of her own to each) until it answers: printed, and under a second each. Then the
    same for DeleteAcls."""
    topic = unique("spread")
    stage.create_topic(topic)
    alice = [BlockingConnection(*b.listener_address("SECURE"), config=stage.ours("alice")) for b in stage.brokers]
    admin = BlockingConnection(*stage.brokers[0].listener_address("SECURE"), config=stage.ours("admin"))
    binding = allow(TOPIC, topic, Op.DESCRIBE)

    def spread(request: Any, wanted: int, what: str) -> None:
        answer = admin.request(request)
        started = time.monotonic()
        assert all(r.error_code == 0 for r in getattr(answer, "results", getattr(answer, "filter_results", []))), answer
        took: dict[int, float] = {}
        for broker, conn in zip(stage.brokers, alice, strict=True):
            while metadata_error(conn, topic) != wanted:
                assert time.monotonic() - started < 1.0, f"broker {broker.broker_id}: {what} not there in a second"
                time.sleep(0.005)
            took[broker.broker_id] = round((time.monotonic() - started) * 1000)
        print(f"{what} in force on every broker {max(took.values())} ms after the answer (per broker, ms: {took})")

    try:
        assert {metadata_error(conn, topic) for conn in alice} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        spread(create_request([binding]), ErrorCode.NONE, "a new ACL")
        spread(delete_request([exactly(binding)]), ErrorCode.TOPIC_AUTHORIZATION_FAILED, "an ACL's removal")
    finally:
        for conn in [*alice, admin]:
            conn.close()


# --- kcat over SASL_PLAINTEXT with PLAIN ---------------------------------------------------------


def kcat(stage: Stage, user: str, *argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*stage.kcat(user), *argv], input=stdin, capture_output=True, timeout=TIMEOUT, check=False)


@pytest.mark.skipif(not shutil.which(KCAT), reason="kcat is not installed (apt-get install kcat)")
def test_kcat_with_plain_as_bob(stage: Stage) -> None:
    """Debian's kcat (librdkafka 2.0.2) logs in as bob with PLAIN: refused, then served, as producer
    and as a group's consumer."""
    topic, group = unique("kcat"), unique("kcat-readers")
    stage.create_topic(topic)
    records = b"k0\nk1\nk2\n"
    produced = kcat(stage, "bob", "-P", "-t", topic, stdin=records)
    # Refused in delivery reports, or by produce() itself once the topic's refusal is known.
    assert produced.returncode == 1 and "Topic authorization failed" in produced.stderr.decode(), produced.stderr
    assert stage.end_offsets(topic) == [0]
    stage.grant(allow(TOPIC, topic, Op.WRITE, BOB))
    produced = kcat(stage, "bob", "-P", "-t", topic, stdin=records)
    assert produced.returncode == 0, produced.stderr.decode()
    assert stage.end_offsets(topic) == [3]
    # Write implies Describe (the partition's leader is known), not Read: the Fetch is refused.
    consumed = kcat(stage, "bob", "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert (consumed.returncode, consumed.stdout) == (1, b"")
    assert "Fetch from broker" in consumed.stderr.decode() and "Topic authorization failed" in consumed.stderr.decode()
    # Read on the topic, not on the group: FindCoordinator refuses it.
    stage.grant(allow(TOPIC, topic, Op.READ, BOB))
    consumed = kcat(stage, "bob", "-G", group, "-o", "beginning", "-e", "-q", topic)
    assert (consumed.returncode, consumed.stdout) == (1, b"")
    assert "GROUP_AUTHORIZATION_FAILED" in consumed.stderr.decode()
    assert group not in groups(stage)
    stage.grant(allow(GROUP, group, Op.READ, BOB))
    consumed = kcat(stage, "bob", "-G", group, "-o", "beginning", "-e", "-q", topic)
    assert (consumed.returncode, consumed.stdout) == (0, records), consumed.stderr.decode()
    assert committed(stage, group, topic) == 3  # committed as the consumer closed
