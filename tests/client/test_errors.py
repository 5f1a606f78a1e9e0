"""Errors: one class per actionable code, messages that say where, flags from the protocol's table."""

from __future__ import annotations

import pytest

from tributary.client import errors
from tributary.client.consumer import errors as consumer_errors
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
from tributary.client.producer import errors as producer_errors
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


# --- the classes derive from the protocol's error-code table ------------------------------


def _declared_error_classes() -> list[type[KafkaError]]:
    """Every KafkaError class the client declares (client, producer and consumer errors)."""
    classes = {
        value
        for module in (errors, producer_errors, consumer_errors)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, KafkaError)
    }
    return sorted(classes, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", _declared_error_classes(), ids=lambda cls: cls.__name__)
def test_class_flags_are_their_codes_row(cls: type[KafkaError]) -> None:
    row = cls.default_code
    assert (cls.retriable, cls.invalidates_metadata) == (row.retriable, row.invalidates_metadata)


@pytest.mark.parametrize("code", [code for code in ErrorCode if code], ids=lambda code: code.name)
def test_every_code_gets_its_rows_flags(code: ErrorCode) -> None:
    error = error_for(code)
    assert (error.retriable, error.invalidates_metadata) == (code.retriable, code.invalidates_metadata)
    assert error.error_code is code


def test_error_for_raises_the_class_that_names_the_code() -> None:
    named = [
        cls for cls in _declared_error_classes() if issubclass(cls, BrokerResponseError) and "default_code" in vars(cls)
    ]
    assert {cls.default_code: cls for cls in named} == errors._BY_CODE
    assert all(type(error_for(code)) is cls for code, cls in errors._BY_CODE.items())
    # Client-side classes name a code for their flags, but error_for does not raise them.
    assert type(error_for(ErrorCode.NETWORK_EXCEPTION)) is BrokerResponseError
    assert type(error_for(ErrorCode.UNSUPPORTED_VERSION)) is errors.BrokerUnsupportedVersionError


def test_every_public_class_is_exported() -> None:
    public = {cls.__name__ for cls in _declared_error_classes() if cls.__module__ == errors.__name__}
    assert public <= set(errors.__all__)
    assert all(hasattr(errors, name) for name in errors.__all__)


def test_a_subclass_names_its_code_in_its_header() -> None:
    class Fenced(BrokerResponseError, code=ErrorCode.FENCED_LEADER_EPOCH):
        pass

    class StillFenced(Fenced):
        pass

    try:
        assert Fenced.default_code is ErrorCode.FENCED_LEADER_EPOCH
        assert Fenced.retriable and Fenced.invalidates_metadata
        assert errors._BY_CODE[ErrorCode.FENCED_LEADER_EPOCH] is Fenced
        assert StillFenced.default_code is ErrorCode.FENCED_LEADER_EPOCH and StillFenced.retriable
        with pytest.raises(TypeError, match="both claim FENCED_LEADER_EPOCH"):

            class Again(BrokerResponseError, code=ErrorCode.FENCED_LEADER_EPOCH):
                pass

    finally:
        del errors._BY_CODE[ErrorCode.FENCED_LEADER_EPOCH]
