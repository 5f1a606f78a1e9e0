"""The first users and ACLs of a cluster, straight into its ZooKeeper before any broker runs:
`tributary users --zookeeper set` and `tributary acls --zookeeper` (kafka-acls'
`--authorizer-properties zookeeper.connect=`), each safe to run again (what the Ansible broker
role and `tributary up` do on every run), saying whether it changed anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.deploy.cli_runner import assert_one_line_error, tributary
from tests.fixtures.zookeeper import ZooKeeperHandle


def test_acls_added_in_zookeeper_in_kafkas_layout_once(
    zookeeper: ZooKeeperHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    # A chroot nobody created yet, as before the first broker of a cluster starts.
    hosts = zookeeper.hosts + "/tributary/east"
    add = ["acls", "--zookeeper", hosts, "add", "--allow-principal", "User:mirror-east", "--operation", "Read",
           "--operation", "Describe", "--topic", "east.", "--resource-pattern-type", "prefixed"]  # fmt: skip
    first = tributary(capsys, *add)
    assert first.status == 0, first.err
    assert first.out.rstrip().endswith("2 of 2 ACLs new in ZooKeeper")
    again = tributary(capsys, *add)
    assert again.status == 0 and again.out.rstrip().endswith("0 of 2 ACLs new in ZooKeeper")
    # kafka-acls' spelling reads the same store.
    listed = tributary(capsys, "acls", "--authorizer-properties", f"zookeeper.connect={hosts}", "list",
                       "--output", "json").json()  # fmt: skip
    assert {(row["name"], row["pattern_type"], row["operation"]) for row in listed} == {
        ("east.", "PREFIXED", "Read"),
        ("east.", "PREFIXED", "Describe"),
    }
    # Kafka's node, and a change notification every running broker follows.
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    try:
        node = json.loads(client.get("/kafka-acl-extended/prefixed/Topic/east.")[0])
        assert {(a["principal"], a["operation"], a["permissionType"]) for a in node["acls"]} == {
            ("User:mirror-east", "Read", "Allow"),
            ("User:mirror-east", "Describe", "Allow"),
        }
        assert client.get_children("/kafka-acl-extended-changes")
    finally:
        client.stop()
        client.close()
    removed = tributary(capsys, "acls", "--zookeeper", hosts, "remove", "--force", "--topic", "east.",
                        "--resource-pattern-type", "prefixed", "--output", "json").json()  # fmt: skip
    assert len(removed) == 2
    assert tributary(capsys, "acls", "--zookeeper", hosts, "list", "--output", "json").json() == []


def test_acls_zookeeper_options_refused_with_one_line(
    zookeeper: ZooKeeperHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = zookeeper.hosts
    assert_one_line_error(
        tributary(capsys, "acls", "--zookeeper", hosts, "--bootstrap", "b:9092", "list"),
        2, "--zookeeper goes without --bootstrap",
    )  # fmt: skip
    assert_one_line_error(
        tributary(capsys, "acls", "--authorizer-properties", "authorizer.class.name=x", "list"),
        2, "only zookeeper.connect is understood",
    )  # fmt: skip
    assert_one_line_error(
        tributary(capsys, "acls", "--zookeeper", hosts, "add", "--allow-principal", "User:x", "--topic", "a/../b"),
        2, "ACL Topic:LITERAL:a/../b",
    )  # fmt: skip
    assert_one_line_error(
        tributary(capsys, "acls", "--zookeeper", "127.0.0.1:1", "list", "--timeout", "1"), 1, "ZooKeeper 127.0.0.1:1"
    )


def test_users_set_again_with_the_same_password_changes_nothing(
    zookeeper: ZooKeeperHandle, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    password = tmp_path / "pw"
    password.write_text("s3cret\n")
    zk = ["users", "--zookeeper", zookeeper.hosts]
    first = tributary(capsys, *zk, "set", "mirror-east", "--password-file", str(password))
    assert first.out.strip() == "set the SCRAM-SHA-512 credential of user 'mirror-east'"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=10)
    try:
        stored = client.get("/config/users/mirror-east")[0]
        second = tributary(capsys, *zk, "set", "mirror-east", "--password-file", str(password))
        assert second.out.strip() == "the SCRAM-SHA-512 credential of user 'mirror-east' already matches: unchanged"
        assert client.get("/config/users/mirror-east")[0] == stored  # not even a new salt
        password.write_text("rotated\n")
        third = tributary(capsys, *zk, "set", "mirror-east", "--password-file", str(password))
        assert third.out.strip() == "set the SCRAM-SHA-512 credential of user 'mirror-east'"
        assert client.get("/config/users/mirror-east")[0] != stored
        # Other iterations: a new credential, even for the same password.
        fourth = tributary(capsys, *zk, "set", "mirror-east", "--password-file", str(password), "--iterations", "8192")
        assert fourth.out.startswith("set the")
    finally:
        client.stop()
        client.close()
