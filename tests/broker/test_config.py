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
