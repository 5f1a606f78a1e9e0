#!/usr/bin/env python3
"""Ansible dynamic inventory read from a Tributary topology file.

    export TRIBUTARY_TOPOLOGY=deploy/examples/production.toml
    ansible-playbook -i ansible/inventories/topology.py ansible/site.yml
    ansible/inventories/topology.py --topology FILE --list | --host HOST | --static

The topology (deploy/appliance/topology.py) is the one description of the appliance; this script only
projects it onto hosts, so the inventory cannot drift from what `tributary up` runs:

- one group per datacenter, holding every host that runs something there (named after the
  datacenter with characters other than letters, digits and '_' made '_': `us-east` is `us_east`);
- one group per role, `zookeeper`, `broker`, `mirror` and `loader`, with the hosts the role
  deploys to;
- per host, the role variables that list what it runs: `zookeeper_instances`,
  `broker_instances`, `mirror_instances`, `loader_jobs` (see each role's defaults/main.yml),
  and `tributary_datacenter`.

Security (deploy/appliance/links.py and principals.py, the same functions `tributary up` uses):
each broker item lists its cluster's listeners with their ports and what its TLS, SASL and
authorizer settings are; each mirror item says how each side connects (the source over the
cluster's remote listener when it is in another datacenter), each load item how it connects;
and the host of each cluster's first broker gets `broker_cluster_principals`: the users and
ACLs the broker role writes into the cluster's ZooKeeper before the brokers start.

Placement: ZooKeeper servers and brokers run where the topology says; every instance of a
mirror runs on its `host`, which is in the aggregate (target) cluster's datacenter (consume
remotely, produce locally); each load runs on a broker host of the datacenter marked
`hadoop = true` (a host of the load's own cluster when that cluster lives there). Hosts on
loopback addresses get `ansible_connection: local`.

`--static` prints the same inventory as a static YAML file: ansible/inventories/example/hosts.yml
is that output for deploy/examples/production.toml (tests/deploy/test_inventory.py keeps them equal).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run from a checkout without the package installed: the repository root holds `deploy`.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

try:
    from tributary.deploy.appliance.links import Link, load_datacenter, load_link, mirror_links
    from tributary.deploy.appliance.principals import cluster_security
    from tributary.deploy.appliance.security_files import uses_named_listeners
    from tributary.deploy.appliance.topology import Cluster, Topology, TopologyError, load_topology
except ImportError as missing:  # Ansible ran us with a Python that lacks the package's dependencies.
    checkout_python = REPO_ROOT / ".venv" / "bin" / "python"
    if checkout_python.exists() and Path(sys.executable).absolute() != checkout_python.absolute():
        os.execv(checkout_python, [str(checkout_python), __file__, *sys.argv[1:]])
    sys.exit(f"topology.py: {missing}: run it with the Python of Tributary's virtualenv (or activate it)")

ENV_VAR = "TRIBUTARY_TOPOLOGY"
ROLE_GROUPS = ("zookeeper", "broker", "mirror", "loader")
# Host variable that lists what each role group's hosts run.
ROLE_VARIABLES = {
    "zookeeper": "zookeeper_instances",
    "broker": "broker_instances",
    "mirror": "mirror_instances",
    "loader": "loader_jobs",
}


class InventoryError(ValueError):
    """The topology cannot be placed on hosts; the message says why."""


def group_name(datacenter: str) -> str:
    """Ansible group names are Python identifiers: `us-east` becomes group `us_east`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", datacenter)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Hosts:
    """Hosts in first-seen order, each in exactly one datacenter, with its role variables."""

    def __init__(self) -> None:
        self.datacenter: dict[str, str] = {}
        self.variables: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def add(self, host: str, datacenter: str, role: str, item: dict[str, Any], what: str) -> None:
        known = self.datacenter.setdefault(host, datacenter)
        if known != datacenter:
            raise InventoryError(f"host {host} would be in datacenters '{known}' and '{datacenter}' ({what})")
        self.variables.setdefault(host, {}).setdefault(ROLE_VARIABLES[role], []).append(item)


def _zookeeper_servers(topology: Topology, hosts: _Hosts) -> None:
    # Clusters of one datacenter may share an ensemble: deploy each server once, named after
    # the first cluster that uses it.
    seen: set[tuple[str, ...]] = set()
    for cluster in topology.clusters.values():
        ensemble = cluster.zookeeper.servers
        if ensemble in seen:
            continue
        seen.add(ensemble)
        for myid, server in enumerate(ensemble, start=1):
            host, _, port = server.rpartition(":")
            item = {
                "name": cluster.name,
                "host": host,
                "port": int(port),
                "myid": myid,
                "data_dir": str(cluster.zookeeper.data_dir),
                "ensemble": list(ensemble),
            }
            hosts.add(host, cluster.datacenter, "zookeeper", item, f"zookeeper of cluster '{cluster.name}'")


def _link_security(topology: Topology, link: Link) -> dict[str, Any]:
    """How a mirror side or a load connects: the listener's protocol, and the login on SASL."""
    return {
        "protocol": link.protocol,
        "user": link.user if link.listener.sasl else None,
        "mechanism": topology.security.sasl_mechanism if link.listener.sasl else None,
    }


def _broker_security(topology: Topology, cluster: Cluster) -> dict[str, Any]:
    """What every broker of the cluster is configured with besides its topic defaults."""
    plan = cluster_security(topology, cluster)
    return {
        "named_listeners": uses_named_listeners(cluster),
        "tls": cluster.tls,
        "sasl_mechanism": topology.security.sasl_mechanism if cluster.authenticates else None,
        "inter_broker_user": plan.inter_broker_user,
        "authorizer": plan.authorizer,
        "super_users": list(plan.super_users),
    }


def _principals(topology: Topology, hosts: _Hosts) -> None:
    """The users and ACLs of each cluster that authenticates, on its first broker's host."""
    for cluster in topology.clusters.values():
        plan = cluster_security(topology, cluster)
        if not plan.users:
            continue
        item = {
            "cluster": cluster.name,
            "zookeeper": cluster.zookeeper_connect,
            "zookeeper_servers": list(cluster.zookeeper.servers),
            "mechanism": plan.mechanism,
            "users": list(plan.users),
            # Each: the options of one `tributary acls add` (kafka-acls').
            "grants": [grant.acls_arguments() for grant in plan.grants],
        }
        first = cluster.brokers[0].host
        hosts.variables.setdefault(first, {}).setdefault("broker_cluster_principals", []).append(item)


def _brokers(topology: Topology, hosts: _Hosts) -> None:
    for cluster in topology.clusters.values():
        security = _broker_security(topology, cluster)
        for broker in cluster.brokers:
            item: dict[str, Any] = {
                "cluster": cluster.name,
                "datacenter": cluster.datacenter,
                "id": broker.id,
                "host": broker.host,
                "port": broker.port,
                "data_dir": str(broker.data_dir),
                "zookeeper": cluster.zookeeper_connect,
                "metrics_port": broker.metrics_port,
                "settings": dict(cluster.topic_defaults),
                # The first is the local listener, on `port` (replication and local clients).
                "listeners": [
                    {"name": x.name, "protocol": x.protocol, "port": broker.ports.get(x.name, broker.port)}
                    for x in cluster.listeners
                ],
                **security,
            }
            hosts.add(broker.host, cluster.datacenter, "broker", item, f"broker {broker.id} of '{cluster.name}'")


def _mirrors(topology: Topology, hosts: _Hosts) -> None:
    for mirror in topology.mirrors.values():
        target = topology.clusters[mirror.target]
        ports = mirror.metrics_ports()
        source_link, target_link = mirror_links(topology, mirror)
        for index in range(mirror.instances):
            item = {
                "alias": mirror.alias,
                "index": index + 1,
                "host": mirror.host,
                # The source across datacenters on its remote listener, the target locally.
                "source": source_link.bootstrap,
                "target": target_link.bootstrap,
                "source_security": _link_security(topology, source_link),
                "target_security": _link_security(topology, target_link),
                "topics": mirror.topics,
                "exclude": mirror.exclude,
                "group": mirror.group,
                "metrics_port": ports[index] if ports else None,
                # Topics named after these are copies already: never mirror them back (active-active).
                "known_aliases": sorted(m.alias for m in topology.mirrors.values() if m.alias != mirror.alias),
            }
            hosts.add(mirror.host, target.datacenter, "mirror", item, f"mirror '{mirror.alias}'")


def _load_host(topology: Topology, cluster: Cluster, datacenter: str) -> tuple[str, str]:
    """The host and datacenter a load runs in: where Hadoop is reachable."""
    candidates = [cluster] if cluster.datacenter == datacenter else topology.clusters_in(datacenter)
    if not candidates:
        raise InventoryError(
            f"load on cluster '{cluster.name}': datacenter '{datacenter}' (hadoop = true) has no cluster whose "
            "hosts could run it"
        )
    return candidates[0].brokers[0].host, datacenter


def _loads(topology: Topology, hosts: _Hosts) -> None:
    for load in topology.loads.values():
        cluster = topology.clusters[load.cluster]
        host, datacenter = _load_host(topology, cluster, load_datacenter(topology, load))
        link = load_link(topology, load)
        item = {
            "name": load.name,
            "cluster": load.cluster,
            "bootstrap": link.bootstrap,
            "security": _link_security(topology, link),
            "output": load.output,
            "schedule": load.schedule,
            "master": load.master,
            "topics": load.topics,
            "metrics_file": str(load.metrics_file),
            "summary_json": str(load.summary_json),
        }
        hosts.add(host, datacenter, "loader", item, f"load '{load.name}'")


def build_inventory(topology: Topology) -> dict[str, Any]:
    """The inventory in Ansible's dynamic-inventory JSON shape (`--list`)."""
    groups: dict[str, str] = {}
    for datacenter in topology.datacenters:
        group = group_name(datacenter)
        if group in {*ROLE_GROUPS, "all", "ungrouped"} or group in groups:
            raise InventoryError(f"datacenter '{datacenter}' would be inventory group '{group}', which is taken")
        groups[group] = datacenter
    hosts = _Hosts()
    _zookeeper_servers(topology, hosts)
    _brokers(topology, hosts)
    _principals(topology, hosts)
    _mirrors(topology, hosts)
    _loads(topology, hosts)

    inventory: dict[str, Any] = {"_meta": {"hostvars": {}}}
    for group, datacenter in groups.items():
        inventory[group] = {"hosts": [h for h, dc in hosts.datacenter.items() if dc == datacenter]}
    for role, variable in ROLE_VARIABLES.items():
        inventory[role] = {"hosts": [h for h, v in hosts.variables.items() if variable in v]}
    inventory["all"] = {"children": [*groups, *ROLE_GROUPS]}
    for host, variables in hosts.variables.items():
        hostvars: dict[str, Any] = {"tributary_datacenter": hosts.datacenter[host], **variables}
        if _is_loopback(host):
            hostvars["ansible_connection"] = "local"
        inventory["_meta"]["hostvars"][host] = hostvars
    return inventory


def static_inventory(inventory: dict[str, Any], source: str) -> str:
    """The same inventory as a static YAML file: datacenter groups carry the hosts and their
    variables, role groups name the hosts only."""
    import yaml  # noqa: PLC0415  (Ansible's own dependency; only this mode needs it)

    hostvars = inventory["_meta"]["hostvars"]
    datacenters = [g for g in inventory["all"]["children"] if g not in ROLE_GROUPS]
    children: dict[str, Any] = {}
    for datacenter in datacenters:
        children[datacenter] = {"hosts": {h: hostvars[h] for h in inventory[datacenter]["hosts"]}}
    for role in ROLE_GROUPS:
        children[role] = {"hosts": {h: None for h in inventory[role]["hosts"]}}

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

        # Indent list items under their key, as yamllint (and so ansible-lint) wants.
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)

    # `host:` rather than `host: null` for the role groups' bare host names.
    _Dumper.add_representer(type(None), lambda dumper, _: dumper.represent_scalar("tag:yaml.org,2002:null", ""))

    body = yaml.dump({"all": {"children": children}}, Dumper=_Dumper, sort_keys=False, width=120)
    header = (
        "---\n"
        f"# Generated from {source} by ansible/inventories/topology.py --static; do not edit by hand.\n"
        "# One group per datacenter (hosts and what they run), one group per role (zookeeper, broker,\n"
        "# mirror, loader). tests/deploy/test_inventory.py checks it equals the dynamic inventory.\n"
    )
    return header + body


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Ansible inventory from a Tributary topology file.")
    parser.add_argument("--topology", metavar="FILE.toml", help=f"topology file (default: ${ENV_VAR})")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true", help="the whole inventory as JSON (Ansible's call)")
    mode.add_argument("--host", metavar="HOST", help="one host's variables as JSON")
    mode.add_argument("--static", action="store_true", help="the inventory as a static YAML file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    path = args.topology or os.environ.get(ENV_VAR)
    if not path:
        print(f"topology.py: name the topology file with --topology or ${ENV_VAR}", file=sys.stderr)
        return 2
    try:
        inventory = build_inventory(load_topology(path))
    except (TopologyError, InventoryError) as exc:
        print(f"topology.py: {path}: {exc}", file=sys.stderr)
        return 1
    if args.static:
        sys.stdout.write(static_inventory(inventory, args.topology or os.environ.get(ENV_VAR, path)))
    elif args.host is not None:
        print(json.dumps(inventory["_meta"]["hostvars"].get(args.host, {}), indent=2))
    else:
        print(json.dumps(inventory, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
