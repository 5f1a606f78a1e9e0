"""The TLS and SASL material of an appliance run on one machine, and the settings that use it.

`tributary up` (and so `tributary demo`) keeps it under ``<run_dir>/security``:

    tls/tributary-ca.pem, tributary-ca-key.pem   a throw-away CA (kept across runs while valid)
    tls/<host>-keystore.pem                      each broker host's key and certificate chain
    passwords/<user>.password                    each user's password (random, kept across runs)
    clients/<component>.properties               the mirrors' and loads' client settings
    clients/admin-<cluster>.properties           the operator's, with bootstrap.servers, for
                                                 --command-config of tributary topics, acls, ...

Files holding keys and passwords are readable by their owner only. Every setting has Kafka's
name, and every password is given as ``${file:...}`` so that no command line or config file
shown in a log holds one. What ZooKeeper must hold (users, ACLs) comes from principals.py.
Ansible renders the same settings with its own paths (ansible/roles/*/templates).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tributary.client.security.settings import PLAINTEXT, SecurityConfig, security_from_settings
from tributary.deploy.appliance.links import Link
from tributary.deploy.appliance.pki import CertificateAuthority
from tributary.deploy.appliance.principals import ADMIN_USER, cluster_security
from tributary.deploy.appliance.topology import Broker, Cluster, Listener, Topology

#: Kafka's name of the authorizer the brokers run when the topology asks for ACLs.
AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
#: A CA with less validity left than this is replaced (and every certificate with it).
CA_MARGIN_SECONDS = 7 * 24 * 3600
CA_DAYS = 365


@dataclass(frozen=True)
class SecurityFiles:
    """Where the material of one run directory lives (module docstring); paths only."""

    root: Path

    @classmethod
    def of(cls, topology: Topology) -> SecurityFiles:
        return cls(topology.run_dir / "security")

    @property
    def tls_dir(self) -> Path:
        return self.root / "tls"

    @property
    def ca(self) -> Path:
        return self.tls_dir / "tributary-ca.pem"

    def keystore(self, host: str) -> Path:
        return self.tls_dir / f"{host}-keystore.pem"

    def password(self, user: str) -> Path:
        return self.root / "passwords" / f"{user}.password"

    def client_config(self, name: str) -> Path:
        return self.root / "clients" / f"{name}.properties"


def client_settings(topology: Topology, files: SecurityFiles, listener: Listener, user: str) -> dict[str, str]:
    """Kafka's client settings for ``user`` on ``listener`` (empty for PLAINTEXT)."""
    settings: dict[str, str] = {}
    if listener.protocol == "PLAINTEXT":
        return settings
    settings["security.protocol"] = listener.protocol
    if listener.sasl:
        settings["sasl.mechanism"] = topology.security.sasl_mechanism
        settings["sasl.username"] = user
        settings["sasl.password"] = f"${{file:{files.password(user)}}}"
    if listener.tls:
        settings["ssl.ca.location"] = str(files.ca)
    return settings


def link_security(topology: Topology, link: Link) -> SecurityConfig:
    return security_from_settings(client_settings(topology, SecurityFiles.of(topology), link.listener, link.user))


def tool_security(topology: Topology, cluster: Cluster) -> SecurityConfig:
    """What the operator's tools (status, audit, the demo's producer) connect to a cluster's
    local listener with: nothing on PLAINTEXT, else the admin user's login (its password file
    must exist: `tributary up` wrote it; SecuritySettingsError names it when it does not)."""
    listener = cluster.local_listener
    if listener.protocol == "PLAINTEXT":
        return PLAINTEXT
    return security_from_settings(client_settings(topology, SecurityFiles.of(topology), listener, ADMIN_USER))


def uses_named_listeners(cluster: Cluster) -> bool:
    """Whether the brokers need ``listeners`` in their config, rather than ``--listen`` (one
    PLAINTEXT listener named PLAINTEXT, as before listeners had names)."""
    return cluster.listeners != (Listener("PLAINTEXT", "PLAINTEXT"),)


def broker_settings(topology: Topology, cluster: Cluster, broker: Broker) -> dict[str, object]:
    """Listener, TLS, SASL and authorizer settings of one broker (Kafka's names); empty for a
    cluster with the default listener."""
    if not uses_named_listeners(cluster):
        return {}
    files = SecurityFiles.of(topology)
    names = [listener.name for listener in cluster.listeners]
    addresses = ",".join(f"{name}://{broker.address_on(name)}" for name in names)
    settings: dict[str, object] = {
        "listeners": addresses,
        "advertised.listeners": addresses,
        "listener.security.protocol.map": ",".join(f"{x.name}:{x.protocol}" for x in cluster.listeners),
        "inter.broker.listener.name": cluster.local_listener.name,
    }
    if cluster.tls:
        settings["ssl.keystore.type"] = "PEM"
        settings["ssl.keystore.location"] = str(files.keystore(broker.host))
        settings["ssl.truststore.location"] = str(files.ca)
    plan = cluster_security(topology, cluster)
    if cluster.authenticates:
        settings["sasl.enabled.mechanisms"] = topology.security.sasl_mechanism
    if plan.inter_broker_user is not None:
        settings["sasl.mechanism.inter.broker.protocol"] = topology.security.sasl_mechanism
        settings["sasl.inter.broker.username"] = plan.inter_broker_user
        settings["sasl.inter.broker.password"] = f"${{file:{files.password(plan.inter_broker_user)}}}"
    if plan.authorizer:
        settings["authorizer.class.name"] = AUTHORIZER_CLASS
        settings["super.users"] = ";".join(plan.super_users)
    return settings


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.touch(mode=0o600)
    path.write_text(text)


def write_properties(path: Path, settings: Mapping[str, str]) -> Path:
    """A Kafka client properties file (the form ``--command-config`` takes)."""
    _write_private(path, "".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def _authority(files: SecurityFiles) -> CertificateAuthority:
    """The run directory's CA: the one there if it is valid a while longer, else a new one."""
    try:
        ca = CertificateAuthority.load(files.tls_dir)
    except (OSError, ValueError, TypeError):
        return CertificateAuthority.create(files.tls_dir, days=CA_DAYS)
    return ca if ca.valid_for(CA_MARGIN_SECONDS) else CertificateAuthority.create(files.tls_dir, days=CA_DAYS)


def prepare(topology: Topology) -> SecurityFiles:
    """Write what the topology's listeners need (nothing for one without TLS or SASL): the CA and
    a certificate per broker host, a password per user (an existing one is kept), and the
    operator's admin client settings per cluster. Touches only ``<run_dir>/security``."""
    files = SecurityFiles.of(topology)
    clusters = list(topology.clusters.values())
    if not any(cluster.tls or cluster.authenticates for cluster in clusters):
        return files
    files.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    files.root.chmod(0o700)
    if any(cluster.tls for cluster in clusters):
        ca = _authority(files)
        hosts = sorted({broker.host for cluster in clusters if cluster.tls for broker in cluster.brokers})
        for host in hosts:
            # Issued again on every start: a few milliseconds each, and never close to expiry.
            issued = ca.issue(host, hosts=[host], days=CA_DAYS)
            assert issued.keystore == files.keystore(host)
            issued.certificate.unlink()
            issued.key.unlink()
    users = sorted({user for cluster in clusters for user in cluster_security(topology, cluster).users})
    for user in users:
        path = files.password(user)
        if not path.exists():
            _write_private(path, secrets.token_urlsafe(24) + "\n")
    for cluster in clusters:
        sasl = [listener for listener in cluster.listeners if listener.sasl]
        if sasl:
            # The local listener when it logs in (what the tools use), else the first that does.
            listener = cluster.local_listener if cluster.local_listener.sasl else sasl[0]
            settings = {
                "bootstrap.servers": cluster.bootstrap_on(listener.name),
                **client_settings(topology, files, listener, ADMIN_USER),
            }
            write_properties(files.client_config(f"admin-{cluster.name}"), settings)
    return files


def password_of(files: SecurityFiles, user: str) -> str:
    return files.password(user).read_text().removesuffix("\n")


__all__ = [
    "AUTHORIZER_CLASS",
    "SecurityFiles",
    "broker_settings",
    "client_settings",
    "link_security",
    "password_of",
    "prepare",
    "tool_security",
    "uses_named_listeners",
    "write_properties",
]
