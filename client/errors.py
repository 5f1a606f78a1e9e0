"""The exceptions the client raises.

Every error a caller can act on has a class of its own, and its message names
the topic, partition and broker involved where there is one. Errors a broker
answers with carry its :class:`~protocol.error_codes.ErrorCode`
(:func:`error_for` picks the class); errors the client notices itself (a
connection that fails, a request that times out) carry the code Kafka's own
clients use for them.

Two flags drive the retry logic of the layers above:

- ``retriable``: the same request may succeed if sent again later (Kafka's
  ``RetriableException``);
- ``invalidates_metadata``: the client's idea of who leads what is stale; the
  cluster refreshes its metadata before the retry (Kafka's
  ``InvalidMetadataException``).

This module imports neither trio nor sockets: the blocking fetcher uses it.
"""

from __future__ import annotations

from tributary.protocol.error_codes import ErrorCode


class KafkaError(Exception):
    """Base of every client error.

    ``error_code`` is the Kafka error code (the broker's, or the one Kafka's
    clients use for a client-side failure); ``topic``, ``partition`` and
    ``broker`` say where, when known. ``broker`` is a broker id, or for a
    broker not yet known by id its ``host:port``."""

    default_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    invalidates_metadata: bool = False

    def __init__(
        self,
        message: str,
        *,
        error_code: ErrorCode | int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        broker: int | str | None = None,
    ) -> None:
        super().__init__(message)
        code = self.default_code if error_code is None else error_code
        try:
            self.error_code: ErrorCode | int = ErrorCode(code)
        except ValueError:  # a code newer than our table
            self.error_code = int(code)
        self.topic = topic
        self.partition = partition
        self.broker = broker

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


# --- client-side failures --------------------------------------------------------------


class KafkaConnectionError(KafkaError):
    """A broker could not be reached, or a connection broke with requests in flight.

    The requests may or may not have been processed by the broker."""

    default_code = ErrorCode.NETWORK_EXCEPTION
    retriable = True
    invalidates_metadata = True


class RequestTimedOutError(KafkaError):
    """No response within the request timeout (client side), or the broker's
    own REQUEST_TIMED_OUT."""

    default_code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that this client also speaks."""

    default_code = ErrorCode.UNSUPPORTED_VERSION


class KafkaProtocolError(KafkaError):
    """The broker sent bytes this client cannot decode, or a response that
    does not match its request."""

    default_code = ErrorCode.UNKNOWN_SERVER_ERROR


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers or known brokers answered."""


# --- errors brokers answer with ----------------------------------------------------------


class BrokerResponseError(KafkaError):
    """An error code in a broker's response that has no more specific class."""


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset lies outside the partition's log.

    ``offset`` is the requested offset (or the start of the requested range),
    ``log_start_offset``/``high_watermark`` the log's bounds where known."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        error_code: ErrorCode | int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        broker: int | str | None = None,
    ) -> None:
        super().__init__(message, error_code=error_code, topic=topic, partition=partition, broker=broker)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class CorruptMessageError(BrokerResponseError):
    default_code = ErrorCode.CORRUPT_MESSAGE
    retriable = True


class UnknownTopicOrPartitionError(BrokerResponseError):
    default_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True
    invalidates_metadata = True


class LeaderNotAvailableError(BrokerResponseError):
    default_code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True
    invalidates_metadata = True


class NotLeaderError(BrokerResponseError):
    """NOT_LEADER_OR_FOLLOWER: the broker does not lead the partition (any more)."""

    default_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True
    invalidates_metadata = True


class BrokerNotAvailableError(BrokerResponseError):
    default_code = ErrorCode.BROKER_NOT_AVAILABLE
    invalidates_metadata = True


class MessageTooLargeError(BrokerResponseError):
    default_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(BrokerResponseError):
    default_code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(BrokerResponseError):
    default_code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class KafkaStorageError(BrokerResponseError):
    default_code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True
    invalidates_metadata = True


class InvalidTopicError(BrokerResponseError):
    default_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class TopicAuthorizationFailedError(BrokerResponseError):
    default_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class TopicAlreadyExistsError(BrokerResponseError):
    default_code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(BrokerResponseError):
    default_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(BrokerResponseError):
    default_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidConfigError(BrokerResponseError):
    default_code = ErrorCode.INVALID_CONFIG


class NotControllerError(BrokerResponseError):
    default_code = ErrorCode.NOT_CONTROLLER
    retriable = True
    invalidates_metadata = True


class InvalidRequestError(BrokerResponseError):
    default_code = ErrorCode.INVALID_REQUEST


class InvalidRequiredAcksError(BrokerResponseError):
    default_code = ErrorCode.INVALID_REQUIRED_ACKS


class InvalidRecordError(BrokerResponseError):
    default_code = ErrorCode.INVALID_RECORD


class UnknownServerError(BrokerResponseError):
    default_code = ErrorCode.UNKNOWN_SERVER_ERROR


# Group coordination


class CoordinatorLoadInProgressError(BrokerResponseError):
    default_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    default_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    default_code = ErrorCode.NOT_COORDINATOR
    retriable = True


class IllegalGenerationError(BrokerResponseError):
    default_code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(BrokerResponseError):
    default_code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(BrokerResponseError):
    default_code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(BrokerResponseError):
    default_code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(BrokerResponseError):
    default_code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(BrokerResponseError):
    default_code = ErrorCode.REBALANCE_IN_PROGRESS


class MemberIdRequiredError(BrokerResponseError):
    default_code = ErrorCode.MEMBER_ID_REQUIRED


class FencedInstanceIdError(BrokerResponseError):
    default_code = ErrorCode.FENCED_INSTANCE_ID


class GroupIdNotFoundError(BrokerResponseError):
    default_code = ErrorCode.GROUP_ID_NOT_FOUND


class GroupNotEmptyError(BrokerResponseError):
    default_code = ErrorCode.NON_EMPTY_GROUP


class OffsetMetadataTooLargeError(BrokerResponseError):
    default_code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class UnstableOffsetCommitError(BrokerResponseError):
    default_code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


# Idempotent producers


class OutOfOrderSequenceError(BrokerResponseError):
    default_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(BrokerResponseError):
    default_code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(BrokerResponseError):
    default_code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(BrokerResponseError):
    default_code = ErrorCode.UNKNOWN_PRODUCER_ID


class ProducerFencedError(BrokerResponseError):
    default_code = ErrorCode.PRODUCER_FENCED


class BrokerUnsupportedVersionError(BrokerResponseError):
    """The broker answered UNSUPPORTED_VERSION to a request."""

    default_code = ErrorCode.UNSUPPORTED_VERSION


_BY_CODE: dict[int, type[BrokerResponseError]] = {
    cls.default_code: cls
    for cls in (
        OffsetOutOfRangeError,
        CorruptMessageError,
        UnknownTopicOrPartitionError,
        LeaderNotAvailableError,
        NotLeaderError,
        BrokerNotAvailableError,
        MessageTooLargeError,
        RecordListTooLargeError,
        NotEnoughReplicasError,
        KafkaStorageError,
        InvalidTopicError,
        TopicAuthorizationFailedError,
        TopicAlreadyExistsError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidConfigError,
        NotControllerError,
        InvalidRequestError,
        InvalidRequiredAcksError,
        InvalidRecordError,
        UnknownServerError,
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NotCoordinatorError,
        IllegalGenerationError,
        InconsistentGroupProtocolError,
        InvalidGroupIdError,
        UnknownMemberIdError,
        InvalidSessionTimeoutError,
        RebalanceInProgressError,
        MemberIdRequiredError,
        FencedInstanceIdError,
        GroupIdNotFoundError,
        GroupNotEmptyError,
        OffsetMetadataTooLargeError,
        UnstableOffsetCommitError,
        OutOfOrderSequenceError,
        DuplicateSequenceError,
        InvalidProducerEpochError,
        UnknownProducerIdError,
        ProducerFencedError,
        BrokerUnsupportedVersionError,
    )
}
# Codes that mean stale metadata but have no class of their own here.
_METADATA_CODES = frozenset(
    {
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def _where(topic: str | None, partition: int | None, broker: int | str | None) -> str:
    parts = []
    if topic is not None:
        parts.append(f"{topic}-{partition}" if partition is not None else f"topic {topic!r}")
    if broker is not None:
        parts.append(f"broker {broker}")
    return " on ".join(parts)


def error_for(
    code: int,
    *,
    topic: str | None = None,
    partition: int | None = None,
    broker: int | str | None = None,
    detail: str | None = None,
    context: str | None = None,
) -> KafkaError:
    """The exception for a non-zero error code from a response.

    ``context`` names what was being done ("fetch at offset 12"); ``detail`` is
    the broker's own error message, if the response carried one."""
    if code == ErrorCode.REQUEST_TIMED_OUT:
        cls: type[KafkaError] = RequestTimedOutError
    else:
        cls = _BY_CODE.get(code, BrokerResponseError)
    text = _code_name(code)
    where = _where(topic, partition, broker)
    if context:
        text = f"{context}: {text}"
    if where:
        text = f"{text} ({where})"
    if detail:
        text = f"{text}: {detail}"
    error = cls(text, error_code=code, topic=topic, partition=partition, broker=broker)
    if cls is BrokerResponseError:
        # Instance attributes override the class defaults for codes without a class.
        error.retriable = ErrorCode.of(code).retriable
        error.invalidates_metadata = code in _METADATA_CODES
    return error


def raise_for_code(
    code: int,
    *,
    topic: str | None = None,
    partition: int | None = None,
    broker: int | str | None = None,
    detail: str | None = None,
    context: str | None = None,
) -> None:
    """Raise :func:`error_for`'s exception unless ``code`` is NONE (0)."""
    if code:
        raise error_for(code, topic=topic, partition=partition, broker=broker, detail=detail, context=context)


__all__ = [
    "BrokerNotAvailableError",
    "BrokerResponseError",
    "BrokerUnsupportedVersionError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "DuplicateSequenceError",
    "FencedInstanceIdError",
    "GroupIdNotFoundError",
    "GroupNotEmptyError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidConfigError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTopicError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "NoBrokersAvailableError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "RebalanceInProgressError",
    "RecordListTooLargeError",
    "RequestTimedOutError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedVersionError",
    "error_for",
    "raise_for_code",
]
