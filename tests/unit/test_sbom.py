"""The committed SBOM must describe exactly what requirements/action.lock pins (issue 8).

`scripts/make-sbom` regenerates `sbom/proofgate-action.cdx.json` from the lock; these
tests catch a lock bumped without regenerating the SBOM (or an SBOM edited by hand).
They read files only: no network, no cyclonedx-py needed.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "action.lock"
SBOM = ROOT / "sbom" / "proofgate-action.cdx.json"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")

Pins = dict[str, tuple[str, frozenset[str]]]


def _norm(name: str) -> str:
    # PEP 503 normalisation: the lock says `pygithub`, metadata may say `PyGithub`.
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(text: str) -> Pins:
    """name -> (version, sha256 set) for every `name==version` entry of a pip-compile lock."""
    pins: Pins = {}
    current: str | None = None
    for line in text.splitlines():
        m = _PIN.match(line)
        if m:
            current = _norm(m.group(1))
            pins[current] = (m.group(2), frozenset())
        elif not line.startswith((" ", "\t")):
            current = None  # a top-level comment or blank line ends the entry
        if current is not None:
            version, hashes = pins[current]
            pins[current] = (version, hashes | set(_HASH.findall(line)))
    return pins


def sbom_pins(bom: dict[str, object]) -> Pins:
    """name -> (version, sha256 set) for every component of a CycloneDX JSON SBOM."""
    components = bom.get("components", [])
    assert isinstance(components, list)
    pins: Pins = {}
    for comp in components:
        assert isinstance(comp, dict)
        hashes: set[str] = set()
        for ref in comp.get("externalReferences", []):
            hashes.update(h["content"] for h in ref.get("hashes", []) if h["alg"] == "SHA-256")
        pins[_norm(comp["name"])] = (comp["version"], frozenset(hashes))
    return pins


def drift(lock: Pins, sbom: Pins) -> list[str]:
    """Human-readable differences; empty when the SBOM matches the lock."""
    problems = [
        f"{name}=={lock[name][0]} is locked but missing from the SBOM"
        for name in sorted(lock.keys() - sbom.keys())
    ]
    problems += [
        f"{name}=={sbom[name][0]} is in the SBOM but not in the lock"
        for name in sorted(sbom.keys() - lock.keys())
    ]
    for name in sorted(lock.keys() & sbom.keys()):
        if lock[name][0] != sbom[name][0]:
            problems.append(f"{name}: lock pins {lock[name][0]}, SBOM says {sbom[name][0]}")
        elif lock[name][1] != sbom[name][1]:
            problems.append(f"{name}=={lock[name][0]}: hashes differ between lock and SBOM")
    return problems


@pytest.fixture(scope="module")
def bom() -> dict[str, object]:
    data = json.loads(SBOM.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_sbom_matches_action_lock(bom: dict[str, object]) -> None:
    problems = drift(lock_pins(LOCK.read_text(encoding="utf-8")), sbom_pins(bom))
    assert not problems, "SBOM drifted from requirements/action.lock; run scripts/make-sbom:\n" + (
        "\n".join(problems)
    )


def test_every_component_has_a_matching_purl(bom: dict[str, object]) -> None:
    components = bom["components"]
    assert isinstance(components, list)
    assert components, "SBOM lists no components"
    for comp in components:
        purl = comp.get("purl", "")
        expected = f"pkg:pypi/{_norm(comp['name'])}@{comp['version']}"
        assert purl.lower() == expected.lower(), f"{comp['name']}: purl {purl!r} != {expected!r}"


def test_sbom_is_cyclonedx_and_reproducible(bom: dict[str, object]) -> None:
    assert bom["bomFormat"] == "CycloneDX"
    # A serial number or timestamp would make every regeneration differ (make-sbom --check).
    assert "serialNumber" not in bom
    metadata = bom["metadata"]
    assert isinstance(metadata, dict)
    assert "timestamp" not in metadata


def test_sbom_root_is_this_project_at_its_version(bom: dict[str, object]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    metadata = bom["metadata"]
    assert isinstance(metadata, dict)
    root = metadata["component"]
    assert (root["name"], root["version"]) == (project["name"], project["version"])


def test_every_runtime_dependency_is_locked() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    locked = lock_pins(LOCK.read_text(encoding="utf-8"))
    for requirement in project["dependencies"]:
        name = _norm(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
        assert name in locked, f"{name} is a dependency in pyproject.toml but not in action.lock"
        assert locked[name][1], f"{name} is locked without --hash"


def test_dev_lock_tests_what_the_image_ships() -> None:
    # dev.in constrains to action.lock; a hand-edited dev.lock could still diverge.
    runtime = lock_pins(LOCK.read_text(encoding="utf-8"))
    dev = lock_pins((ROOT / "requirements" / "dev.lock").read_text(encoding="utf-8"))
    diverging = {n: (v, dev.get(n, ("missing",))[0]) for n, (v, _) in runtime.items()}
    assert {n: d for n, d in diverging.items() if d[0] != d[1]} == {}


# The checker itself must notice drift, or the tests above could pass vacuously.
_LOCK_SAMPLE = """\
#    pip-compile --generate-hashes pyproject.toml
#
attrs==26.1.0 \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via jsonschema
pyyaml==6.0.4 \\
    --hash=sha256:{c}
    # via proofgate (pyproject.toml)
"""


def _sample(**over: str) -> str:
    hashes = {"a": "a" * 64, "b": "b" * 64, "c": "c" * 64} | over
    return _LOCK_SAMPLE.format(**hashes)


def test_lock_parser_reads_names_versions_and_hashes() -> None:
    assert lock_pins(_sample()) == {
        "attrs": ("26.1.0", frozenset({"a" * 64, "b" * 64})),
        "pyyaml": ("6.0.4", frozenset({"c" * 64})),
    }


@pytest.mark.parametrize(
    ("edited_lock", "expected"),
    [
        (_sample().replace("pyyaml==6.0.4", "pyyaml==6.0.5"), "lock pins 6.0.5"),
        (_sample(c="d" * 64), "hashes differ"),
        (_sample() + "six==1.17.0 \\\n    --hash=sha256:" + "e" * 64 + "\n", "missing from"),
        (_sample().split("pyyaml")[0], "not in the lock"),
    ],
    ids=["version-bumped", "hash-changed", "package-added", "package-removed"],
)
def test_drift_is_detected(edited_lock: str, expected: str) -> None:
    problems = drift(lock_pins(edited_lock), lock_pins(_sample()))
    assert any(expected in p for p in problems), problems
