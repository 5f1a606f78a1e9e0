from __future__ import annotations

from pathlib import Path

import pytest

from tributary.broker.config import ConfigError, HostPort, load

REQUIRED = {"id": 1, "listen": "127.0.0.1:9092", "data-dir": "/tmp/d", "zookeeper": "127.0.0.1:2181/east"}


def test_flags_alone() -> None:
    config = load(REQUIRED)
    assert config.broker_id == 1
    assert config.listen == HostPort("127.0.0.1", 9092)
    assert config.advertise == config.listen
    assert config.data_dir == Path("/tmp/d")
    assert config.auto_create_topics is True
    assert config.socket_request_max_bytes == 100 * 1024 * 1024


def test_toml_dotted_kafka_names_and_flags_win(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        'id = 7\nlisten = "0.0.0.0:9000"\nadvertise = "east-1:9000"\ndata-dir = "/data"\n'
        'zookeeper = "zk:2181"\ndatacenter = "east"\n'
        "num.partitions = 6\nlog.retention.ms = 1000\nlog.flush.interval.messages = 1\n"
        "auto.create.topics.enable = false\n"
    )
    config = load({"id": 9, "listen": None}, toml)
    assert config.broker_id == 9  # the flag wins
    assert config.listen == HostPort("0.0.0.0", 9000)  # an absent flag does not
    assert config.advertise == HostPort("east-1", 9000)
    assert config.datacenter == "east"
    assert config.default_partitions == 6
    assert config.auto_create_topics is False
    assert config.log.retention_ms == 1000
    assert config.log.flush_messages == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({k: v for k, v in REQUIRED.items() if k != "zookeeper"}, "setting 'zookeeper' is missing"),
        ({**REQUIRED, "listen": "nohost"}, "setting 'listen' must be HOST:PORT"),
        ({**REQUIRED, "id": "x"}, "setting 'id' must be an integer"),
        ({**REQUIRED, "id": -1}, "setting 'id' must be >= 0"),
        ({**REQUIRED, "listen": "0.0.0.0:9092"}, "setting 'advertise' is missing"),
        ({**REQUIRED, "log.retention.mss": 5}, "unknown setting 'log.retention.mss'"),
    ],
)
def test_bad_settings_name_the_setting(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(flags)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load(REQUIRED, tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("id = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(REQUIRED, bad)


def test_connection_and_memory_limits_default_to_safe_values() -> None:
    config = load(REQUIRED)
    assert config.max_connections == 10_000
    assert config.max_connections_per_ip == 2**31 - 1  # unlimited, as Kafka
    assert config.connections_max_idle_ms == 600_000
    assert config.queued_max_request_bytes == 256 * 1024 * 1024


def test_connection_and_memory_limits_from_toml(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    # ``max.connections`` is a value, so TOML cannot also read ``max.connections.per.ip``
    # as a dotted key under it: with both set, one of them is written as a quoted key.
    toml.write_text(
        'max.connections = 50\n"max.connections.per.ip" = 5\n'
        "connections.max.idle.ms = 500\nqueued.max.request.bytes = 8388608\n"
    )
    config = load(REQUIRED, toml)
    assert (config.max_connections, config.max_connections_per_ip) == (50, 5)
    assert config.connections_max_idle_ms == 500
    assert config.queued_max_request_bytes == 8 * 1024 * 1024


def test_minus_one_lifts_the_idle_timeout_and_the_request_budget() -> None:
    config = load({**REQUIRED, "connections.max.idle.ms": -1, "queued.max.request.bytes": -1})
    assert config.connections_max_idle_ms is None
    assert config.queued_max_request_bytes is None


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("max.connections", 0, "setting 'max.connections' must be at least 1"),
        ("max.connections.per.ip", -1, "setting 'max.connections.per.ip' must be at least 1"),
        ("connections.max.idle.ms", 0, "setting 'connections.max.idle.ms' must be -1 \\(never\\) or at least 1"),
        ("queued.max.request.bytes", 100, "setting 'queued.max.request.bytes' must be -1 \\(unlimited\\)"),
        ("queued.max.request.bytes", -2, "setting 'queued.max.request.bytes' must be -1 \\(unlimited\\)"),
        ("max.connections", "many", "setting 'max.connections' must be an integer"),
    ],
)
def test_bad_limits_name_the_setting(setting: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({**REQUIRED, setting: value})
