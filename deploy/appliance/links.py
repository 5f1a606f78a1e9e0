"""Which listener each link of the appliance uses, and so over which protocol it runs.

A client connects to a cluster on the cluster's local listener when it runs in the cluster's
own datacenter, and on its remote listener when it runs in another one (topology.py). Where the
appliance's own clients run is fixed by the design, as the Ansible inventory places them:

- a mirror runs in its target's datacenter (consume remotely, produce locally): its source side
  crosses datacenters whenever the source is elsewhere, its target side never does;
- a load runs in the datacenter marked ``hadoop = true`` (else its cluster's): usually the
  aggregate's, so it reads locally;
- the brokers replicate over their local listener (``inter.broker.listener.name``);
- the operator's tools (`status`, `audit`, the console, the demo's producer) use the local
  listener: they run beside the appliance.

So with the usual listeners (a PLAINTEXT local one, a SASL_SSL remote one) exactly the
cross-datacenter links run over SASL_SSL. ``links(topology)`` lists them all, for `tributary up`
and the demo to show, and for the inventory and the launcher to configure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tributary.deploy.appliance.topology import Cluster, Listener, Load, Mirror, Topology
from tributary.deploy.tables import render_table

Role = Literal["mirror source", "mirror target", "load"]


@dataclass(frozen=True)
class Link:
    """One client of a cluster: who, on which listener, and whether it crosses datacenters."""

    role: Role
    #: The mirror's alias or the load's name.
    owner: str
    #: The user it logs in as when the listener authenticates.
    user: str
    cluster: Cluster
    listener: Listener
    cross_datacenter: bool

    @property
    def client(self) -> str:
        """``mirror east (source)``, ``load nightly``."""
        kind, _, side = self.role.partition(" ")
        return f"{kind} {self.owner}" + (f" ({side})" if side else "")

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_on(self.listener.name)

    @property
    def protocol(self) -> str:
        return self.listener.protocol

    def describe(self) -> str:
        """``mirror east (source) -> east on EXTERNAL: SASL_SSL, cross-datacenter``."""
        where = "cross-datacenter" if self.cross_datacenter else "local"
        return f"{self.client} -> {self.cluster.name} on {self.listener.name}: {self.protocol}, {where}"


def listener_for(cluster: Cluster, datacenter: str) -> Listener:
    """The listener a client in ``datacenter`` uses to reach ``cluster``."""
    if datacenter == cluster.datacenter:
        return cluster.local_listener
    return cluster.listener(cluster.remote_listener)


def mirror_user(mirror: Mirror) -> str:
    return f"mirror-{mirror.alias}"


def load_user(load: Load) -> str:
    return f"loader-{load.name}"


def mirror_links(topology: Topology, mirror: Mirror) -> tuple[Link, Link]:
    """The mirror's source and target links; it runs in the target's datacenter."""
    source, target = topology.clusters[mirror.source], topology.clusters[mirror.target]
    here = target.datacenter
    user = mirror_user(mirror)
    return (
        Link("mirror source", mirror.alias, user, source, listener_for(source, here), source.datacenter != here),
        Link("mirror target", mirror.alias, user, target, target.local_listener, False),
    )


def load_datacenter(topology: Topology, load: Load) -> str:
    """Where a load runs: the datacenter that hosts Hadoop access, else its cluster's."""
    return topology.hadoop_datacenter or topology.clusters[load.cluster].datacenter


def load_link(topology: Topology, load: Load) -> Link:
    cluster = topology.clusters[load.cluster]
    here = load_datacenter(topology, load)
    listener = listener_for(cluster, here)
    return Link("load", load.name, load_user(load), cluster, listener, cluster.datacenter != here)


def links_table(topology: Topology) -> str:
    """The links and their protocols, as `tributary up` prints them."""
    rows = [
        (
            link.client,
            link.cluster.name,
            link.listener.name,
            link.protocol,
            "cross-datacenter" if link.cross_datacenter else "local",
            link.user if link.listener.sasl else "-",
        )
        for link in links(topology)
    ]
    return render_table(("link", "cluster", "listener", "protocol", "", "logs in as"), rows)


def links(topology: Topology) -> list[Link]:
    """Every link of the appliance's own clients: each mirror's two sides, then each load."""
    found: list[Link] = []
    for mirror in topology.mirrors.values():
        found += mirror_links(topology, mirror)
    found += [load_link(topology, load) for load in topology.loads.values()]
    return found


__all__ = [
    "Link",
    "links",
    "links_table",
    "listener_for",
    "load_datacenter",
    "load_link",
    "load_user",
    "mirror_links",
    "mirror_user",
]
