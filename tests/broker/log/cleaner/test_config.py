"""Compaction's settings: per topic (Kafka's topic configs) and per broker (``log.cleaner.*``),
checked as Kafka checks them; IncrementalAlterConfigs' APPEND and SUBTRACT on cleanup.policy."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tributary.broker.config import ConfigError, load
from tributary.broker.log.config import NEVER, LogConfig
from tributary.broker.topic_config_changes import APPEND, DELETE, SET, SUBTRACT, Refused, incremental
from tributary.broker.topics import (
    CONFIG_TYPE_DOUBLE,
    CONFIG_TYPE_LIST,
    config_type,
    describe_broker_config,
    describe_topic_config,
    topic_config_error,
    topic_defaults,
)

REQUIRED = {"id": 1, "listen": "127.0.0.1:9092", "data-dir": "/tmp/d", "zookeeper": "127.0.0.1:2181/east"}


def test_kafkas_defaults() -> None:
    config = LogConfig()
    assert config.cleanup_policy == "delete" and not config.compacts and config.deletes_old_segments
    assert config.delete_retention_ms == 24 * 3600 * 1000
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == NEVER


@pytest.mark.parametrize(
    ("policy", "compacts", "deletes"),
    [
        ("compact", True, False),
        ("delete", False, True),
        ("compact,delete", True, True),
        ("delete, compact", True, True),
    ],
)
def test_policies(policy: str, compacts: bool, deletes: bool) -> None:
    config = LogConfig().with_overrides({"cleanup.policy": policy})
    assert (config.compacts, config.deletes_old_segments) == (compacts, deletes)


def test_a_compacted_log_rolls_by_max_compaction_lag_when_it_is_shorter() -> None:
    config = LogConfig().with_overrides({"segment.ms": "60000", "max.compaction.lag.ms": "1000"})
    assert config.roll_ms == 60000  # not compacted: segment.ms alone
    compacted = config.with_overrides({"cleanup.policy": "compact"})
    assert compacted.roll_ms == 1000
    assert compacted.with_overrides({"max.compaction.lag.ms": "90000"}).roll_ms == 60000


@pytest.mark.parametrize(
    ("configs", "why"),
    [
        ({"cleanup.policy": "shred"}, "cleanup.policy must be"),
        ({"cleanup.policy": ""}, "cleanup.policy must be"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "between 0 and 1"),
        ({"min.cleanable.dirty.ratio": "half"}, "must be a number"),
        ({"delete.retention.ms": "-1"}, "at least 0"),
        ({"max.compaction.lag.ms": "0"}, "at least 1"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "must not exceed"),
    ],
)
def test_bad_topic_configs_are_refused_with_a_reason(configs: dict[str, str | None], why: str) -> None:
    error = topic_config_error(configs)
    assert error is not None and why in error


def test_good_topic_configs_pass_and_are_typed_as_kafka_types_them() -> None:
    good: dict[str, str | None] = {
        "cleanup.policy": "compact,delete",
        "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "1000",
        "max.compaction.lag.ms": "60000",
    }
    assert topic_config_error(good) is None
    assert config_type("cleanup.policy") == CONFIG_TYPE_LIST
    assert config_type("min.cleanable.dirty.ratio") == CONFIG_TYPE_DOUBLE
    described = {e.name: e.value for e in describe_topic_config({"cleanup.policy": "compact"}, LogConfig())}
    assert described["cleanup.policy"] == "compact"
    assert described["min.cleanable.dirty.ratio"] == "0.5"
    brokers = {e.name: e.value for e in describe_broker_config(LogConfig())}
    assert brokers["log.cleaner.delete.retention.ms"] == str(24 * 3600 * 1000)
    assert brokers["log.cleaner.min.cleanable.ratio"] == "0.5"


def test_append_and_subtract_start_from_the_default_and_keep_a_list() -> None:
    defaults = topic_defaults(LogConfig())
    both = incremental([("cleanup.policy", APPEND, "compact")], defaults)({})
    assert both == {"cleanup.policy": "delete,compact"}
    assert incremental([("cleanup.policy", APPEND, "compact")], defaults)(both) == both  # already there
    assert incremental([("cleanup.policy", SUBTRACT, "delete")], defaults)(both) == {"cleanup.policy": "compact"}
    emptied = incremental([("cleanup.policy", SUBTRACT, "delete")], defaults)({})
    assert emptied == {"cleanup.policy": ""}
    assert topic_config_error(dict(emptied)) is not None  # refused before it is stored
    assert incremental([("cleanup.policy", DELETE, None), ("retention.ms", SET, "5")], defaults)(both) == {
        "retention.ms": "5"
    }
    with pytest.raises(Refused, match="list configs only"):
        incremental([("retention.ms", APPEND, "5")], defaults)


def test_broker_settings(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        'log.cleanup.policy = "compact"\nlog.cleaner.delete.retention.ms = 5\n'
        "log.cleaner.min.cleanable.ratio = 0.25\nlog.cleaner.min.compaction.lag.ms = 7\n"
        "log.cleaner.max.compaction.lag.ms = 9\nlog.cleaner.enable = false\nlog.cleaner.threads = 2\n"
        "log.cleaner.io.max.bytes.per.second = 1048576\nlog.cleaner.dedupe.buffer.size = 8388608\n"
        "log.cleaner.backoff.ms = 100\n"
    )
    config = load(REQUIRED, toml)
    assert config.log.cleanup_policy == "compact"
    assert (config.log.delete_retention_ms, config.log.min_cleanable_dirty_ratio) == (5, 0.25)
    assert (config.log.min_compaction_lag_ms, config.log.max_compaction_lag_ms) == (7, 9)
    cleaner = config.cleaner
    assert not cleaner.enable and cleaner.threads == 2 and cleaner.backoff_ms == 100
    assert cleaner.io_max_bytes_per_second == 1048576 and cleaner.buffer_per_thread == 4 * 1024 * 1024
    assert load(REQUIRED).cleaner.io_max_bytes_per_second == math.inf


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("log.cleaner.threads", 0, "log.cleaner.threads must be at least 1"),
        ("log.cleaner.dedupe.buffer.size", 1000, "at least 1 MiB"),
        ("log.cleaner.io.max.bytes.per.second", 0, "above 0"),
        ("log.cleanup.policy", "shred", "cleanup.policy must be"),
        ("log.cleaner.min.cleanable.ratio", 2, "between 0 and 1"),
    ],
)
def test_bad_broker_settings_name_the_setting(setting: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({**REQUIRED, setting: value})
