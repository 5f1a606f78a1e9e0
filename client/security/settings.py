"""Client security settings, Kafka's names, librdkafka's spelling first.

=====================================  =============================================================
``security.protocol``                  PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
``sasl.mechanism`` (``sasl.mechanisms``) SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN
``sasl.username``, ``sasl.password``   the SASL user; the password as ``${file:PATH}`` or
                                       ``${env:NAME}`` (:mod:`protocol.secrets`) or literal
``ssl.ca.location``                    PEM bundle of CAs to trust (default: the system's)
``ssl.certificate.location``           this client's certificate (PEM), for listeners that
                                       require one (``ssl.client.auth = required``)
``ssl.key.location``, ``ssl.key.password``  its private key, and the key's passphrase
``ssl.endpoint.identification.algorithm``  ``https`` (default: check the broker's host name
                                       against its certificate) or ``none``
=====================================  =============================================================

Kafka's Java tools take the same settings in Java's spelling; so that an operator's existing
``--command-config`` file works, ``ssl.truststore.location`` (PEM), ``ssl.keystore.location``
(one PEM with the key and the chain) and ``sasl.jaas.config`` (the username and password of
the PLAIN or SCRAM login module) are read too. Settings are checked when read: an unknown key, a
missing file or a SASL protocol without a mechanism is one line naming it.
"""

from __future__ import annotations

import re
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tributary.protocol.sasl.plain import MECHANISM as PLAIN
from tributary.protocol.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from tributary.protocol.secrets import Secret, SecretError, resolve_secret

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = (*SCRAM_MECHANISMS, PLAIN)
#: Every key :func:`security_from_settings` reads.
KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SecuritySettingsError(ValueError):
    """A security setting that cannot be used; the message names it (never a secret)."""


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """How a client connects: PLAINTEXT by default. Picklable (Spark ships it to executors)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_ca_location: Path | None = None
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: Secret | None = None
    #: Check the broker's host name against its certificate (``https``), or not.
    ssl_check_hostname: bool = True
    _context: list[ssl.SSLContext] = field(default_factory=list, compare=False, repr=False)
    _asked: list[bool] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SecuritySettingsError(
                f"security.protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}"
            )
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise SecuritySettingsError(
                    f"security.protocol {self.protocol} needs sasl.mechanism, one of {', '.join(SASL_MECHANISMS)}"
                    + (f" (not {self.sasl_mechanism!r})" if self.sasl_mechanism else "")
                )
            if not self.sasl_username or self.sasl_password is None:
                raise SecuritySettingsError(f"security.protocol {self.protocol} needs sasl.username and sasl.password")
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise SecuritySettingsError("ssl.certificate.location and ssl.key.location go together")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context (made once, then shared by every connection of this config)."""
        if not self._context:
            self._context.append(self._make_context())
        return self._context[0]

    def _make_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            if self.ssl_ca_location is not None:
                context.load_verify_locations(cafile=self.ssl_ca_location)
            else:
                context.load_default_certs()
            if self.ssl_certificate_location is not None:
                context.load_cert_chain(self.ssl_certificate_location, self.ssl_key_location, password=self._passphrase)
        except ssl.SSLError as exc:
            if self._asked:
                given = "is wrong" if self.ssl_key_password is not None else "is not set"
                raise SecuritySettingsError(
                    f"the private key in {self.ssl_key_location} is encrypted and ssl.key.password {given}"
                ) from None
            raise SecuritySettingsError(f"cannot load the TLS certificates or key: {exc.reason or exc}") from None
        except OSError as exc:
            raise SecuritySettingsError(f"cannot read {exc.filename}: {exc.strerror}") from None
        context.check_hostname = self.ssl_check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _passphrase(self) -> str:
        # A callable, never None: OpenSSL would otherwise prompt on the terminal.
        self._asked.append(True)
        return self.ssl_key_password.reveal() if self.ssl_key_password is not None else ""

    def __getstate__(self) -> tuple[Any, ...]:
        # The SSL context is not picklable; the other side makes its own.
        return tuple(getattr(self, f) for f in _FIELDS)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_FIELDS, state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_context", [])
        object.__setattr__(self, "_asked", [])


_FIELDS = tuple(f for f in SecurityConfig.__dataclass_fields__ if not f.startswith("_"))
PLAINTEXT = SecurityConfig()


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SecuritySettingsError(f"setting '{name}' must be a non-empty string, got {value!r}")
    return value.strip()


def _path(name: str, value: Any, base: Path | None) -> Path:
    path = Path(_text(name, value)).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise SecuritySettingsError(f"setting '{name}': {path} is not a readable file")
    return path


def _jaas(value: Any) -> tuple[str | None, str | None]:
    """username and password of ``...LoginModule required username="u" password="p";``."""
    text = _text("sasl.jaas.config", value)
    if "LoginModule" not in text:
        raise SecuritySettingsError("setting 'sasl.jaas.config' names no login module")
    options = {key: raw.replace('\\"', '"').replace("\\\\", "\\") for key, raw in _JAAS_OPTION.findall(text)}
    return options.get("username"), options.get("password")


def security_from_settings(settings: Mapping[str, Any], *, base: Path | None = None) -> SecurityConfig:
    """The security settings among ``settings`` (Kafka's names); others are refused. Relative
    paths are taken from ``base`` (the directory of the file they came from)."""
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        raise SecuritySettingsError(f"unknown security setting '{unknown[0]}' (known: {', '.join(KEYS)})")
    for kind in ("ssl.truststore.type", "ssl.keystore.type"):
        if kind in settings and _text(kind, settings[kind]).upper() != "PEM":
            raise SecuritySettingsError(f"setting '{kind}': only PEM files are supported")
    protocol = _text("security.protocol", settings.get("security.protocol", "PLAINTEXT")).upper()
    mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms"))
    username = settings.get("sasl.username")
    password_value = settings.get("sasl.password")
    if "sasl.jaas.config" in settings:
        jaas_user, jaas_password = _jaas(settings["sasl.jaas.config"])
        username = username if username is not None else jaas_user
        password_value = password_value if password_value is not None else jaas_password
    ca = settings.get("ssl.ca.location", settings.get("ssl.truststore.location"))
    certificate: Any = settings.get("ssl.certificate.location")
    key: Any = settings.get("ssl.key.location")
    if "ssl.keystore.location" in settings:
        # Kafka's PEM keystore: the key and the chain in one file serve as both.
        certificate = key = settings["ssl.keystore.location"]
    algorithm = str(settings.get("ssl.endpoint.identification.algorithm", "https")).strip().lower()
    if algorithm not in ("https", "none", ""):
        raise SecuritySettingsError(
            "setting 'ssl.endpoint.identification.algorithm' must be https (check host names) or none"
        )
    try:
        password = resolve_secret("sasl.password", password_value) if password_value is not None else None
        key_password = (
            resolve_secret("ssl.key.password", settings["ssl.key.password"]) if "ssl.key.password" in settings else None
        )
    except SecretError as exc:
        raise SecuritySettingsError(str(exc)) from None
    return SecurityConfig(
        protocol=protocol,
        sasl_mechanism=_text("sasl.mechanism", mechanism).upper() if mechanism is not None else None,
        sasl_username=_text("sasl.username", username) if username is not None else None,
        sasl_password=password,
        ssl_ca_location=_path("ssl.ca.location", ca, base) if ca is not None else None,
        ssl_certificate_location=_path("ssl.certificate.location", certificate, base) if certificate else None,
        ssl_key_location=_path("ssl.key.location", key, base) if key else None,
        ssl_key_password=key_password,
        ssl_check_hostname=algorithm == "https",
    )


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def read_properties(text: str) -> dict[str, str]:
    """Java's ``.properties``: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    a trailing backslash continuing a line."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            result[line] = ""
            continue
        result[match.group(1)] = match.group(2)
    return result


def read_command_config(path: Path) -> dict[str, Any]:
    """The settings of a ``--command-config`` file: TOML when it ends in ``.toml``, else a Java
    properties file (what Kafka's tools take)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SecuritySettingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix == ".toml":
        try:
            return _flatten(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise SecuritySettingsError(f"{path} is not valid TOML: {exc}") from None
    return dict(read_properties(text))


def load_command_config(path: Path) -> SecurityConfig:
    try:
        return security_from_settings(read_command_config(path), base=path.parent)
    except SecuritySettingsError as exc:
        raise SecuritySettingsError(f"{path}: {exc}") from None


__all__ = [
    "KEYS",
    "PLAINTEXT",
    "PROTOCOLS",
    "SASL_MECHANISMS",
    "SecurityConfig",
    "SecuritySettingsError",
    "load_command_config",
    "read_command_config",
    "read_properties",
    "security_from_settings",
]
