"""The broker's security settings: listeners, TLS, SASL and the inter-broker client.

Kafka's names, in the broker's TOML file. Per-listener overrides use Kafka's prefix,
``listener.name.<listener>.<key>`` (``listener.name.internal.ssl.client.auth = "required"``),
for the TLS keys and ``sasl.enabled.mechanisms``. Secrets (``ssl.key.password``,
``sasl.inter.broker.password``) may be ``${file:PATH}`` or ``${env:NAME}``
(:mod:`protocol.secrets`) and are never shown. Everything is checked here, before anything
binds: a missing key file or an unknown mechanism is one line naming the setting.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tributary.broker.security.listeners import (
    PLAINTEXT,
    Endpoint,
    ListenerError,
    advertised_endpoints,
    parse_endpoints,
    parse_protocol_map,
)
from tributary.broker.security.ssl_principal import PrincipalMapper, PrincipalMappingError
from tributary.broker.security.tls import TlsConfigError, client_context, server_context
from tributary.protocol.sasl.plain import MECHANISM as PLAIN
from tributary.protocol.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from tributary.protocol.secrets import Secret, SecretError, resolve_secret

#: What sasl.enabled.mechanisms may name. (Kafka's default, GSSAPI, is not offered here.)
SASL_MECHANISMS = (*SCRAM_MECHANISMS, PLAIN)
#: SCRAM only by default: PLAIN sends the password itself, and is enabled on purpose.
DEFAULT_SASL_MECHANISMS = tuple(SCRAM_MECHANISMS)
DEFAULT_INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
CLIENT_AUTH = ("none", "requested", "required")
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: Kafka's default delay before a connection that failed authentication is closed.
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100

#: Keys a listener may override with ``listener.name.<listener>.<key>``.
LISTENER_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
)
#: Every key this module reads (besides the listener.name.* overrides).
KEYS = (
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.inter.broker.username",
    "sasl.inter.broker.password",
    "connection.failed.authentication.delay.ms",
    *LISTENER_KEYS,
)
_PREFIX = "listener.name."


class SecurityConfigError(ValueError):
    """A security setting that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's TLS: its own certificate and what it trusts."""

    keystore: Path
    key_password: Secret | None
    truststore: Path | None
    client_auth: str
    versions: tuple[ssl.TLSVersion, ssl.TLSVersion]
    principal_mapper: PrincipalMapper
    #: "https" checks the peer's host name when this broker is the client (Kafka's default).
    endpoint_identification: str
    #: Built (and so checked) when the settings are read.
    server_context: ssl.SSLContext = field(compare=False, repr=False)
    client_context: ssl.SSLContext = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    bind: Endpoint
    advertised: Endpoint
    tls: TlsSettings | None
    sasl_mechanisms: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.bind.name


@dataclass(frozen=True, slots=True)
class InterBrokerClient:
    """How this broker connects to the others (replica fetchers): the inter-broker listener's
    protocol, and for SASL this broker's own user."""

    listener: str
    protocol: str
    mechanism: str
    username: str | None
    password: Secret | None
    tls: TlsSettings | None


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    listeners: tuple[ListenerConfig, ...]
    inter_broker: InterBrokerClient
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
    #: Whether the one listener came from ``listen``/``advertise`` rather than ``listeners``.
    from_listen_flag: bool = False

    def listener(self, name: str) -> ListenerConfig:
        return next(listener for listener in self.listeners if listener.name == name)

    @property
    def advertised(self) -> tuple[Endpoint, ...]:
        return tuple(listener.advertised for listener in self.listeners)

    @classmethod
    def plaintext(cls, host: str, port: int, advertised_host: str, advertised_port: int) -> SecurityConfig:
        """One PLAINTEXT listener: what ``--listen``/``--advertise`` give."""
        bind = Endpoint(PLAINTEXT, PLAINTEXT, host, port)
        advertised = Endpoint(PLAINTEXT, PLAINTEXT, advertised_host, advertised_port)
        listener = ListenerConfig(bind, advertised, None, DEFAULT_SASL_MECHANISMS)
        client = InterBrokerClient(PLAINTEXT, PLAINTEXT, DEFAULT_INTER_BROKER_MECHANISM, None, None, None)
        return cls((listener,), client, from_listen_flag=True)


def is_security_key(key: str) -> bool:
    if key in KEYS:
        return True
    if key.startswith(_PREFIX):
        _, _, rest = key[len(_PREFIX) :].partition(".")
        return rest in LISTENER_KEYS
    return False


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise SecurityConfigError(f"setting '{name}' must be a string, got {value!r}")
    return value.strip()


def _list(name: str, value: Any) -> tuple[str, ...]:
    items = [_string(name, v) for v in value] if isinstance(value, list) else _string(name, value).split(",")
    return tuple(item.strip() for item in items if item.strip())


class _Lookup:
    """A listener's view of the settings: its ``listener.name.<l>.`` overrides first."""

    def __init__(self, settings: Mapping[str, Any], listener: str) -> None:
        self._settings = settings
        self._prefix = f"{_PREFIX}{listener.lower()}."

    def get(self, key: str) -> tuple[str, Any] | None:
        for name in (self._prefix + key, key):
            if name in self._settings:
                return name, self._settings[name]
        return None


def _file(name: str, value: Any) -> Path:
    path = Path(_string(name, value))
    if not path.is_file():
        raise SecurityConfigError(f"setting '{name}': {path} is not a readable file")
    return path


def _tls_settings(lookup: _Lookup, listener: str) -> TlsSettings:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        found = lookup.get(key)
        if found is not None and _string(*found).upper() != "PEM":
            raise SecurityConfigError(f"setting '{found[0]}': only PEM files are supported, got {found[1]!r}")
    keystore = lookup.get("ssl.keystore.location")
    if keystore is None:
        raise SecurityConfigError(
            f"listener {listener} uses TLS: set 'ssl.keystore.location' (a PEM file with the certificate chain and "
            "private key)"
        )
    password = lookup.get("ssl.key.password")
    truststore = lookup.get("ssl.truststore.location")
    client_auth = lookup.get("ssl.client.auth")
    auth = _string(*client_auth).lower() if client_auth is not None else "none"
    if auth not in CLIENT_AUTH:
        raise SecurityConfigError(f"setting '{client_auth and client_auth[0]}' must be one of {', '.join(CLIENT_AUTH)}")
    if auth != "none" and truststore is None:
        raise SecurityConfigError(
            f"listener {listener}: ssl.client.auth = {auth} needs 'ssl.truststore.location' (the CA bundle that "
            "signs client certificates)"
        )
    protocols = lookup.get("ssl.enabled.protocols")
    names = _list(*protocols) if protocols is not None else tuple(TLS_VERSIONS)
    unknown = [n for n in names if n not in TLS_VERSIONS]
    if unknown or not names:
        raise SecurityConfigError(
            f"setting '{protocols and protocols[0]}': {', '.join(unknown) or 'nothing'} is not among "
            f"{', '.join(TLS_VERSIONS)}"
        )
    versions = sorted(TLS_VERSIONS[n] for n in names)
    rules = lookup.get("ssl.principal.mapping.rules")
    try:
        mapper = PrincipalMapper(_string(*rules) if rules is not None else "DEFAULT")
    except PrincipalMappingError as exc:
        raise SecurityConfigError(str(exc)) from None
    identification = lookup.get("ssl.endpoint.identification.algorithm")
    algorithm = _string(*identification).lower() if identification is not None else "https"
    if algorithm not in ("https", ""):
        raise SecurityConfigError(
            f'setting \'{identification and identification[0]}\' must be "https" (check host names) or "" (do not)'
        )
    try:
        key_password = resolve_secret(*password) if password is not None else None
    except SecretError as exc:
        raise SecurityConfigError(str(exc)) from None
    keystore_path = _file(*keystore)
    truststore_path = _file(*truststore) if truststore is not None else None
    bounds = (versions[0], versions[-1])
    try:
        server = server_context(
            keystore=keystore_path,
            key_password=key_password,
            truststore=truststore_path,
            client_auth=auth,
            versions=bounds,
            listener=listener,
        )
        client = client_context(
            keystore=keystore_path,
            key_password=key_password,
            truststore=truststore_path,
            versions=bounds,
            check_hostname=algorithm == "https",
            what=f"listener {listener} (as a client of other brokers)",
        )
    except TlsConfigError as exc:
        raise SecurityConfigError(str(exc)) from None
    return TlsSettings(
        keystore=keystore_path,
        key_password=key_password,
        truststore=truststore_path,
        client_auth=auth,
        versions=bounds,
        principal_mapper=mapper,
        endpoint_identification=algorithm,
        server_context=server,
        client_context=client,
    )


def _mechanisms(lookup: _Lookup) -> tuple[str, ...]:
    found = lookup.get("sasl.enabled.mechanisms")
    if found is None:
        return DEFAULT_SASL_MECHANISMS
    names = tuple(n.upper() for n in _list(*found))
    unknown = [n for n in names if n not in SASL_MECHANISMS]
    if unknown or not names:
        raise SecurityConfigError(
            f"setting '{found[0]}': {', '.join(unknown) or 'nothing'} is not among {', '.join(SASL_MECHANISMS)}"
        )
    return names


def _check_overrides(settings: Mapping[str, Any], names: set[str]) -> None:
    for key in settings:
        if key.startswith(_PREFIX):
            listener, _, rest = key[len(_PREFIX) :].partition(".")
            if listener.upper() not in names:
                raise SecurityConfigError(f"setting '{key}' names listener {listener!r}, which is not in 'listeners'")
            if rest not in LISTENER_KEYS:
                raise SecurityConfigError(f"setting '{key}': {rest!r} cannot be set per listener")


def _delay(settings: Mapping[str, Any]) -> int:
    value = settings.get("connection.failed.authentication.delay.ms", DEFAULT_FAILED_AUTHENTICATION_DELAY_MS)
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise SecurityConfigError(f"setting 'connection.failed.authentication.delay.ms' must be >= 0, got {value!r}")
    return int(value)


def load_security(
    settings: Mapping[str, Any], listen: tuple[str, int] | None, advertise: tuple[str, int] | None
) -> SecurityConfig:
    """The security settings of ``settings`` (flat Kafka keys). ``listen``/``advertise`` are the
    legacy one-listener flags: one PLAINTEXT listener when ``listeners`` is not set."""
    try:
        protocols = parse_protocol_map(
            "listener.security.protocol.map",
            _string("listener.security.protocol.map", settings.get("listener.security.protocol.map", "")),
        )
        if "listeners" in settings:
            if listen is not None or advertise is not None:
                raise SecurityConfigError(
                    "give either 'listeners' (with 'advertised.listeners') or --listen/--advertise, not both"
                )
            binds = parse_endpoints("listeners", _string("listeners", settings["listeners"]), protocols)
            given = settings.get("advertised.listeners")
            advertised_given = (
                parse_endpoints("advertised.listeners", _string("advertised.listeners", given), protocols)
                if given is not None
                else None
            )
            advertised = advertised_endpoints(binds, advertised_given)
        else:
            if listen is None:
                raise SecurityConfigError(
                    "setting 'listen' is missing (give --listen HOST:PORT, or 'listeners' in the config file)"
                )
            if "advertised.listeners" in settings:
                raise SecurityConfigError("'advertised.listeners' needs 'listeners'")
            if advertise is None and listen[0] in ("0.0.0.0", "::", ""):
                raise SecurityConfigError(
                    "setting 'advertise' is missing: 'listen' binds every address, so clients need a name"
                )
            binds = (Endpoint(PLAINTEXT, PLAINTEXT, *listen),)
            advertised = (Endpoint(PLAINTEXT, PLAINTEXT, *(advertise or listen)),)
    except ListenerError as exc:
        raise SecurityConfigError(str(exc)) from None
    names = {b.name for b in binds}
    _check_overrides(settings, names)
    listeners = []
    for bind, adv in zip(binds, advertised, strict=True):
        lookup = _Lookup(settings, bind.name)
        tls = _tls_settings(lookup, bind.name) if bind.tls else None
        listeners.append(ListenerConfig(bind, adv, tls, _mechanisms(lookup) if bind.sasl else ()))
    return SecurityConfig(
        tuple(listeners),
        _inter_broker(settings, tuple(listeners)),
        _delay(settings),
        from_listen_flag="listeners" not in settings,
    )


def _inter_broker(settings: Mapping[str, Any], listeners: tuple[ListenerConfig, ...]) -> InterBrokerClient:
    names = [listener.name for listener in listeners]
    given = settings.get("inter.broker.listener.name")
    if given is not None:
        name = _string("inter.broker.listener.name", given).upper()
        if name not in names:
            raise SecurityConfigError(
                f"setting 'inter.broker.listener.name': {name} is not one of the listeners ({', '.join(names)})"
            )
    elif len(names) == 1:
        name = names[0]
    elif PLAINTEXT in names:
        name = PLAINTEXT  # Kafka's default: security.inter.broker.protocol = PLAINTEXT
    else:
        raise SecurityConfigError(
            f"setting 'inter.broker.listener.name' is missing: which of {', '.join(names)} do brokers use "
            "between themselves?"
        )
    listener = next(listener for listener in listeners if listener.name == name)
    mechanism = _string(
        "sasl.mechanism.inter.broker.protocol",
        settings.get("sasl.mechanism.inter.broker.protocol", DEFAULT_INTER_BROKER_MECHANISM),
    ).upper()
    username: str | None = None
    password: Secret | None = None
    if listener.bind.sasl:
        if mechanism not in listener.sasl_mechanisms:
            raise SecurityConfigError(
                f"setting 'sasl.mechanism.inter.broker.protocol': {mechanism} is not enabled on listener {name} "
                f"(sasl.enabled.mechanisms: {', '.join(listener.sasl_mechanisms)})"
            )
        user, secret = settings.get("sasl.inter.broker.username"), settings.get("sasl.inter.broker.password")
        if user is None or secret is None:
            raise SecurityConfigError(
                f"the inter-broker listener {name} uses SASL: set 'sasl.inter.broker.username' and "
                "'sasl.inter.broker.password' (this broker's own user; the password as ${file:PATH} or ${env:NAME})"
            )
        username = _string("sasl.inter.broker.username", user)
        try:
            password = resolve_secret("sasl.inter.broker.password", secret)
        except SecretError as exc:
            raise SecurityConfigError(str(exc)) from None
    return InterBrokerClient(name, listener.bind.protocol, mechanism, username, password, listener.tls)


__all__ = [
    "CLIENT_AUTH",
    "DEFAULT_SASL_MECHANISMS",
    "KEYS",
    "LISTENER_KEYS",
    "SASL_MECHANISMS",
    "InterBrokerClient",
    "ListenerConfig",
    "SecurityConfig",
    "SecurityConfigError",
    "TlsSettings",
    "is_security_key",
    "load_security",
]
