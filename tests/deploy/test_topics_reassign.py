"""`tributary topics reassign`'s file format: Kafka's reassignment JSON, read strictly, written back."""

from __future__ import annotations

import json

import pytest

from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.cli.admin_options import CommandError
from tributary.deploy.cli.topics_reassign import format_reassignment, parse_reassignment


def test_kafkas_reassignment_json_round_trips() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 0, "replicas": [2]},
    ]})  # fmt: skip
    plan = parse_reassignment(text)
    assert plan == {TopicPartition("a", 1): (3, 1), TopicPartition("a", 0): (2,)}
    written = json.loads(format_reassignment(plan))
    assert written == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
        {"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
    ]}  # fmt: skip
    assert parse_reassignment(format_reassignment(plan)) == plan


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"version": 1, "partitions": []}', "non-empty"),
        ('{"version": 1, "partitions": [{"topic": "a", "replicas": [1]}]}', "partition number"),
        ('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": []}]}', "non-empty list"),
        ('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": ["1"]}]}', "broker ids"),
        ('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
         "log_dirs"),
        ('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]},'
         ' {"topic": "a", "partition": 0, "replicas": [2]}]}', "twice"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_reassignment(text)
