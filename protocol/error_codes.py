"""Kafka's error codes: one table, one row per code, with what a client may do about it.

Values and names follow Apache Kafka's ``org.apache.kafka.common.protocol.Errors``. There each
row names an exception class, and the class's superclass says how a client handles the error
(``RetriableException``, ``InvalidMetadataException``). This package has no exceptions (it is
sans-IO, below the client), so each row carries those two facts as :class:`Handling` flags
instead; ``tributary.client.errors`` derives its exception classes' ``retriable`` and
``invalidates_metadata`` from them, and the broker uses the same members for its answers.
``tests/protocol/test_error_codes.py`` checks names, values and flags against kafka-python's
independent table, listing where (and why) we differ.
"""

from __future__ import annotations

from enum import Flag, IntEnum, auto


class Handling(Flag):
    """What a client may do about an error code besides giving up."""

    # Neither: the request failed for good (the producer's docs call these final errors).
    FINAL = 0
    # The same request may succeed if sent again later (Kafka's RetriableException).
    RETRIABLE = auto()
    # The client's idea of who leads what, or where the controller is, is stale: refresh the
    # metadata before the retry (Kafka's InvalidMetadataException, plus BROKER_NOT_AVAILABLE and
    # NOT_CONTROLLER, after which our client looks the broker or the controller up again).
    INVALIDATES_METADATA = auto()


class ErrorCode(IntEnum):
    """A Kafka error code: an ``int`` on the wire, with its row's :class:`Handling`.

    A row reads ``NAME = value`` or ``NAME = value, flags``."""

    handling: Handling

    def __new__(cls, value: int, handling: Handling = Handling.FINAL) -> ErrorCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.handling = handling
        return member

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2, Handling.RETRIABLE
    UNKNOWN_TOPIC_OR_PARTITION = 3, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    NOT_LEADER_OR_FOLLOWER = 6, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    REQUEST_TIMED_OUT = 7, Handling.RETRIABLE
    BROKER_NOT_AVAILABLE = 8, Handling.INVALIDATES_METADATA
    REPLICA_NOT_AVAILABLE = 9, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    COORDINATOR_LOAD_IN_PROGRESS = 14, Handling.RETRIABLE
    COORDINATOR_NOT_AVAILABLE = 15, Handling.RETRIABLE
    NOT_COORDINATOR = 16, Handling.RETRIABLE
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19, Handling.RETRIABLE
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, Handling.RETRIABLE
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51, Handling.RETRIABLE
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70, Handling.RETRIABLE
    INVALID_FETCH_SESSION_EPOCH = 71, Handling.RETRIABLE
    LISTENER_NOT_FOUND = 72, Handling.RETRIABLE
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    UNKNOWN_LEADER_EPOCH = 75, Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78, Handling.RETRIABLE
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80, Handling.RETRIABLE
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, Handling.RETRIABLE
    ELECTION_NOT_NEEDED = 84, Handling.RETRIABLE
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88, Handling.RETRIABLE
    THROTTLING_QUOTA_EXCEEDED = 89, Handling.RETRIABLE
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100, Handling.RETRIABLE
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103, Handling.RETRIABLE
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106, Handling.RETRIABLE
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122, Handling.RETRIABLE
    INVALID_SHARE_SESSION_EPOCH = 123, Handling.RETRIABLE
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128

    @property
    def retriable(self) -> bool:
        """Whether Kafka's clients retry a request that failed with this code."""
        return Handling.RETRIABLE in self.handling

    @property
    def invalidates_metadata(self) -> bool:
        """Whether a client refreshes its metadata before retrying."""
        return Handling.INVALIDATES_METADATA in self.handling

    @classmethod
    def of(cls, code: int) -> ErrorCode:
        """The member for ``code``; an unknown code maps to UNKNOWN_SERVER_ERROR."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR
