"""JSON payloads of the znodes, in the shapes Kafka's ZooKeeper mode writes them.

Decoders raise ValueError on anything malformed, so one bad node written by a foreign tool
is skipped with a log line instead of stopping the registry.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.security.listeners import PLAINTEXT, PROTOCOLS, Endpoint

BROKER_VERSION = 5
TOPIC_VERSION = 3
PARTITION_STATE_VERSION = 1
CONFIG_VERSION = 1
CONTROLLER_VERSION = 1
PRODUCER_ID_BLOCK_VERSION = 1
CREATE_REQUEST_VERSION = 1
CREATE_PARTITIONS_REQUEST_VERSION = 1


#: What the controller writes into /admin/controlled_shutdown/<id> once it moved every leadership
#: of that broker that another in-sync replica (not shutting down as well) can take.
CONTROLLED_SHUTDOWN_DONE = b"done"


class MalformedZnodeError(ValueError):
    """A znode's payload is not in the expected shape."""


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _load(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedZnodeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise MalformedZnodeError("not a JSON object")
    return value


def _int(value: Any, what: str) -> int:
    # Kafka writes some numbers as strings (timestamps, producer id blocks); accept both.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MalformedZnodeError(f"{what} is not an integer: {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise MalformedZnodeError(f"{what} is not an integer: {value!r}") from exc


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise MalformedZnodeError(f"{what} is not a list: {value!r}")
    return tuple(_int(item, what) for item in value)


def now_ms() -> int:
    return int(time.time() * 1000)


def new_uuid() -> str:
    """Kafka's textual Uuid: base64url of 16 random bytes, without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


# /brokers/ids/<id>


def encode_broker(info: BrokerInfo) -> bytes:
    endpoints = info.endpoints or (Endpoint(PLAINTEXT, PLAINTEXT, info.host, info.port),)
    return _dump(
        {
            "version": BROKER_VERSION,
            # Kafka writes the PLAINTEXT endpoint here for old clients; Tributary writes the
            # inter-broker listener's, which every broker can reach.
            "host": info.host,
            "port": info.port,
            "endpoints": [str(e) for e in endpoints],
            "listener_security_protocol_map": {e.name: e.protocol for e in endpoints},
            "datacenter": info.datacenter,
            # Kafka's tools read the rack; without broker.rack it is the datacenter.
            "rack": info.placement_rack,
            "jmx_port": -1,
            "timestamp": str(now_ms()),
        }
    )


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    value = _load(data)
    endpoints = _endpoints(value.get("endpoints"), value.get("listener_security_protocol_map"))
    host, port = value.get("host"), value.get("port")
    if not isinstance(host, str) or not host or port in (None, -1):
        # Kafka >= 0.10 may leave host/port empty and carry only endpoints.
        if not endpoints:
            raise MalformedZnodeError("broker registration has neither host/port nor endpoints")
        host, port = endpoints[0].host, endpoints[0].port
    rack = value.get("rack")
    datacenter = value.get("datacenter", rack)
    for what, text in (("datacenter", datacenter), ("rack", rack)):
        if text is not None and not isinstance(text, str):
            raise MalformedZnodeError(f"{what} is not a string: {text!r}")
    return BrokerInfo(
        broker_id, host, _int(port, "port"), datacenter, rack if rack != datacenter else None, endpoints=endpoints
    )


def _endpoints(endpoints: Any, protocols: Any) -> tuple[Endpoint, ...]:
    """``["INTERNAL://host:9092", ...]`` with the listener -> protocol map beside it."""
    if endpoints is None:
        return ()
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise MalformedZnodeError(f"endpoints is not a list of strings: {endpoints!r}")
    if protocols is not None and not isinstance(protocols, dict):
        raise MalformedZnodeError(f"listener_security_protocol_map is not an object: {protocols!r}")
    result = []
    for text in endpoints:
        name, sep, address = text.partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not name or not port:
            raise MalformedZnodeError(f"endpoint {text!r} is not NAME://HOST:PORT")
        protocol = (protocols or {}).get(name, name if name in PROTOCOLS else PLAINTEXT)
        if protocol not in PROTOCOLS:
            raise MalformedZnodeError(f"listener {name} has an unknown security protocol {protocol!r}")
        result.append(Endpoint(name, protocol, host.strip("[]"), _int(port, "endpoint port")))
    return tuple(result)


# /brokers/topics/<topic>


#: A partition's reassignment under way: (adding, removing) replicas, as Kafka records them
#: beside the assignment (KIP-455).
Moving = tuple[tuple[int, ...], tuple[int, ...]]


def encode_topic(
    topic_id: str, assignment: Mapping[int, Sequence[int]], moving: Mapping[int, Moving] | None = None
) -> bytes:
    moving = moving or {}
    return _dump(
        {
            "version": TOPIC_VERSION,
            "topic_id": topic_id,
            "partitions": {str(index): list(replicas) for index, replicas in sorted(assignment.items())},
            "adding_replicas": {str(i): list(m[0]) for i, m in sorted(moving.items()) if m[0]},
            "removing_replicas": {str(i): list(m[1]) for i, m in sorted(moving.items()) if m[1]},
        }
    )


def decode_topic(data: bytes) -> tuple[str, dict[int, tuple[int, ...]]]:
    value = _load(data)
    partitions = value.get("partitions")
    if not isinstance(partitions, dict):
        raise MalformedZnodeError("topic assignment has no partitions object")
    topic_id = value.get("topic_id", "")
    if not isinstance(topic_id, str):
        raise MalformedZnodeError("topic_id is not a string")
    assignment = {_int(index, "partition"): _int_list(replicas, "replicas") for index, replicas in partitions.items()}
    return topic_id, assignment


def decode_moving(data: bytes) -> dict[int, Moving]:
    """The reassignments under way recorded in a topic node, by partition."""
    value = _load(data)
    found: dict[int, list[tuple[int, ...]]] = {}
    for position, key in enumerate(("adding_replicas", "removing_replicas")):
        entries = value.get(key) or {}
        if not isinstance(entries, dict):
            raise MalformedZnodeError(f"{key} is not an object")
        for index, replicas in entries.items():
            found.setdefault(_int(index, "partition"), [(), ()])[position] = _int_list(replicas, key)
    return {index: (pair[0], pair[1]) for index, pair in found.items()}


# /brokers/topics/<topic>/partitions/<p>/state


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _dump(
        {
            "version": PARTITION_STATE_VERSION,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "controller_epoch": state.controller_epoch,
        }
    )


def decode_partition_state(data: bytes) -> LeaderAndIsr:
    value = _load(data)
    return LeaderAndIsr(
        leader=_int(value.get("leader"), "leader"),
        leader_epoch=_int(value.get("leader_epoch"), "leader_epoch"),
        isr=_int_list(value.get("isr"), "isr"),
        controller_epoch=_int(value.get("controller_epoch", 0), "controller_epoch"),
    )


# /config/topics/<topic>


def encode_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": CONFIG_VERSION, "config": dict(config)})


def decode_config(data: bytes) -> dict[str, str]:
    config = _load(data).get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnodeError("topic config is not an object of strings")
    return {str(key): value for key, value in config.items()}


# /controller and /controller_epoch


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": CONTROLLER_VERSION, "brokerid": broker_id, "timestamp": str(now_ms())})


def decode_controller(data: bytes) -> int:
    return _int(_load(data).get("brokerid"), "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip() or "0")
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZnodeError(f"controller epoch is not an integer: {data!r}") from exc


# /cluster/id


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    cluster_id = _load(data).get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise MalformedZnodeError("cluster id is missing")
    return cluster_id


# /latest_producer_id_block


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dump(
        {"version": PRODUCER_ID_BLOCK_VERSION, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
    )


def decode_producer_id_block(data: bytes) -> tuple[int, int]:
    """(first, last) producer id of the block, both inclusive as Kafka writes them."""
    value = _load(data)
    return _int(value.get("block_start"), "block_start"), _int(value.get("block_end"), "block_end")


# /admin/create_topics/<topic>: Tributary's own request format (Kafka's ZK mode had none).


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    topic_id: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str]
    requested_by: int
    #: partition -> replicas, when the requester chose them (CreateTopics assignments).
    assignment: Mapping[int, tuple[int, ...]] | None = None


def encode_create_request(request: CreateTopicRequest) -> bytes:
    body: dict[str, Any] = {
        "version": CREATE_REQUEST_VERSION,
        "topic_id": request.topic_id,
        "partitions": request.partitions,
        "replication_factor": request.replication_factor,
        "config": dict(request.config),
        "requested_by": request.requested_by,
    }
    if request.assignment is not None:
        body["assignment"] = {str(p): list(r) for p, r in sorted(request.assignment.items())}
    return _dump(body)


def decode_create_request(data: bytes) -> CreateTopicRequest:
    value = _load(data)
    topic_id = value.get("topic_id")
    if not isinstance(topic_id, str) or not topic_id:
        raise MalformedZnodeError("create request has no topic_id")
    config = value.get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnodeError("create request config is not an object of strings")
    assignment = _assignment(value.get("assignment"), "create request")
    return CreateTopicRequest(
        topic_id=topic_id,
        partitions=_int(value.get("partitions"), "partitions"),
        replication_factor=_int(value.get("replication_factor", 1), "replication_factor"),
        config={str(k): v for k, v in config.items()},
        requested_by=_int(value.get("requested_by", -1), "requested_by"),
        assignment=assignment,
    )


def _assignment(raw: Any, what: str) -> dict[int, tuple[int, ...]] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise MalformedZnodeError(f"{what} assignment is not an object")
    return {_int(p, "partition"): _int_list(r, "replicas") for p, r in raw.items()}


# /admin/create_partitions/<topic>: Tributary's own request to grow a topic to a partition count.


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    #: The topic id the requester saw, so a request outliving its topic never grows a new one.
    topic_id: str
    partitions: int
    requested_by: int
    #: new partition -> replicas, when the requester chose them (CreatePartitions assignments).
    assignment: Mapping[int, tuple[int, ...]] | None = None


def encode_create_partitions_request(request: CreatePartitionsRequest) -> bytes:
    body: dict[str, Any] = {
        "version": CREATE_PARTITIONS_REQUEST_VERSION,
        "topic_id": request.topic_id,
        "partitions": request.partitions,
        "requested_by": request.requested_by,
    }
    if request.assignment is not None:
        body["assignment"] = {str(p): list(r) for p, r in sorted(request.assignment.items())}
    return _dump(body)


def decode_create_partitions_request(data: bytes) -> CreatePartitionsRequest:
    value = _load(data)
    topic_id = value.get("topic_id", "")
    if not isinstance(topic_id, str):
        raise MalformedZnodeError("create partitions request topic_id is not a string")
    return CreatePartitionsRequest(
        topic_id=topic_id,
        partitions=_int(value.get("partitions"), "partitions"),
        requested_by=_int(value.get("requested_by", -1), "requested_by"),
        assignment=_assignment(value.get("assignment"), "create partitions request"),
    )


# /admin/preferred_replica_election: Kafka's own request format.


def encode_preferred_election(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_election(data: bytes) -> list[tuple[str, int]]:
    entries = _load(data).get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnodeError("preferred replica election has no partitions list")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise MalformedZnodeError(f"malformed partition entry {entry!r}")
        out.append((entry["topic"], _int(entry.get("partition"), "partition")))
    return out


# /admin/reassign_partitions: Kafka's request format (replicas null: cancel, Tributary's addition).


def encode_reassignment(partitions: Mapping[tuple[str, int], Sequence[int] | None]) -> bytes:
    return _dump({
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": None if r is None else list(r)}
            for (t, p), r in sorted(partitions.items())
        ],
    })  # fmt: skip


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...] | None]:
    entries = _load(data).get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnodeError("partition reassignment has no partitions list")
    out: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise MalformedZnodeError(f"malformed partition entry {entry!r}")
        replicas = entry.get("replicas")
        key = (entry["topic"], _int(entry.get("partition"), "partition"))
        out[key] = None if replicas is None else _int_list(replicas, "replicas")
    return out
