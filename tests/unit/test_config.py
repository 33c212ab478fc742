"""SPEC §2: configuration parsing, schema errors that name file, key path, expected, got."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.config import load_config, parse_memory, schema
from gate.errors import ConfigError
from gate.model import Command, Decision, Phase

SPEC_EXAMPLE = b"""
version: 1
image: python:3.12-slim
defaults:
  timeout: 900
  network: none
  memory: 2g
  cpus: 2
  pids: 512
  user: null
  cap_add: []
  env: {}
checks:
  - name: unit
    setup: "pip install -e .[test]"
    build: ["python -m compileall -q src"]
    test:  [["python", "-m", "pytest", "-q"]]
    junit: reports/junit.xml
policy:
  protected: [".github/**", "Dockerfile"]
  deny: ["**/*.pem"]
  budgets: {files: 300, lines: 20000}
  rules: {binary-added: allow}
"""


def test_spec_example_parses_exactly() -> None:
    config = load_config(SPEC_EXAMPLE, source="proofgate.yml")
    assert config.image == "python:3.12-slim"
    (check,) = config.checks
    assert check.name == "unit"
    assert check.junit == "reports/junit.xml"
    assert dict(check.phases) == {
        Phase.SETUP: (Command(argv=("/bin/sh", "-c", "pip install -e .[test]")),),
        Phase.BUILD: (Command(argv=("/bin/sh", "-c", "python -m compileall -q src")),),
        Phase.TEST: (Command(argv=("python", "-m", "pytest", "-q")),),
    }
    assert check.limits.memory == 2 * 1024**3
    assert check.limits.network == "none"
    assert config.policy.rules == (("binary-added", Decision.ALLOW),)
    assert config.policy.budgets.files == 300


def test_check_overrides_defaults_per_key() -> None:
    config = load_config(
        b"version: 1\ndefaults: {timeout: 10, pids: 64, env: {A: '1'}}\n"
        b"checks:\n - {name: a, test: x, timeout: 20}\n - {name: b, test: y}\n",
        source="f.yml",
    )
    a, b = config.checks
    assert (a.limits.timeout, a.limits.pids, a.limits.env) == (20, 64, (("A", "1"),))
    assert (b.limits.timeout, b.limits.pids) == (10, 64)


def test_default_image_is_a_registry_image() -> None:
    config = load_config(b"version: 1\nchecks: [{name: a, test: x}]\n", source="f.yml")
    assert config.image == "python:3.12-slim"


@pytest.mark.parametrize(
    ("text", "key_path", "fragment"),
    [
        (b"version: 1\nchecks: []\n", "checks", "at least 1 item"),
        (
            b"version: 1\nchecks: [{name: a, test: x, timeout: 15m}]\n",
            "checks[0].timeout",
            "integer",
        ),
        (b"version: 1\nchecks: [{name: a}]\n", "checks[0]", "at least one phase"),
        (b"version: 1\nchekcs: [{name: a, test: x}]\n", "chekcs", "unknown key"),
        (b"version: 2\nchecks: [{name: a, test: x}]\n", "version", "one of 1"),
        (b"version: 1\nchecks: [{name: a, test: x, memory: 2t}]\n", "checks[0].memory", "suffix"),
        (b"version: 1\nchecks: [{name: a, test: [[]]}]\n", "checks[0].test[0]", "argv"),
        (b"version: 1\nchecks: [{name: a, test: x, network: host}]\n", "checks[0].network", "none"),
        (
            b"version: 1\nchecks: [{name: a, test: x, cap_add: [SYS_ADMN]}]\n",
            "checks[0].cap_add[0]",
            "SYS_ADMIN",
        ),
        (
            b"version: 1\nchecks: [{name: a, test: x, junit: ../x.xml}]\n",
            "checks[0].junit",
            "relative",
        ),
        (
            b"version: 1\nchecks: [{name: a, test: x}, {name: a, test: y}]\n",
            "checks[1].name",
            "unique",
        ),
        (
            b"version: 1\nchecks: [{name: a, test: x, pids: 100000000000}]\n",
            "checks[0].pids",
            "at most",
        ),
        (b"version: 1\nimage: 'UPPER:case'\nchecks: [{name: a, test: x}]\n", "image", "name[:tag]"),
        (
            b"version: 1\npolicy: {rules: {no-such-rule: hold}}\nchecks: [{name: a, test: x}]\n",
            "policy.rules.no-such-rule",
            "built-in rule",
        ),
        (
            b"version: 1\ndefaults: {user: '2000000'}\nchecks: [{name: a, test: x}]\n",
            "defaults.user",
            "proofgate's own",
        ),
        (
            b"version: 1\nchecks: [{name: a, test: x, user: '1000:2000000'}]\n",
            "checks[0].user",
            "2000000",
        ),
    ],
    ids=[
        "no-checks",
        "timeout-string",
        "no-phase",
        "typo-key",
        "bad-version",
        "bad-memory",
        "empty-argv",
        "bad-network",
        "unknown-capability",
        "junit-escapes",
        "duplicate-check",
        "huge-pids",
        "bad-image",
        "unknown-rule",
        "protected-uid",
        "protected-gid",
    ],
)
def test_bad_config_names_key_path(text: bytes, key_path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            text, source="repo/.github/proofgate.yml", known_rules=frozenset({"binary-added"})
        )
    message = str(info.value)
    assert message.startswith("repo/.github/proofgate.yml: ")
    assert info.value.key_path == key_path
    assert fragment in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"version: 1\nchecks: [{name: a, test: x}]\nchecks: []\n", "duplicate key 'checks'"),
        (b"a: &x [1]\nb: *x\n", "anchors or aliases"),
        (b"version: 1\nchecks: [\n", "valid YAML"),
        (b"- 1\n- 2\n", "mapping at the top level"),
        (b"\xff\xfe", "UTF-8"),
        (b"version: 1\n1: x\nchecks: [{name: a, test: x}]\n", "non-string key"),
    ],
    ids=["duplicate-key", "alias", "syntax", "not-a-mapping", "not-utf8", "int-key"],
)
def test_hostile_yaml_is_refused(text: bytes, fragment: str) -> None:
    with pytest.raises(ConfigError, match="f.yml") as info:
        load_config(text, source="f.yml")
    assert fragment in str(info.value)


def test_memory_units() -> None:
    assert parse_memory("512m") == 512 * 1024**2
    assert parse_memory("1G") == 1024**3
    assert parse_memory("4096") == 4096


def test_schema_ships_with_the_package() -> None:
    assert schema()["title"].startswith("proofgate configuration")  # type: ignore[union-attr]


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)
)
_yamlish = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "version",
                    "image",
                    "checks",
                    "name",
                    "test",
                    "setup",
                    "build",
                    "timeout",
                    "memory",
                    "policy",
                    "rules",
                    "env",
                    "defaults",
                    "junit",
                    "x",
                    "pids",
                ]
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yamlish)
def test_any_yaml_shape_is_accepted_or_named(doc: object) -> None:
    """Bad input: every document is either a valid config or a ConfigError naming a key
    path; never another exception."""
    text = yaml.safe_dump(doc).encode()
    try:
        config = load_config(text, source="fuzz.yml")
    except ConfigError as e:
        message = str(e)
    else:
        assert config.checks
        json.dumps([c.name for c in config.checks])
        return
    assert message.startswith("fuzz.yml")
