"""This broker's configuration as DescribeConfigs reports a BROKER resource.

Every setting the broker reads (``config.known_settings()``, under the names its TOML file and flags
use), with its effective value, where it came from (STATIC_BROKER_CONFIG when the file or a flag
set it, DEFAULT_CONFIG otherwise) and its type; its listeners, TLS and SASL settings as the
security module read them (``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``, ``inter.broker.listener.name``, each TLS listener's
``listener.name.<l>.ssl.*``, ...); the Kafka names tools look for that Tributary spells its own
way (``broker.id``, ``log.dirs``, ``zookeeper.connect``); and the log defaults topics inherit under
their broker names (``compression.type``, ``log.cleanup.policy``, ...). A password-like setting
is reported as Kafka reports one: sensitive, its value null.

Sans-IO: a pure function of the loaded config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tributary.broker.config import BrokerConfig, HostPort, known_settings
from tributary.broker.security.config import SecurityConfig
from tributary.broker.topics import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, describe_broker_config

# Kafka's ConfigEntry.ConfigType numbers.
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7
TYPE_PASSWORD = 9

#: Words in a setting's name that make it a secret (Kafka's PASSWORD-typed configs, JAAS).
_SECRET_WORDS = ("password", "secret", "jaas.config", "credential", "token")


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    #: None for a sensitive setting (never sent), and for a setting without a value.
    value: str | None
    source: int
    config_type: int
    sensitive: bool

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT


def is_sensitive(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _attribute(config: BrokerConfig, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return "-1"  # Kafka's "unlimited"/"unset" for the settings that take -1
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path | HostPort):
        return str(value)
    return str(value)


def _type_of(name: str, converter: Callable[[str, Any], Any], value: Any) -> int:
    if is_sensitive(name):
        return TYPE_PASSWORD
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, float):
        return TYPE_DOUBLE
    if isinstance(value, int) or (value is None and converter.__name__.startswith("_int")):
        return TYPE_LONG if name.endswith((".ms", ".bytes")) else TYPE_INT
    return TYPE_STRING


def _entry(name: str, value: Any, given: bool, config_type: int) -> BrokerConfigEntry:
    sensitive = is_sensitive(name)
    unset = value is None and config_type not in (TYPE_INT, TYPE_LONG)  # no "-1" for a string
    return BrokerConfigEntry(
        name=name,
        value=None if sensitive or unset else _text(value),
        source=SOURCE_STATIC_BROKER if given else SOURCE_DEFAULT,
        config_type=config_type,
        sensitive=sensitive,
    )


#: Settings the ``listen``/``advertise`` flags stand for, when no ``listeners`` is given.
_LISTEN_SYNONYMS: dict[str, frozenset[str]] = {
    "listeners": frozenset({"listen"}),
    "advertised.listeners": frozenset({"advertise", "listen"}),
    "listener.security.protocol.map": frozenset({"listen"}),
}


def _security(security: SecurityConfig) -> list[tuple[str, str | None, int]]:
    """(name, effective value, type) of the listener, TLS and SASL settings."""
    listeners = security.listeners
    inter = security.inter_broker
    found: list[tuple[str, str | None, int]] = [
        ("listeners", ",".join(f"{x.name}://{x.bind.host}:{x.bind.port}" for x in listeners), TYPE_STRING),
        ("advertised.listeners", ",".join(f"{x.name}://{x.advertised.host}:{x.advertised.port}" for x in listeners),
         TYPE_STRING),
        ("listener.security.protocol.map", ",".join(f"{x.name}:{x.bind.protocol}" for x in listeners), TYPE_STRING),
        ("inter.broker.listener.name", inter.listener, TYPE_STRING),
        ("sasl.mechanism.inter.broker.protocol", inter.mechanism, TYPE_STRING),
        ("sasl.inter.broker.username", inter.username, TYPE_STRING),
        ("sasl.inter.broker.password", None, TYPE_PASSWORD),
        ("connection.failed.authentication.delay.ms", str(security.failed_authentication_delay_ms), TYPE_INT),
    ]  # fmt: skip
    for listener in listeners:
        prefix = f"listener.name.{listener.name.lower()}."
        if listener.bind.sasl:
            found.append((prefix + "sasl.enabled.mechanisms", ",".join(listener.sasl_mechanisms), TYPE_LIST))
        tls = listener.tls
        if tls is not None:
            found += [
                (prefix + "ssl.keystore.location", str(tls.keystore), TYPE_STRING),
                (prefix + "ssl.key.password", None, TYPE_PASSWORD),
                (prefix + "ssl.truststore.location", None if tls.truststore is None else str(tls.truststore),
                 TYPE_STRING),
                (prefix + "ssl.client.auth", tls.client_auth, TYPE_STRING),
                (prefix + "ssl.endpoint.identification.algorithm", tls.endpoint_identification, TYPE_STRING),
            ]  # fmt: skip
    return found


def broker_config_entries(config: BrokerConfig) -> list[BrokerConfigEntry]:
    """Every setting, by name."""
    given = config.given
    entries: dict[str, BrokerConfigEntry] = {}
    for name, (path, converter) in known_settings().items():
        value = _attribute(config, path)
        entries[name] = _entry(name, value, name in given, _type_of(name, converter, value))
    # Kafka's names for what Tributary calls otherwise, so Kafka's tools find them.
    kafka_names: dict[str, tuple[str, str, int]] = {
        "broker.id": ("id", str(config.broker_id), TYPE_INT),
        "log.dirs": ("data-dir", str(config.data_dir), TYPE_STRING),
        "zookeeper.connect": ("zookeeper", config.zookeeper, TYPE_STRING),
    }
    for name, (ours, value, config_type) in kafka_names.items():
        entries.setdefault(name, _entry(name, value, ours in given, config_type))
    for name, value, config_type in _security(config.security):
        was_given = name in given or (name in _LISTEN_SYNONYMS and _LISTEN_SYNONYMS[name] & given != frozenset())
        entries.setdefault(name, _entry(name, value, was_given, config_type))
    # The log defaults topics inherit, under their broker names (those not read as settings).
    for log_default in describe_broker_config(config.log):
        entries.setdefault(
            log_default.name,
            BrokerConfigEntry(
                log_default.name, log_default.value, log_default.source, log_default.config_type, sensitive=False
            ),
        )
    return [entries[name] for name in sorted(entries)]
