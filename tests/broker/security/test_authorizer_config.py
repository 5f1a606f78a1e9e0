"""authorizer.class.name, super.users and allow.everyone.if.no.acl.found, as a broker's TOML file has
them; a broker asked for an authorizer it does not have refuses to start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tributary.broker.config import ConfigError, load
from tributary.broker.security.authorizer_config import ACL_AUTHORIZER, STANDARD_AUTHORIZER
from tributary.broker.security.principal import KafkaPrincipal

REQUIRED = {"id": 1, "listen": "127.0.0.1:9092", "data-dir": "/tmp/d", "zookeeper": "127.0.0.1:2181"}


def test_no_authorizer_by_default() -> None:
    config = load(REQUIRED).authorizer
    assert not config.enabled
    assert config.super_users == frozenset()
    assert config.allow_everyone_if_no_acl_found is False


@pytest.mark.parametrize("name", [ACL_AUTHORIZER, STANDARD_AUTHORIZER])
def test_kafkas_acl_authorizers_from_toml(tmp_path: Path, name: str) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        f'authorizer.class.name = "{name}"\n'
        'super.users = "User:admin; User:CN=broker-1,O=dc1 ;"\n'
        "allow.everyone.if.no.acl.found = true\n"
    )
    config = load(REQUIRED, toml).authorizer
    assert config.enabled and config.class_name == name
    assert config.super_users == {KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "CN=broker-1,O=dc1")}
    assert config.allow_everyone_if_no_acl_found is True


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"authorizer.class.name": "com.example.MyAuthorizer"}, "'com.example.MyAuthorizer' is not supported"),
        ({"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"}, "is not supported"),
        ({"super.users": "admin"}, "setting 'super.users': not a principal: 'admin'"),
        ({"allow.everyone.if.no.acl.found": "yes"}, "must be true or false"),
        ({"authorizer.class.name": 5}, "setting 'authorizer.class.name' must be a string"),
    ],
)
def test_bad_settings_are_refused_naming_them(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({**REQUIRED, **settings})


def test_a_broker_refuses_to_start_with_an_authorizer_it_does_not_have(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        'authorizer.class.name = "org.apache.ranger.authorization.kafka.authorizer.RangerKafkaAuthorizer"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "broker", "--id", "1", "--listen", "127.0.0.1:1",
         "--data-dir", str(tmp_path / "data"), "--zookeeper", "127.0.0.1:1", "--config", str(toml)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result
    assert "RangerKafkaAuthorizer' is not supported" in result.stderr
    assert ACL_AUTHORIZER in result.stderr
    assert not (tmp_path / "data").exists()
