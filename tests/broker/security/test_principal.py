import pytest

from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal


def test_principal_text_round_trips_and_keeps_colons_in_the_name() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    principal = KafkaPrincipal.parse("User:CN=a:b,O=x")
    assert principal == KafkaPrincipal("User", "CN=a:b,O=x")
    assert KafkaPrincipal.parse(str(principal)) == principal


@pytest.mark.parametrize("text", ["alice", ":alice", "User:", ""])
def test_a_principal_without_type_or_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a principal"):
        KafkaPrincipal.parse(text)
