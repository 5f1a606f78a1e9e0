"""DescribeConfigs of a broker, sans-IO: every setting the broker reads, its source and type, and
password-like settings hidden."""

from __future__ import annotations

from pathlib import Path

from tributary.broker.broker_config_entries import (
    TYPE_BOOLEAN,
    TYPE_LONG,
    TYPE_PASSWORD,
    TYPE_STRING,
    _entry,
    _type_of,
    broker_config_entries,
    is_sensitive,
)
from tributary.broker.config import known_settings, load
from tributary.broker.topics import SOURCE_DEFAULT, SOURCE_STATIC_BROKER


def test_every_setting_the_broker_reads_with_where_it_came_from(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('compression.type = "zstd"\n[log.retention]\nms = 3600000\n')
    config = load(
        {"id": 7, "listen": "10.1.2.3:9092", "data-dir": "/var/lib/t", "zookeeper": "zk:2181/east",
         "advertise": "east-7.example.com:19092", "sendfile": False},
        toml,
    )  # fmt: skip
    entries = {e.name: e for e in broker_config_entries(config)}
    assert set(known_settings()) <= set(entries)
    assert entries["listeners"].value == "PLAINTEXT://10.1.2.3:9092"
    assert entries["advertised.listeners"].value == "PLAINTEXT://east-7.example.com:19092"
    assert (entries["log.dirs"].value, entries["zookeeper.connect"].value) == ("/var/lib/t", "zk:2181/east")
    assert entries["broker.id"].value == "7"
    # Given in the file or as a flag: static; otherwise the default, with the default's value.
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == ("3600000", SOURCE_STATIC_BROKER)
    assert (entries["compression.type"].value, entries["compression.type"].source) == ("zstd", SOURCE_STATIC_BROKER)
    assert (entries["sendfile"].value, entries["sendfile"].config_type) == ("false", TYPE_BOOLEAN)
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == ("1", SOURCE_DEFAULT)
    assert entries["log.retention.ms"].config_type == TYPE_LONG
    assert entries["broker.rack"].value is None and entries["broker.rack"].config_type == TYPE_STRING
    assert entries["connections.max.idle.ms"].value == "600000"
    # Only the password is secret, and it has no value to show here.
    assert [(e.name, e.value) for e in entries.values() if e.sensitive] == [("sasl.inter.broker.password", None)]
    assert [e.name for e in broker_config_entries(config)] == sorted(entries)


def test_a_password_like_setting_is_sensitive_and_its_value_never_leaves() -> None:
    for name in ("ssl.keystore.password", "sasl.jaas.config", "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
                 "delegation.token.secret.key", "ssl.key.password"):  # fmt: skip
        assert is_sensitive(name), name
        entry = _entry(name, "hunter2", True, TYPE_STRING)
        assert (entry.value, entry.sensitive, entry.source) == (None, True, SOURCE_STATIC_BROKER)
        assert _type_of(name, str, "hunter2") == TYPE_PASSWORD
    assert not is_sensitive("log.retention.ms")


def test_listeners_and_the_inter_broker_login_as_the_security_settings_read_them() -> None:
    config = load({
        "id": 2, "data-dir": "/var/lib/t", "zookeeper": "zk:2181",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.inter.broker.username": "broker",
        "sasl.inter.broker.password": "hunter2",
    })  # fmt: skip
    entries = {e.name: e for e in broker_config_entries(config)}
    assert (entries["listeners"].value, entries["listeners"].source) == (
        "SASL_PLAINTEXT://127.0.0.1:9093", SOURCE_STATIC_BROKER,
    )  # fmt: skip
    assert entries["listener.security.protocol.map"].value == "SASL_PLAINTEXT:SASL_PLAINTEXT"
    assert entries["sasl.inter.broker.username"].value == "broker"
    password = entries["sasl.inter.broker.password"]
    assert (password.value, password.sensitive, password.config_type) == (None, True, TYPE_PASSWORD)
    assert "hunter2" not in repr(broker_config_entries(config))
