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

Neither is written here: the error-code table in ``protocol/error_codes.py`` is
the one place that says how each code is handled. A class names its code in its
header, ``class NotLeaderError(BrokerResponseError,
code=ErrorCode.NOT_LEADER_OR_FOLLOWER)``, and takes its flags from that row
(:meth:`KafkaError.__init_subclass__`); a :class:`BrokerResponseError` subclass
is also what :func:`error_for` raises for its code. Codes without a class of
their own still get their row's flags, on a plain ``BrokerResponseError``. The
classes are written out, not generated, so that mypy and readers see each one.

This module imports neither trio nor sockets: the blocking fetcher uses it.
"""

from __future__ import annotations

from tributary.protocol.error_codes import ErrorCode


class KafkaError(Exception):
    """Base of every client error.

    ``error_code`` is the Kafka error code (the broker's, or the one Kafka's
    clients use for a client-side failure); ``topic``, ``partition`` and
    ``broker`` say where, when known. ``broker`` is a broker id, or for a
    broker not yet known by id its ``host:port``.

    A subclass that stands for one code says so with ``code=`` in its class
    header: that sets ``default_code``, and ``retriable`` and
    ``invalidates_metadata`` from the code's row. A subclass without ``code=``
    inherits all three."""

    default_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = ErrorCode.UNKNOWN_SERVER_ERROR.retriable
    invalidates_metadata: bool = ErrorCode.UNKNOWN_SERVER_ERROR.invalidates_metadata

    def __init_subclass__(cls, *, code: ErrorCode | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.default_code = code
            cls.retriable = code.retriable
            cls.invalidates_metadata = code.invalidates_metadata

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


class KafkaConnectionError(KafkaError, code=ErrorCode.NETWORK_EXCEPTION):
    """A broker could not be reached, or a connection broke with requests in flight.

    The requests may or may not have been processed by the broker."""


class RequestTimedOutError(KafkaError, code=ErrorCode.REQUEST_TIMED_OUT):
    """No response within the request timeout (client side), or the broker's
    own REQUEST_TIMED_OUT."""


class UnsupportedVersionError(KafkaError, code=ErrorCode.UNSUPPORTED_VERSION):
    """The broker supports no version of an API that this client also speaks."""


class KafkaProtocolError(KafkaError, code=ErrorCode.UNKNOWN_SERVER_ERROR):
    """The broker sent bytes this client cannot decode, or a response that
    does not match its request."""


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers or known brokers answered."""


# --- errors brokers answer with ----------------------------------------------------------


# The class error_for raises for a code: each BrokerResponseError subclass that names
# a code adds itself (BrokerResponseError.__init_subclass__).
_BY_CODE: dict[int, type[BrokerResponseError]] = {}


class BrokerResponseError(KafkaError):
    """An error code in a broker's response that has no more specific class.

    Its subclasses are the specific classes: one per code, which
    :func:`error_for` raises for that code."""

    def __init_subclass__(cls, *, code: ErrorCode | None = None, **kwargs: object) -> None:
        super().__init_subclass__(code=code, **kwargs)
        if code is None:
            return
        # Two classes for one code would make error_for's choice depend on import order.
        if code in _BY_CODE:
            raise TypeError(f"{cls.__name__} and {_BY_CODE[code].__name__} both claim {code.name}")
        _BY_CODE[code] = cls


class OffsetOutOfRangeError(BrokerResponseError, code=ErrorCode.OFFSET_OUT_OF_RANGE):
    """The requested offset lies outside the partition's log.

    ``offset`` is the requested offset (or the start of the requested range),
    ``log_start_offset``/``high_watermark`` the log's bounds where known."""

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


class CorruptMessageError(BrokerResponseError, code=ErrorCode.CORRUPT_MESSAGE):
    pass


class UnknownTopicOrPartitionError(BrokerResponseError, code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
    pass


class LeaderNotAvailableError(BrokerResponseError, code=ErrorCode.LEADER_NOT_AVAILABLE):
    pass


class NotLeaderError(BrokerResponseError, code=ErrorCode.NOT_LEADER_OR_FOLLOWER):
    """NOT_LEADER_OR_FOLLOWER: the broker does not lead the partition (any more)."""


class BrokerNotAvailableError(BrokerResponseError, code=ErrorCode.BROKER_NOT_AVAILABLE):
    pass


class MessageTooLargeError(BrokerResponseError, code=ErrorCode.MESSAGE_TOO_LARGE):
    pass


class RecordListTooLargeError(BrokerResponseError, code=ErrorCode.RECORD_LIST_TOO_LARGE):
    pass


class NotEnoughReplicasError(BrokerResponseError, code=ErrorCode.NOT_ENOUGH_REPLICAS):
    pass


class KafkaStorageError(BrokerResponseError, code=ErrorCode.KAFKA_STORAGE_ERROR):
    pass


class InvalidTopicError(BrokerResponseError, code=ErrorCode.INVALID_TOPIC_EXCEPTION):
    pass


class TopicAuthorizationFailedError(BrokerResponseError, code=ErrorCode.TOPIC_AUTHORIZATION_FAILED):
    pass


class SaslAuthenticationFailedError(BrokerResponseError, code=ErrorCode.SASL_AUTHENTICATION_FAILED):
    """Wrong credentials, an unknown user, or a broker that could not prove it knows them."""


class UnsupportedSaslMechanismError(BrokerResponseError, code=ErrorCode.UNSUPPORTED_SASL_MECHANISM):
    """The listener does not offer the configured sasl.mechanism."""


class IllegalSaslStateError(BrokerResponseError, code=ErrorCode.ILLEGAL_SASL_STATE):
    pass


class TopicAlreadyExistsError(BrokerResponseError, code=ErrorCode.TOPIC_ALREADY_EXISTS):
    pass


class InvalidPartitionsError(BrokerResponseError, code=ErrorCode.INVALID_PARTITIONS):
    pass


class InvalidReplicationFactorError(BrokerResponseError, code=ErrorCode.INVALID_REPLICATION_FACTOR):
    pass


class InvalidConfigError(BrokerResponseError, code=ErrorCode.INVALID_CONFIG):
    pass


class NotControllerError(BrokerResponseError, code=ErrorCode.NOT_CONTROLLER):
    pass


class InvalidRequestError(BrokerResponseError, code=ErrorCode.INVALID_REQUEST):
    pass


class InvalidRequiredAcksError(BrokerResponseError, code=ErrorCode.INVALID_REQUIRED_ACKS):
    pass


class InvalidRecordError(BrokerResponseError, code=ErrorCode.INVALID_RECORD):
    pass


class UnknownServerError(BrokerResponseError, code=ErrorCode.UNKNOWN_SERVER_ERROR):
    pass


# Group coordination


class CoordinatorLoadInProgressError(BrokerResponseError, code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
    pass


class CoordinatorNotAvailableError(BrokerResponseError, code=ErrorCode.COORDINATOR_NOT_AVAILABLE):
    pass


class NotCoordinatorError(BrokerResponseError, code=ErrorCode.NOT_COORDINATOR):
    pass


class IllegalGenerationError(BrokerResponseError, code=ErrorCode.ILLEGAL_GENERATION):
    pass


class InconsistentGroupProtocolError(BrokerResponseError, code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL):
    pass


class InvalidGroupIdError(BrokerResponseError, code=ErrorCode.INVALID_GROUP_ID):
    pass


class UnknownMemberIdError(BrokerResponseError, code=ErrorCode.UNKNOWN_MEMBER_ID):
    pass


class InvalidSessionTimeoutError(BrokerResponseError, code=ErrorCode.INVALID_SESSION_TIMEOUT):
    pass


class RebalanceInProgressError(BrokerResponseError, code=ErrorCode.REBALANCE_IN_PROGRESS):
    pass


class MemberIdRequiredError(BrokerResponseError, code=ErrorCode.MEMBER_ID_REQUIRED):
    pass


class FencedInstanceIdError(BrokerResponseError, code=ErrorCode.FENCED_INSTANCE_ID):
    pass


class GroupIdNotFoundError(BrokerResponseError, code=ErrorCode.GROUP_ID_NOT_FOUND):
    pass


class GroupNotEmptyError(BrokerResponseError, code=ErrorCode.NON_EMPTY_GROUP):
    pass


class OffsetMetadataTooLargeError(BrokerResponseError, code=ErrorCode.OFFSET_METADATA_TOO_LARGE):
    pass


class UnstableOffsetCommitError(BrokerResponseError, code=ErrorCode.UNSTABLE_OFFSET_COMMIT):
    pass


# Idempotent producers


class OutOfOrderSequenceError(BrokerResponseError, code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER):
    pass


class DuplicateSequenceError(BrokerResponseError, code=ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
    pass


class InvalidProducerEpochError(BrokerResponseError, code=ErrorCode.INVALID_PRODUCER_EPOCH):
    pass


class UnknownProducerIdError(BrokerResponseError, code=ErrorCode.UNKNOWN_PRODUCER_ID):
    pass


class ProducerFencedError(BrokerResponseError, code=ErrorCode.PRODUCER_FENCED):
    pass


class BrokerUnsupportedVersionError(BrokerResponseError, code=ErrorCode.UNSUPPORTED_VERSION):
    """The broker answered UNSUPPORTED_VERSION to a request."""


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
    # A broker's REQUEST_TIMED_OUT reads as the client's own timeout: callers catch one class.
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
        # A code without a class still gets its row's flags (instance attributes
        # override the class defaults); a code newer than the table gets none.
        row = ErrorCode.of(code)
        error.retriable = row.retriable
        error.invalidates_metadata = row.invalidates_metadata
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
    "SaslAuthenticationFailedError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedVersionError",
    "error_for",
    "raise_for_code",
]
