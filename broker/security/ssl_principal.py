"""The principal of a TLS client: its certificate's subject, mapped by ``ssl.principal.mapping.rules``.

Kafka's syntax (KIP-371), rules tried in order, comma-separated::

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT

``RULE:pattern/replacement/[L|U]`` applies when the pattern matches the whole distinguished
name; the replacement may use ``$1``... (a back reference beyond the pattern's groups stays
literal, as in Kafka), and ``L``/``U`` lower- or upper-cases the result. ``DEFAULT`` gives the
full DN. No matching rule refuses the connection. The DN is written as RFC 4514 (successor of
RFC 2253, which Java's ``X500Principal.getName()`` writes): most specific attribute first,
``CN=alice,OU=eng,O=corp,C=US``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# Kafka's grammar of one rule and of the list (SslPrincipalMapper.RULE_PATTERN / RULE_SPLITTER).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class PrincipalMappingError(ValueError):
    """Rules that do not parse, or a DN no rule maps."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        groups = self.pattern.groups if self.pattern is not None else 0

        def reference(ref: re.Match[str]) -> str:
            digits = ref.group(1)
            if digits.startswith("0"):
                return ref.group(0)
            index = int(digits)
            # Kafka (after NiFi): $123 with fewer groups is $12 then "3", then $1 then "23".
            while index > groups and index >= 10:
                index //= 10
            if index > groups:
                return ref.group(0)
            rest = digits[len(str(index)) :]
            return (match.group(index) or "") + rest

        return _BACK_REFERENCE.sub(reference, self.replacement)


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.text = rules
        self._rules = _parse(rules)

    def name(self, dn: str) -> str:
        for rule in self._rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise PrincipalMappingError(f"no rule of ssl.principal.mapping.rules ({self.text}) applies to {dn!r}")


def _parse(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    stripped = text.strip()
    pieces = [m.group(1) for m in _SPLITTER.finditer(stripped) if m.group(1) is not None]
    for piece in pieces:
        match = _PARSER.match(piece)
        if match is None or match.end() != len(piece):
            raise PrincipalMappingError(f"invalid rule in ssl.principal.mapping.rules: {piece!r}")
        if match.group(1) is not None:
            rules.append(_Rule(None))
        elif match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise PrincipalMappingError(
                    f"invalid pattern in ssl.principal.mapping.rules {piece!r}: {exc}"
                ) from None
            rules.append(_Rule(pattern, match.group(4), match.group(6) or ""))
        elif match.group(7):
            raise PrincipalMappingError(f"invalid rule in ssl.principal.mapping.rules: {piece!r}")
    if not rules:
        raise PrincipalMappingError(f"ssl.principal.mapping.rules holds no rule: {text!r}")
    return rules


def subject_dn(certificate_der: bytes) -> str:
    """The certificate subject as RFC 4514 text (``CN=alice,O=corp``)."""
    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()


__all__ = ["PrincipalMapper", "PrincipalMappingError", "subject_dn"]
