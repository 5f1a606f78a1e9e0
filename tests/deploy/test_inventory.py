"""The Ansible dynamic inventory (ansible/inventories/topology.py) against the sample topologies.

Ansible itself reads both inventories here (`ansible-inventory --list`), so what is compared is
what a playbook would see, not the script's own JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tributary.deploy.appliance.topology import load_topology

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples"
SCRIPT = REPO / "ansible" / "inventories" / "topology.py"
STATIC = REPO / "ansible" / "inventories" / "example" / "hosts.yml"
BIN = Path(sys.executable).parent


def ansible_env(**extra: str) -> dict[str, str]:
    """The virtualenv's bin first on PATH (Ansible and the script's `env python3` find it)."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_NOCOLOR"] = "1"
    env.update(extra)
    return env


def ansible_inventory(source: Path, topology: Path | None = None) -> dict[str, Any]:
    env = ansible_env(**({"TRIBUTARY_TOPOLOGY": str(topology)} if topology else {}))
    result = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(source), "--list"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    # A source Ansible could not parse becomes a warning and an empty inventory: refuse that.
    assert "Unable to parse" not in result.stderr, result.stderr
    inventory: dict[str, Any] = json.loads(result.stdout)
    return inventory


def run_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=env or ansible_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def group_hosts(inventory: dict[str, Any], group: str) -> list[str]:
    return list(inventory.get(group, {}).get("hosts", []))


def test_static_example_is_what_the_dynamic_inventory_says_for_production() -> None:
    static = ansible_inventory(STATIC)
    dynamic = ansible_inventory(SCRIPT, EXAMPLES / "production.toml")
    assert static == dynamic
    # Not two empty inventories agreeing: every host of the topology is there.
    assert len(dynamic["_meta"]["hostvars"]) == 9 + 9 + 1


def test_static_example_is_the_scripts_output() -> None:
    # The committed file is regenerated output, so a change to production.toml without
    # regenerating it fails here (and the command to run is in its header).
    result = run_script("--topology", "deploy/examples/production.toml", "--static")
    assert result.returncode == 0, result.stderr
    assert STATIC.read_text() == result.stdout


def test_production_groups_and_placement() -> None:
    topology = load_topology(EXAMPLES / "production.toml")
    inventory = ansible_inventory(STATIC)
    hostvars = inventory["_meta"]["hostvars"]
    # One group per datacenter ('-' is not allowed in group names), each host in exactly one.
    assert set(group_hosts(inventory, "us_east")) == {
        *(f"zk{i}.use1.example.net" for i in (1, 2, 3)),
        *(f"kafka{i}.use1.example.net" for i in (1, 2, 3)),
    }
    assert set(group_hosts(inventory, "agg")) == {
        *(f"zk{i}.agg.example.net" for i in (1, 2, 3)),
        *(f"kafka{i}.agg.example.net" for i in (1, 2, 3)),
        "mirror1.agg.example.net",
    }
    datacenter_groups = ("us_east", "eu_west", "agg")
    for host in hostvars:
        assert sum(host in group_hosts(inventory, g) for g in datacenter_groups) == 1, host
    # Mirrors are in the aggregate datacenter, every instance with its own metrics port.
    assert group_hosts(inventory, "mirror") == ["mirror1.agg.example.net"]
    mirrors = hostvars["mirror1.agg.example.net"]["mirror_instances"]
    assert [(m["alias"], m["index"], m["metrics_port"]) for m in mirrors] == [
        ("use1", 1, 9400),
        ("use1", 2, 9401),
        ("euw1", 1, 9410),
        ("euw1", 2, 9411),
    ]
    # Across datacenters on the source's EXTERNAL (SASL_SSL) listener; locally on the aggregate's.
    assert mirrors[0]["source"] == topology.clusters["us-east"].bootstrap_on("EXTERNAL")
    assert mirrors[0]["target"] == topology.clusters["aggregate"].bootstrap
    assert mirrors[0]["source_security"] == {
        "protocol": "SASL_SSL",
        "user": "mirror-use1",
        "mechanism": "SCRAM-SHA-512",
    }
    assert mirrors[0]["target_security"] == mirrors[0]["source_security"]
    assert mirrors[0]["exclude"] == "^__.*"
    # The load runs in the datacenter with Hadoop access, on a host of its cluster.
    assert group_hosts(inventory, "loader") == ["kafka1.agg.example.net"]
    (job,) = hostvars["kafka1.agg.example.net"]["loader_jobs"]
    assert job["output"] == "hdfs://namenode.agg.example.net:8020/data/tributary/activity"
    assert job["master"] == "yarn"
    assert job["summary_json"] == "/var/lib/tributary/loads/nightly.json"
    assert job["security"] == {"protocol": "SASL_SSL", "user": "loader-nightly", "mechanism": "SCRAM-SHA-512"}
    # A three-server ensemble: myid follows the order of the servers.
    zk2 = hostvars["zk2.euw1.example.net"]["zookeeper_instances"]
    assert [(z["name"], z["myid"], z["port"]) for z in zk2] == [("eu-west", 2, 2181)]
    assert len(zk2[0]["ensemble"]) == 3
    broker = hostvars["kafka3.use1.example.net"]["broker_instances"][0]
    assert broker["zookeeper"] == topology.clusters["us-east"].zookeeper_connect
    assert broker["settings"]["num.partitions"] == 12
    assert (broker["id"], broker["metrics_port"], broker["datacenter"]) == (3, 9308, "us-east")
    assert broker["listeners"] == [
        {"name": "INTERNAL", "protocol": "PLAINTEXT", "port": 9092},
        {"name": "EXTERNAL", "protocol": "SASL_SSL", "port": 9094},
    ]
    assert (broker["tls"], broker["inter_broker_user"], broker["super_users"]) == (
        True, None, ["User:admin", "User:ANONYMOUS"]
    )  # fmt: skip
    # Each cluster's users and ACLs go with its first broker's host, to be created before it starts.
    principals = hostvars["kafka1.agg.example.net"]["broker_cluster_principals"]
    assert [(p["cluster"], p["users"]) for p in principals] == [
        ("aggregate", ["broker-aggregate", "admin", "mirror-use1", "mirror-euw1", "loader-nightly"])
    ]
    assert principals[0]["grants"][-1][:2] == ["--allow-principal", "User:loader-nightly"]
    assert "broker_cluster_principals" not in hostvars["kafka2.agg.example.net"]
    # Real host names: Ansible connects to them over SSH as usual.
    assert all("ansible_connection" not in v for v in hostvars.values())


def test_local_example_every_component_placed_once() -> None:
    topology = load_topology(EXAMPLES / "local.toml")
    inventory = ansible_inventory(SCRIPT, EXAMPLES / "local.toml")
    hostvars = inventory["_meta"]["hostvars"]
    placed_brokers = sorted(
        (b["cluster"], b["id"], host, b["port"]) for host, v in hostvars.items() for b in v.get("broker_instances", [])
    )
    assert placed_brokers == sorted(
        (c.name, b.id, b.host, b.port) for c in topology.clusters.values() for b in c.brokers
    )
    for cluster in topology.clusters.values():
        for broker in cluster.brokers:
            assert broker.host in group_hosts(inventory, cluster.datacenter)
            assert hostvars[broker.host]["tributary_datacenter"] == cluster.datacenter
    # Both mirrors on the aggregate's host, so in the aggregate datacenter's group.
    assert group_hosts(inventory, "mirror") == ["127.0.3.1"]
    assert "127.0.3.1" in group_hosts(inventory, "aggregate")
    assert {m["alias"] for m in hostvars["127.0.3.1"]["mirror_instances"]} == {"east", "west"}
    assert group_hosts(inventory, "loader") == ["127.0.3.1"]
    assert sorted(group_hosts(inventory, "zookeeper")) == ["127.0.1.1", "127.0.2.1", "127.0.3.1"]
    # Loopback hosts are this machine.
    assert all(v["ansible_connection"] == "local" for v in hostvars.values())


def test_host_mode_answers_one_host() -> None:
    result = run_script("--topology", str(EXAMPLES / "local.toml"), "--host", "127.0.2.2")
    assert result.returncode == 0, result.stderr
    hostvars = json.loads(result.stdout)
    assert [(b["cluster"], b["id"]) for b in hostvars["broker_instances"]] == [("west", 2)]
    assert json.loads(run_script("--topology", str(EXAMPLES / "local.toml"), "--host", "nowhere").stdout) == {}


def test_a_bad_topology_is_one_line_and_a_failure(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    text = (EXAMPLES / "local.toml").read_text().replace('source = "west"', 'source = "wst"')
    bad.write_text(text)
    result = run_script("--list", env=ansible_env(TRIBUTARY_TOPOLOGY=str(bad)))
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "mirror 'west' names unknown cluster 'wst' (line " in line

    missing = run_script("--list", env={k: v for k, v in ansible_env().items() if k != "TRIBUTARY_TOPOLOGY"})
    assert missing.returncode == 2
    assert "TRIBUTARY_TOPOLOGY" in missing.stderr


def test_a_host_in_two_datacenters_is_refused(tmp_path: Path) -> None:
    # The west mirror placed on an east broker's host: that host cannot be in both groups.
    clash = tmp_path / "clash.toml"
    text = (EXAMPLES / "local.toml").read_text()
    head, _, tail = text.partition("[mirrors.west]")
    clash.write_text(head + "[mirrors.west]" + tail.replace('host = "127.0.3.1"', 'host = "127.0.1.1"', 1))
    result = run_script("--topology", str(clash), "--list")
    assert result.returncode == 1
    assert "host 127.0.1.1 would be in datacenters 'east' and 'aggregate' (mirror 'west')" in result.stderr


def test_a_topology_without_listeners_deploys_plaintext_as_before(tmp_path: Path) -> None:
    # deploy/examples/local.toml as it was before listeners had names: no listeners, no ports,
    # no [security]. Every broker gets one PLAINTEXT listener (rendered as listen/advertise),
    # no users or ACLs are made, and the mirrors and the load connect in plain text.
    text = (EXAMPLES / "local.toml").read_text()
    text = re.sub(r"^listeners = .*\n", "", text, flags=re.MULTILINE)
    text = re.sub(r" ports = \{ EXTERNAL = \d+ \},", "", text)
    text = re.sub(r"^\[security\]\n(?:[a-z_]+ = .*\n)+", "", text, flags=re.MULTILINE)
    plain = tmp_path / "plain.toml"
    plain.write_text(text)
    assert not re.search(r"^(listeners|\[security\])|EXTERNAL = ", text, re.MULTILINE)
    topology = load_topology(plain)
    hostvars = ansible_inventory(SCRIPT, plain)["_meta"]["hostvars"]
    brokers = [b for v in hostvars.values() for b in v.get("broker_instances", [])]
    assert len(brokers) == sum(len(c.brokers) for c in topology.clusters.values())
    for broker in brokers:
        assert broker["listeners"] == [{"name": "PLAINTEXT", "protocol": "PLAINTEXT", "port": broker["port"]}]
        assert (broker["named_listeners"], broker["tls"], broker["sasl_mechanism"]) == (False, False, None)
        assert (broker["inter_broker_user"], broker["authorizer"]) == (None, False)
    assert not any("broker_cluster_principals" in v for v in hostvars.values())
    plaintext = {"protocol": "PLAINTEXT", "user": None, "mechanism": None}
    for mirror in hostvars["127.0.3.1"]["mirror_instances"]:
        assert mirror["source"] == topology.clusters[mirror["alias"]].bootstrap
        assert mirror["source_security"] == mirror["target_security"] == plaintext
    (job,) = hostvars["127.0.3.1"]["loader_jobs"]
    assert (job["bootstrap"], job["security"]) == (topology.clusters["aggregate"].bootstrap, plaintext)
