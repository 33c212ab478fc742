"""The egress broker's decision, fed resolution results (SPEC §2 `egress`).

Private, link-local and metadata refusals are checked here, addresses in and
allow/refuse out, so no test ever sends a packet to such an address.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.config import load_config
from gate.errors import ConfigError
from gate.policy import fingerprint
from gate.sandbox.egress import (
    UNSAFE_ALLOW_NETS_ENV,
    UNSAFE_HOSTS_ENV,
    EgressStartError,
    record_from_log,
    unsafe_overrides,
)
from gate.sandbox.egress_broker import (
    Allowed,
    Refused,
    _dns_question,
    _split_absolute_http,
    decide,
    normalize_host,
    parse_entry,
)

ALLOW = ("index.example.org:443", "files.example.org:443", "[2001:db8::10]:443", "8.8.4.4:443")
PUBLIC = "93.184.215.14"


def reason(host: str, port: int, resolved: list[str], allowlist: tuple[str, ...] = ALLOW) -> str:
    d = decide(host, port, resolved, allowlist)
    return "allowed" if isinstance(d, Allowed) else d.reason


@pytest.mark.parametrize(
    ("host", "port", "resolved", "expected"),
    [
        ("index.example.org", 443, [PUBLIC], "allowed"),
        ("INDEX.Example.ORG.", 443, [PUBLIC], "allowed"),  # case, trailing dot
        ("index.example.org", 80, [PUBLIC], "not-allowed"),  # port must match too
        ("sub.index.example.org", 443, [PUBLIC], "not-allowed"),  # no implicit subdomains
        ("example.org", 443, [PUBLIC], "not-allowed"),
        ("93.184.215.14", 443, [PUBLIC], "not-allowed"),  # IP literal not listed
        ("8.8.4.4", 443, ["8.8.4.4"], "allowed"),  # IP literal listed exactly
        ("[2001:db8::10]", 443, ["2001:db8::10"], "private-address"),  # documentation net
        ("index.example.org", 443, [], "unresolved"),
        ("index.example.org", 443, ["10.0.0.5"], "private-address"),
        ("index.example.org", 443, ["192.168.1.1"], "private-address"),
        ("index.example.org", 443, ["172.16.0.1"], "private-address"),
        ("index.example.org", 443, ["127.0.0.1"], "private-address"),
        ("index.example.org", 443, ["::1"], "private-address"),
        ("index.example.org", 443, ["169.254.1.1"], "private-address"),
        ("index.example.org", 443, ["fe80::1%eth0"], "private-address"),
        ("index.example.org", 443, ["224.0.0.1"], "private-address"),
        ("index.example.org", 443, ["0.0.0.0"], "private-address"),  # noqa: S104
        ("index.example.org", 443, ["240.0.0.1"], "private-address"),
        ("index.example.org", 443, ["100.64.0.1"], "private-address"),  # CGNAT
        ("index.example.org", 443, ["fc00::1"], "private-address"),
        ("index.example.org", 443, ["::ffff:10.0.0.1"], "private-address"),  # v4-mapped
        ("index.example.org", 443, ["::ffff:169.254.169.254"], "metadata-address"),
        ("index.example.org", 443, ["2002:a00:1::"], "private-address"),  # 6to4 of 10.0.0.1
        ("index.example.org", 443, ["64:ff9b::a9fe:a9fe"], "metadata-address"),  # NAT64
        ("index.example.org", 443, ["169.254.169.254"], "metadata-address"),
        ("index.example.org", 443, ["fd00:ec2::254"], "metadata-address"),
        ("index.example.org", 443, ["100.100.100.200"], "metadata-address"),
        ("index.example.org", 443, ["168.63.129.16"], "metadata-address"),  # public, Azure
        # DNS rebinding: one bad address among good ones refuses the whole attempt
        ("index.example.org", 443, [PUBLIC, "127.0.0.1"], "private-address"),
        ("index.example.org", 443, ["not-an-ip"], "unresolved"),
        ("metadata.google.internal", 80, [PUBLIC], "metadata-name"),
        ("metadata.google.internal.", 80, [PUBLIC], "metadata-name"),
        ("localhost", 443, ["127.0.0.1"], "metadata-name"),
        ("db.corp.internal", 443, [PUBLIC], "metadata-name"),
        ("index.example.org", 0, [PUBLIC], "bad-port"),
        ("index.example.org", 70000, [PUBLIC], "bad-port"),
        ("bad host", 443, [PUBLIC], "bad-host"),
        ("127.1", 443, ["127.0.0.1"], "bad-host"),  # shorthand IPv4 in disguise
        ("2130706433", 443, ["127.0.0.1"], "bad-host"),
        ("0x7f.1", 443, ["127.0.0.1"], "bad-host"),
        ("*.example.org", 443, [PUBLIC], "bad-host"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_decide(host: str, port: int, resolved: list[str], expected: str) -> None:
    assert reason(host, port, resolved) == expected


def test_allowed_connects_only_to_the_checked_addresses() -> None:
    d = decide(
        "index.example.org", 443, [PUBLIC, PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], ALLOW
    )
    assert d == Allowed((PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"))


def test_refusal_says_why() -> None:
    d = decide("index.example.org", 443, ["10.1.2.3"], ALLOW)
    assert isinstance(d, Refused)
    assert d.detail == "index.example.org: 10.1.2.3 is a private address"


def test_unsafe_allow_nets_exempt_only_private_not_metadata_or_loopback() -> None:
    nets = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("169.254.0.0/16"))
    assert isinstance(decide("index.example.org", 443, ["10.0.0.5"], ALLOW, nets), Allowed)
    meta = decide("index.example.org", 443, ["169.254.169.254"], ALLOW, nets)
    assert isinstance(meta, Refused)
    assert meta.reason == "metadata-address"
    loop = decide(
        "index.example.org", 443, ["127.0.0.1"], ALLOW, (ipaddress.ip_network("127.0.0.0/8"),)
    )
    assert isinstance(loop, Refused)


@given(st.ip_addresses())
def test_no_non_global_address_is_ever_allowed(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    d = decide("index.example.org", 443, [str(ip)], ALLOW)
    if isinstance(d, Allowed):
        assert ip.is_global
        assert not ip.is_private
        assert not ip.is_multicast


@given(st.text(max_size=40), st.integers(min_value=-5, max_value=70000))
def test_decide_is_total(host: str, port: int) -> None:
    assert isinstance(decide(host, port, [PUBLIC], ALLOW), (Allowed, Refused))


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("index.example.org:443", ("index.example.org", 443)),
        ("Index.Example.org.:443", ("index.example.org", 443)),
        ("[2001:DB8::1]:443", ("2001:db8::1", 443)),
        ("10.0.0.1:8080", ("10.0.0.1", 8080)),
    ],
)
def test_parse_entry(entry: str, expected: tuple[str, int]) -> None:
    assert parse_entry(entry) == expected


@pytest.mark.parametrize(
    "entry",
    [
        "index.example.org",
        "index.example.org:0",
        "index.example.org:65536",
        "index.example.org:044",
        "*.example.org:443",
        "2001:db8::1:443",
        "metadata.google.internal:80",
        "localhost:8080",
        "127.1:80",
        ":443",
        "bad_-.host:443",
    ],
)
def test_parse_entry_refuses(entry: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 — the message is checked via config below
        parse_entry(entry)


def test_normalize_host() -> None:
    assert normalize_host("[::FFFF:10.0.0.1]") == "::ffff:a00:1"
    assert normalize_host("a" * 64 + ".org") is None


def _config(egress: str, where: str = "check") -> bytes:
    check = "  - name: u\n    network: setup\n    setup: pip install x\n"
    if where == "check":
        check += f"    egress: {egress}\n"
        return f"version: 1\nchecks:\n{check}".encode()
    return f"version: 1\ndefaults:\n  egress: {egress}\nchecks:\n{check}".encode()


def test_config_takes_egress_per_check_and_defaults() -> None:
    config = load_config(_config('["index.example.org:443"]'), source="c.yml")
    assert config.checks[0].limits.egress == ("index.example.org:443",)
    assert config.policy.egress == (("u", ("index.example.org:443",)),)
    defaulted = load_config(_config('["a.example.org:443"]', "defaults"), source="c.yml")
    assert defaulted.checks[0].limits.egress == ("a.example.org:443",)


@pytest.mark.parametrize(
    ("egress", "where", "key", "expected"),
    [
        ('["index.example.org:99999"]', "check", "checks[0].egress[0]", "a port from 1 to 65535"),
        ('["*.example.org:443"]', "check", "checks[0].egress[0]", "host:port"),
        ('["ok.org:443", "x.org"]', "defaults", "defaults.egress[1]", "host:port"),
        (
            '["metadata.google.internal:80"]',
            "check",
            "checks[0].egress[0]",
            "metadata and internal names are always refused",
        ),
        ('"index.example.org:443"', "check", "checks[0].egress", "type array"),
    ],
)
def test_config_egress_errors_name_the_key(
    egress: str, where: str, key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_config(egress, where), source="c.yml")
    assert key in str(e.value)
    assert expected in str(e.value)


def test_policy_fingerprint_covers_the_allowlist() -> None:
    a = load_config(_config('["index.example.org:443"]'), source="c.yml").policy
    b = load_config(_config('["index.example.org:8443"]'), source="c.yml").policy
    none = load_config(b"version: 1\nchecks:\n  - {name: u, test: 'true'}\n", source="c.yml").policy
    assert len({fingerprint(a), fingerprint(b), fingerprint(none)}) == 3


def test_unsafe_overrides_come_only_from_the_environment(caplog: pytest.LogCaptureFixture) -> None:
    assert not unsafe_overrides({}).active
    o = unsafe_overrides(
        {UNSAFE_ALLOW_NETS_ENV: "10.9.0.0/16", UNSAFE_HOSTS_ENV: "R.test=10.9.0.2"}
    )
    assert o.allow_nets == ("10.9.0.0/16",)
    assert o.hosts == (("r.test", ("10.9.0.2",)),)
    assert "UNSAFE" in caplog.text
    with pytest.raises(EgressStartError):
        unsafe_overrides({UNSAFE_ALLOW_NETS_ENV: "not-a-net"})


def test_repository_config_cannot_enable_unsafe_overrides() -> None:
    for key in ("unsafe_allow_nets", "unsafe_egress", "PROOFGATE_UNSAFE_EGRESS_ALLOW_NETS"):
        text = f"version: 1\ndefaults:\n  {key}: [10.0.0.0/8]\nchecks:\n  - {{name: u, test: x}}\n"
        with pytest.raises(ConfigError):
            load_config(text.encode(), source="c.yml")


def test_record_from_log_digests_the_full_list() -> None:
    lines = [
        {"kind": "connect", "host": "a.org", "port": 443, "decision": "allowed", "bytes_up": 5},
        {
            "kind": "http",
            "host": "b.org",
            "port": 80,
            "decision": "refused",
            "reason": "not-allowed",
        },
    ] * 80
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    data += b'{"kind":"summary","written":160,"dropped":7}\n'
    record = record_from_log(data)
    assert len(record.attempts) == 160
    assert record.dropped == 7
    assert not record.complete  # an attempt the broker only counted is not recorded
    summary = record.to_dict()
    assert summary["attempts"] == 167
    assert summary["truncated"] is True
    assert record_from_log(data).sha256 == record.sha256
    assert record_from_log(data.replace(b"b.org", b"c.org")).sha256 != record.sha256


def test_record_from_a_garbled_log_is_incomplete() -> None:
    record = record_from_log(b'{"kind":"connect"}\nnot json\n')
    assert not record.complete
    assert [a.kind for a in record.attempts] == ["connect", "unreadable"]


def test_absolute_uri_with_userinfo_is_refused() -> None:
    assert _split_absolute_http("http://allowed.org@evil.org/")[0] is None
    assert _split_absolute_http("http://a.org:8080/x") == (("a.org", 8080), "/x")
    assert _split_absolute_http("https://a.org/")[0] is None


def test_dns_question_is_bounded() -> None:
    query = (
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
        + b"\x03abc\x03org\x00"
        + b"\x00\x01\x00\x01"
    )
    assert _dns_question(query)[:2] == ("abc.org", 1)
    assert _dns_question(b"\x00" * 12 + b"\xc0\x0c")[1] is None  # compression pointer
    assert _dns_question(b"\x00" * 12 + b"\x3f" + b"a" * 10)[1] is None  # truncated


def test_markdown_lists_attempts_and_escapes_hostile_names() -> None:
    from gate.receipt.render import to_markdown

    hostile = "a|b`c<script>.exfil.test"
    check = {
        "name": "deps",
        "phases": [],
        "egress": [
            {"kind": "connect", "host": "index.example.org", "port": 443, "allowed": True},
            {"kind": "dns", "host": hostile, "port": 53, "allowed": False, "reason": "dns-refused"},
        ],
        "egress_summary": {"attempts": 2, "refused": 1, "sha256": "ab" * 32, "complete": True},
    }
    markdown = to_markdown({"verdict": "FAILED", "checks": [check]})
    section = markdown.split("## Egress", 1)[1]
    assert "2 attempt(s), 1 refused" in section
    assert "`index.example.org:443`" in section
    assert "**refused** (dns-refused)" in section
    # inside a code span: no HTML, and the table cell cannot be split by the name
    assert "``a\\|b`c<script>.exfil.test:53``" in section


def test_python_package_index_alias_expands_to_pips_own_default_hosts() -> None:
    """`egress: [python-package-index]` lets a config reach pip's default index without
    spelling its hosts; the expansion comes from the installed pip, on port 443 only."""
    from pip._internal.models.index import PyPI

    from gate.config import load_config

    doc = (
        b"version: 1\nimage: img\nchecks:\n  - name: unit\n    network: setup\n"
        b"    egress: [python-package-index, 'mirror.example.org:8443']\n"
        b"    setup: ['true']\n    test: ['true']\n"
    )
    config = load_config(doc, source="proofgate.yml")
    assert config.checks[0].limits.egress == (
        f"{PyPI.netloc}:443",
        f"{PyPI.file_storage_domain}:443",
        "mirror.example.org:8443",
    )
