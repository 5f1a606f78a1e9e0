"""Errors: one class per actionable code, messages that say where, flags that drive retries."""

from __future__ import annotations

import pytest

from tributary.client import errors
from tributary.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaError,
    NotLeaderError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for,
    raise_for_code,
)
from tributary.protocol.error_codes import ErrorCode


def _mapped() -> list[type[BrokerResponseError]]:
    return sorted(set(errors._BY_CODE.values()), key=lambda cls: cls.default_code)


@pytest.mark.parametrize("cls", _mapped(), ids=lambda cls: cls.__name__)
def test_each_code_has_its_class_and_kafkas_retry_semantics(cls: type[BrokerResponseError]) -> None:
    error = error_for(cls.default_code, topic="clicks", partition=3, broker=2)
    assert type(error) is cls
    assert error.error_code == cls.default_code
    assert error.retriable == ErrorCode(cls.default_code).retriable
    assert (error.topic, error.partition, error.broker) == ("clicks", 3, 2)
    assert str(error).startswith(ErrorCode(cls.default_code).name)


def test_messages_name_what_where_and_why() -> None:
    error = error_for(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, topic="clicks", partition=3, broker=2, context="produce", detail="moved"
    )
    assert isinstance(error, NotLeaderError)
    assert str(error) == "produce: NOT_LEADER_OR_FOLLOWER (clicks-3 on broker 2): moved"
    assert error.retriable and error.invalidates_metadata

    assert str(error_for(ErrorCode.TOPIC_ALREADY_EXISTS, topic="clicks")) == "TOPIC_ALREADY_EXISTS (topic 'clicks')"
    assert isinstance(error_for(ErrorCode.TOPIC_ALREADY_EXISTS), TopicAlreadyExistsError)
    assert isinstance(error_for(ErrorCode.REQUEST_TIMED_OUT, broker=1), RequestTimedOutError)
    assert isinstance(error_for(ErrorCode.OFFSET_OUT_OF_RANGE), OffsetOutOfRangeError)


def test_codes_without_a_class_keep_their_flags() -> None:
    stale = error_for(ErrorCode.FENCED_LEADER_EPOCH, topic="t", partition=0)
    assert type(stale) is BrokerResponseError
    assert stale.retriable and stale.invalidates_metadata
    unknown = error_for(999)
    assert type(unknown) is BrokerResponseError
    assert unknown.error_code == 999 and not unknown.retriable
    assert "error code 999" in str(unknown)


def test_raise_for_code() -> None:
    raise_for_code(0, topic="t")
    with pytest.raises(UnknownTopicOrPartitionError, match=r"UNKNOWN_TOPIC_OR_PARTITION \(t-1\)"):
        raise_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic="t", partition=1)


def test_client_side_errors() -> None:
    lost = KafkaConnectionError("connection to broker 2 broke", broker=2)
    assert lost.error_code == ErrorCode.NETWORK_EXCEPTION
    assert lost.retriable and lost.invalidates_metadata
    assert isinstance(lost, KafkaError)
    timed_out = RequestTimedOutError("slow", broker=1)
    assert timed_out.retriable and not timed_out.invalidates_metadata
    assert timed_out.message == "slow"
