"""CreateTopics: validate, then have the controller spread the partitions and their replicas.

A replication factor of -1 takes the broker's ``default.replication.factor``; one larger than the
number of live brokers is refused with INVALID_REPLICATION_FACTOR, as in Kafka, never lowered.
From v5 a created (or validated) topic is answered with its partition count, replication factor
and every config with its effective value; from v7 with its topic id.
"""

from __future__ import annotations

import logging

import trio

from tributary.broker.cluster.errors import (
    ClusterError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
)
from tributary.broker.context import RequestContext
from tributary.broker.topics import colliding_topics, describe_topic_config, topic_config_error, topic_name_error
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import CreateTopicsRequest, CreateTopicsResponse

log = logging.getLogger(__name__)
MAX_PARTITIONS = 10_000
#: What a refusal by the registry is answered with; any other ClusterError is a timeout.
_REFUSALS: dict[type[ClusterError], ErrorCode] = {
    TopicExistsError: ErrorCode.TOPIC_ALREADY_EXISTS,
    InvalidReplicationFactorError: ErrorCode.INVALID_REPLICATION_FACTOR,
    InvalidReplicaAssignmentError: ErrorCode.INVALID_REPLICA_ASSIGNMENT,
}


def _refuse(name: str, code: ErrorCode, message: str) -> CreateTopicsResponse.CreatableTopicResult:
    return CreateTopicsResponse.CreatableTopicResult(name=name, error_code=code, error_message=message)


def _name_problem(ctx: RequestContext, name: str) -> tuple[ErrorCode, str] | None:
    if (why := topic_name_error(name)) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, why
    existing = ctx.broker.snapshot().topics
    if name in existing:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
    if colliding := colliding_topics(name, existing):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with existing {', '.join(colliding)}"
    return None


def manual_assignment(topic: CreateTopicsRequest.CreatableTopic) -> dict[int, tuple[int, ...]]:
    return {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}


def _assignment_problem(ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of a manual replica assignment (partition and replica counts must then be
    -1; partitions 0..n-1, each with the same number of distinct, live brokers)."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        return ErrorCode.INVALID_REQUEST, "give either a replica assignment or partitions and a replication factor"
    assignment = manual_assignment(topic)
    if sorted(assignment) != list(range(len(topic.assignments))) or len(assignment) > MAX_PARTITIONS:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1, each once"
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "every partition needs the same number of replicas, at least one"
    if any(len(set(replicas)) != len(replicas) for replicas in assignment.values()):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a partition names the same broker twice"
    live = ctx.broker.snapshot().brokers
    unknown = sorted({b for replicas in assignment.values() for b in replicas} - set(live))
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown or dead broker(s) in the replica assignment: {unknown}"
    why = topic_config_error({c.name: c.value for c in topic.configs})
    return (ErrorCode.INVALID_CONFIG, why) if why is not None else None


def _invalid(
    ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic, partitions: int, replication_factor: int
) -> tuple[ErrorCode, str] | None:
    """Why the topic cannot be created as asked, or None."""
    if (problem := _name_problem(ctx, topic.name)) is not None:
        return problem
    if topic.assignments:
        return _assignment_problem(ctx, topic)
    if not 1 <= partitions <= MAX_PARTITIONS:
        return ErrorCode.INVALID_PARTITIONS, f"partition count must be 1..{MAX_PARTITIONS}, got {partitions}"
    live = len(ctx.broker.snapshot().brokers)
    if not 1 <= replication_factor <= live:
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is not possible with {live} live brokers",
        )
    why = topic_config_error({c.name: c.value for c in topic.configs})
    return (ErrorCode.INVALID_CONFIG, why) if why is not None else None


async def _create(
    ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic, validate_only: bool
) -> CreateTopicsResponse.CreatableTopicResult:
    broker = ctx.broker
    name = topic.name
    partitions = broker.config.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    replication_factor = (
        broker.config.replication.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    assignment = manual_assignment(topic) if topic.assignments else None
    if assignment is not None:
        partitions, replication_factor = len(assignment), len(next(iter(assignment.values()), ()))
    if (problem := _invalid(ctx, topic, partitions, replication_factor)) is not None:
        return _refuse(name, *problem)
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    result = CreateTopicsResponse.CreatableTopicResult(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        error_code=ErrorCode.NONE,
        configs=[
            CreateTopicsResponse.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=False, config_source=e.source, is_sensitive=False
            )
            for e in describe_topic_config(configs, broker.config.log)
        ],
    )
    if validate_only:
        return result
    try:
        info = await broker.registry.create_topic(
            name, partitions, configs, replication_factor=replication_factor, assignment=assignment
        )
    except ClusterError as exc:
        return _refuse(name, _REFUSALS.get(type(exc), ErrorCode.REQUEST_TIMED_OUT), str(exc))
    log.info("created topic %s with %d partitions for %s", name, partitions, ctx.peer)
    result.topic_id = info.uuid
    return result


def _creatable(ctx: RequestContext, request: CreateTopicsRequest) -> set[str]:
    """The topics the principal may create: all with Create on the Cluster, else those it may
    Create by name (Kafka's check)."""
    names = {t.name for t in request.topics}
    if ctx.authorize_cluster(AclOperation.CREATE, log_denied=False):
        return names
    return ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, names)


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    seen: set[str] = set()
    creatable = _creatable(ctx, request)
    with trio.move_on_after(max(request.timeout_ms, 1) / 1000) as scope:
        for topic in request.topics:
            if topic.name in seen:
                results.append(_refuse(topic.name, ErrorCode.INVALID_REQUEST, "topic named twice in one request"))
                continue
            seen.add(topic.name)
            if topic.name not in creatable:
                results.append(_refuse(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Create on the topic"))
                continue
            results.append(await _create(ctx, topic, request.validate_only))
    if scope.cancelled_caught:
        done = {r.name for r in results}
        results += [
            _refuse(t.name, ErrorCode.REQUEST_TIMED_OUT, "timed out") for t in request.topics if t.name not in done
        ]
    return CreateTopicsResponse(topics=results)
