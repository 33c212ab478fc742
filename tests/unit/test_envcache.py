"""The environment cache's key and setup inputs (gate/sandbox/envcache.py), and the
`setup_inputs` configuration key. The cache against a real daemon is tested in
tests/integration/test_sandbox.py and tests/integration/test_prove.py."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from collections.abc import Iterator

import pytest

from gate.config import load_config
from gate.errors import ConfigError
from gate.model import CheckSpec, Command, ImageRef, Limits, Phase
from gate.sandbox import envcache
from gate.sandbox.egress import UnsafeOverrides

IMAGE = ImageRef(name="img", id="sha256:" + "1" * 64)


def _tree(files: dict[str, bytes], mtime: int = 1) -> Iterator[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    yield buf.getvalue()


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return sorted(m.name for m in tar if m.isfile())


def _check(**limits: object) -> CheckSpec:
    setup = (Phase.SETUP, (Command.shell("pip install -r requirements.txt"),))
    return CheckSpec(name="u", phases=(setup,), limits=Limits(**limits), setup_inputs=("r*.txt",))  # type: ignore[arg-type]


FILES = {"r.txt": b"click==8\n", "sub/r2.txt": b"x\n", "app.py": b"print(1)\n"}


def test_setup_sees_only_its_inputs_and_the_digest_ignores_mtimes() -> None:
    data, digest = envcache.setup_inputs(lambda: _tree(FILES), ("r*.txt", "sub/*.txt"))
    assert _names(data) == ["r.txt", "sub/r2.txt"]
    _, later = envcache.setup_inputs(lambda: _tree(FILES, mtime=99), ("r*.txt", "sub/*.txt"))
    assert later == digest
    other = {**FILES, "app.py": b"print(2)\n"}
    assert envcache.setup_inputs(lambda: _tree(other), ("r*.txt", "sub/*.txt"))[1] == digest
    changed = {**FILES, "r.txt": b"click==9\n"}
    assert envcache.setup_inputs(lambda: _tree(changed), ("r*.txt", "sub/*.txt"))[1] != digest


@pytest.mark.parametrize(
    "change",
    [
        {"env": (("PIP_INDEX_URL", "x"),)},
        {"network": "setup"},
        {"user": "1000"},
        {"egress": ("pypi.example:443",)},
    ],
)
def test_the_key_covers_what_setup_depends_on(change: dict[str, object]) -> None:
    base = envcache.key(_check(), IMAGE, "d")
    assert envcache.key(_check(**change), IMAGE, "d") != base
    assert envcache.key(_check(), IMAGE, "e") != base
    assert envcache.key(_check(), dataclasses.replace(IMAGE, id="sha256:" + "2" * 64), "d") != base
    assert envcache.key(_check(memory=1 << 30), IMAGE, "d") == base
    # an entry that carries the record of what setup changed (SPEC §3.2) is another key
    assert envcache.key(_check(), IMAGE, "d", recorded=True) != base


def _config(inputs: str) -> bytes:
    return f"version: 1\nimage: x\nchecks:\n  - {{name: u, setup: s, test: t{inputs}}}\n".encode()


def test_setup_inputs_config_key() -> None:
    (check,) = load_config(_config(", setup_inputs: [requirements*.txt]"), source="c").checks
    assert check.setup_inputs == ("requirements*.txt",)
    (plain,) = load_config(_config(""), source="c").checks
    assert plain.setup_inputs is None
    with pytest.raises(ConfigError, match=r"setup_inputs\[0\]"):
        load_config(_config(', setup_inputs: ["["]'), source="c")


def test_the_key_covers_the_egress_overrides_in_force() -> None:
    """An environment made while the broker's test-only overrides applied (other
    addresses allowed, names resolved by a map) is not one made without them."""
    networked = _check(network="setup", egress=("index.example.org:8000",))
    plain = envcache.key(networked, IMAGE, "d")
    assert envcache.key(networked, IMAGE, "d", UnsafeOverrides()) == plain
    hosts = UnsafeOverrides(hosts=(("index.example.org", ("10.0.0.2",)),))
    other_host = UnsafeOverrides(hosts=(("index.example.org", ("10.0.0.3",)),))
    nets = UnsafeOverrides(allow_nets=("10.0.0.0/8",))
    network = UnsafeOverrides(network="a-test-network")
    keys = {envcache.key(networked, IMAGE, "d", o) for o in (hosts, other_host, nets, network)}
    assert len(keys) == 4
    assert plain not in keys
    # without a broker the overrides shape nothing: the key stays
    assert envcache.key(_check(), IMAGE, "d", hosts) == envcache.key(_check(), IMAGE, "d")
