"""The group settings, under Kafka's names, in the broker's TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tributary.broker.config import ConfigError, load
from tributary.broker.group.config import GroupConfig

REQUIRED = {"id": 1, "listen": "127.0.0.1:9092", "data-dir": "/tmp/d", "zookeeper": "127.0.0.1:2181"}


def test_defaults_are_kafkas() -> None:
    config = load(REQUIRED).group
    assert config == GroupConfig()
    assert (config.initial_rebalance_delay_ms, config.min_session_timeout_ms, config.max_session_timeout_ms) == (
        3000,
        6000,
        1_800_000,
    )
    assert config.offsets_topic_partitions == 50
    assert config.offsets_retention_ms == 7 * 24 * 60 * 60 * 1000


def test_toml_dotted_names(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        "group.initial.rebalance.delay.ms = 100\n"
        "group.min.session.timeout.ms = 1000\n"
        "group.max.session.timeout.ms = 60000\n"
        "offsets.topic.num.partitions = 3\n"
        "offsets.retention.minutes = 5\n"
        "offsets.retention.check.interval.ms = 1000\n"
        "offset.metadata.max.bytes = 10\n"
        "log.retention.ms = 1000\n"
    )
    config = load(REQUIRED, toml)
    assert config.group == GroupConfig(
        initial_rebalance_delay_ms=100,
        min_session_timeout_ms=1000,
        max_session_timeout_ms=60000,
        offsets_topic_partitions=3,
        offsets_retention_minutes=5,
        offsets_retention_check_interval_ms=1000,
        offset_metadata_max_bytes=10,
    )
    assert config.log.retention_ms == 1000


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"offsets.topic.num.partitions": 0}, "offsets.topic.num.partitions"),
        ({"group.min.session.timeout.ms": 10, "group.max.session.timeout.ms": 5}, "group.min.session.timeout.ms"),
        ({"group.initial.rebalance.delay.ms": "soon"}, "group.initial.rebalance.delay.ms"),
    ],
)
def test_bad_values_name_the_setting(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({**REQUIRED, **settings})


def test_consumer_group_settings_kafka_4_defaults_and_toml(tmp_path: Path) -> None:
    defaults = load(REQUIRED).group
    assert (defaults.consumer_heartbeat_interval_ms, defaults.consumer_session_timeout_ms) == (5000, 45000)
    assert defaults.consumer_assignors == ("uniform", "range")
    assert defaults.consumer_migration_policy == "bidirectional"
    toml = tmp_path / "broker.toml"
    toml.write_text(
        "group.consumer.heartbeat.interval.ms = 500\n"
        "group.consumer.min.heartbeat.interval.ms = 100\n"
        "group.consumer.session.timeout.ms = 6000\n"
        "group.consumer.min.session.timeout.ms = 1000\n"
        'group.consumer.assignors = "range, org.apache.kafka.coordinator.group.assignor.UniformAssignor"\n'
        'group.consumer.migration.policy = "Upgrade"\n'
        "group.consumer.max.size = 10\n"
    )
    config = load(REQUIRED, toml).group
    assert (config.consumer_heartbeat_interval_ms, config.consumer_session_timeout_ms) == (500, 6000)
    assert config.consumer_assignors == ("range", "uniform")
    assert config.consumer_migration_policy == "upgrade"
    assert config.upgrade_allowed and not config.downgrade_allowed
    assert config.consumer_max_size == 10


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group.consumer.session.timeout.ms": 1000}, "group.consumer.session.timeout.ms must be between 45000"),
        ({"group.consumer.heartbeat.interval.ms": 20000}, "group.consumer.heartbeat.interval.ms must be between"),
        (
            {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 4000},
            "heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
        ({"group.consumer.assignors": "sticky"}, "unknown assignors"),
        ({"group.consumer.migration.policy": "sideways"}, "must be one of disabled, upgrade"),
        ({"group.consumer.max.size": 0}, "group.consumer.max.size must be >= 1"),
    ],
)
def test_bad_consumer_group_settings(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({**REQUIRED, **settings})
