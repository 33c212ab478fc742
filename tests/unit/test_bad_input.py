"""Bad input at the command line: what a user sees for garbage receipts and configs.

`proofgate verify RECEIPT --key PUB` on random bytes, truncated JSON, wrong base64, a
payload over the size limit, or a valid envelope with a mutated field exits 1 with one
`proofgate: verify failed: <reason>` line, never a traceback. `proofgate policy --config
FILE` on random YAML exits 2 with a `proofgate:` line naming the file and, for a mapping,
the key path; or accepts the file and decides (0/11/12/13). The library-level properties
live in test_receipt_tamper.py and test_config.py; these go through `cli.main`.

`TRIED` counts the inputs fed in, reported by the last test (`pytest -rP`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate import receipt
from gate.faces import cli
from gate.receipt import MAX_RECEIPT_BYTES
from tests.assets import sample
from tests.gitutil import commit, make_repo, repo_dir

TRIED: Counter[str] = Counter()
TRUSTED = sample.key("trusted")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# each config example captures real git evidence (a private object store): fewer of them
CONFIG_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _envelope() -> bytes:
    statement = receipt.build_statement(
        sample.predicate(),
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=sample.HEAD_TREE,
    )
    return receipt.sign(receipt.serialize(statement), TRUSTED)


ENVELOPE = _envelope()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the trusted public key; files are written per example."""
    d = tmp_path_factory.mktemp("bad-input")
    (d / "trusted.pub").write_bytes(receipt.public_pem(TRUSTED.public_key()))
    return d


def _main(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue()


def _verify_refuses(work: Path, data: bytes, kind: str, *, may_accept: bool = False) -> None:
    TRIED[f"receipt: {kind}"] += 1
    path = work / "receipt.json"
    path.write_bytes(data)
    code, err = _main(["verify", str(path), "--key", str(work / "trusted.pub")])
    assert "Traceback" not in err, err
    if may_accept and code == 0:
        return
    assert code == 1, (code, err)
    lines = [line for line in err.splitlines() if line.startswith("proofgate: verify failed: ")]
    assert len(lines) == 1, err
    assert len(lines[0]) > len("proofgate: verify failed: "), err


def test_the_unmutated_receipt_verifies(work: Path) -> None:
    """The baseline every mutation departs from is accepted: the property can fail."""
    path = work / "good.json"
    path.write_bytes(ENVELOPE)
    assert _main(["verify", str(path), "--key", str(work / "trusted.pub")])[0] == 0


@given(st.binary(max_size=4096))
@SETTINGS
def test_random_bytes_are_refused(work: Path, data: bytes) -> None:
    _verify_refuses(work, data, "random bytes")


@given(st.integers(min_value=0, max_value=len(ENVELOPE) - 2))
@SETTINGS
def test_truncated_receipts_are_refused(work: Path, cut: int) -> None:
    _verify_refuses(work, ENVELOPE[:cut], "truncated JSON")


B64_NOISE = st.text(alphabet="ABCabc012+/=-_!*. \n\u00e9", min_size=1, max_size=200)


@given(field=st.sampled_from(["payload", "sig"]), noise=B64_NOISE, splice=st.booleans())
@SETTINGS
def test_wrong_base64_is_refused(work: Path, field: str, noise: str, splice: bool) -> None:
    env = json.loads(ENVELOPE)
    target = env if field == "payload" else env["signatures"][0]
    original = target[field]
    target[field] = original[: len(original) // 2] + noise if splice else noise
    if target[field] == original:
        return
    _verify_refuses(work, json.dumps(env).encode(), "wrong base64")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=15,
)

ENVELOPE_FIELDS = ["payloadType", "payload", "signatures", "sig", "keyid", "extra", "drop"]
DROPPABLE = ["payloadType", "payload", "signatures"]


@given(field=st.sampled_from(ENVELOPE_FIELDS), value=json_values)
@SETTINGS
def test_envelopes_with_a_mutated_field_are_refused(work: Path, field: str, value: object) -> None:
    env = json.loads(ENVELOPE)
    match field:
        case "sig" | "keyid":
            env["signatures"][0][field] = value
        case "extra":
            env["unexpected"] = value
        case "drop":
            del env[DROPPABLE[len(json.dumps(value)) % len(DROPPABLE)]]
        case _:
            env[field] = value
    # the keyid is only a hint: a different string keyid may still verify
    _verify_refuses(work, json.dumps(env).encode(), "mutated envelope", may_accept=field == "keyid")


PREDICATE_FIELDS = ["verdict", "head", "base", "patch", "proven_tree", "journal", "checks"]


@given(field=st.sampled_from(PREDICATE_FIELDS), value=json_values)
@SETTINGS
def test_statements_mutated_after_signing_are_refused(
    work: Path, field: str, value: object
) -> None:
    """The payload is rewritten and the old signature kept."""
    env = json.loads(ENVELOPE)
    statement = json.loads(base64.b64decode(env["payload"]))
    if statement["predicate"].get(field) == value:
        return
    statement["predicate"][field] = value
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    _verify_refuses(work, json.dumps(env).encode(), "mutated statement")


def test_a_receipt_over_the_size_limit_is_refused(work: Path) -> None:
    env = json.loads(ENVELOPE)
    env["payload"] += "A" * (MAX_RECEIPT_BYTES + 1 - len(ENVELOPE) + 64)
    data = json.dumps(env).encode()
    assert len(data) > MAX_RECEIPT_BYTES
    _verify_refuses(work, data, "huge payload")


def test_a_receipt_that_is_not_a_file_is_refused(work: Path) -> None:
    # SPEC §5: 1 for anything that is not a valid receipt; 2 is for usage errors
    code, err = _main(["verify", str(work), "--key", str(work / "trusted.pub")])
    assert code == 1, err
    assert "Traceback" not in err
    assert err.startswith("proofgate: ")


# --- configuration through `proofgate policy --config` ---------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = make_repo(tmp_path_factory.mktemp("bad-config"))
    base = commit(r, {b"a.txt": b"1\n"})
    commit(r, {b"a.txt": b"2\n"}, branch="pr", parent=base)
    return repo_dir(r)


VALID: dict[str, object] = {
    "version": 1,
    "image": "proofgate/cleanroom:latest",
    "defaults": {"timeout": 60, "memory": "128m", "pids": 64, "network": "none"},
    "checks": [{"name": "unit", "test": [["python3", "-m", "pytest"]], "junit": "r.xml"}],
    "policy": {"protected": ["infra/**"], "budgets": {"files": 10}},
}
KNOWN_KEYS = [
    "version", "image", "defaults", "checks", "policy", "name", "setup", "build", "test",
    "junit", "timeout", "network", "memory", "cpus", "pids", "user", "cap_add", "env",
    "protected", "deny", "budgets", "rules", "files", "lines",
]  # fmt: skip
config_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(
        ["15m", "2g", "none", "setup", "allow", "hold", "deny", "**", "", "x" * 5000]
    ),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def _mutate(doc: object, path: list[int], value: object, delete: bool) -> object:
    """Replace (or delete) the node reached by following `path` choices into `doc`."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    if delete and len(path) == 1:
        if isinstance(doc, dict):
            doc.pop(key)
        else:
            doc.pop(key)
        return doc
    doc[key] = _mutate(doc[key], path[1:], value, delete)
    return doc


def _policy(work: Path, repo: Path, data: bytes) -> tuple[int, str, Path]:
    path = work / "proofgate.yml"
    path.write_bytes(data)
    argv = ["policy", "--repo", str(repo), "--base", "main", "--head", "pr"]
    code, err = _main([*argv, "--config", str(path)])
    return code, err, path


def _judge_config(work: Path, repo: Path, data: bytes, kind: str, *, mapping: bool) -> None:
    TRIED[f"config: {kind}"] += 1
    code, err, path = _policy(work, repo, data)
    assert "Traceback" not in err, err
    assert code in (0, 2, 11, 12, 13), (code, err)
    if code != 2:
        return
    assert f"proofgate: {path}" in err, err
    assert "expected" in err, err
    if mapping and not any(w in err for w in ("valid YAML", "UTF-8", "top level")):
        # "proofgate: FILE: KEY.PATH: expected ..., got ..." (gate/errors.py ConfigError)
        (line,) = [ln for ln in err.splitlines() if ln.startswith(f"proofgate: {path}: ")]
        assert not line.removeprefix(f"proofgate: {path}: ").startswith("expected"), (
            f"no key path named: {line}"
        )


def test_the_valid_config_is_accepted(work: Path, repo: Path) -> None:
    code, err, _ = _policy(work, repo, yaml.safe_dump(VALID).encode())
    assert code == 0, err


@given(path=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=4),
       value=config_values, delete=st.booleans())  # fmt: skip
@CONFIG_SETTINGS
def test_mutated_configs_exit_2_naming_the_key_or_are_accepted(
    work: Path, repo: Path, path: list[int], value: object, delete: bool
) -> None:
    doc = _mutate(json.loads(json.dumps(VALID)), path, value, delete)
    data = yaml.safe_dump(doc, allow_unicode=True).encode()
    _judge_config(work, repo, data, "mutated config", mapping=isinstance(doc, dict))


@given(st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), config_values))
@CONFIG_SETTINGS
def test_random_yaml_shapes_exit_2_or_are_accepted(
    work: Path, repo: Path, doc: dict[str, object]
) -> None:
    data = yaml.safe_dump(doc, allow_unicode=True).encode()
    _judge_config(work, repo, data, "random YAML shape", mapping=True)


@given(st.binary(max_size=512) | st.text(max_size=512).map(lambda t: t.encode("utf-8")))
@CONFIG_SETTINGS
def test_random_text_as_config_exits_2_or_is_accepted(work: Path, repo: Path, data: bytes) -> None:
    _judge_config(work, repo, data, "random text", mapping=False)


def test_count_of_bad_inputs_tried() -> None:
    """Runs last in this module: reports how many inputs were fed in."""
    total = sum(TRIED.values())
    if total == 0:
        pytest.skip("run with the whole module: it counts what the other tests fed in")
    print(f"bad inputs tried: {total}")
    for kind, n in sorted(TRIED.items()):
        print(f"  {kind}: {n}")
    assert total >= 1000, dict(TRIED)
