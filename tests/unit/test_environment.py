"""The environment, path by path and byte by byte (SPEC §3.2): what is put aside as
varying honestly, and nothing else (gate/differential/environment.py, pure)."""

from __future__ import annotations

import hashlib

import pytest

from gate.differential import environment as env
from gate.differential.environment import ADDED, MODIFIED, RawEntry
from gate.model import EnvRecord

SITE = "/usr/local/lib/python3.11/dist-packages"
FINDER = (
    "import sys\nMAPPING = {'calc': '/workspace/calc'}\nNAMESPACES = {}\n"
    "PATH_PLACEHOLDER = '__editable__.calc-VERSION.finder' + '.__path_hook__'\n"
)
METADATA = "Metadata-Version: 2.1\nName: calc\nVersion: {v}\nRequires-Dist: attrs\n\n{readme}\n"
RECORD = (
    "__editable__.calc-{v}.pth,sha256={h},75\n__editable___calc_{u}_finder.py,sha256={h},2388\n"
    "calc-{v}.dist-info/METADATA,sha256={h},47\ncalc-{v}.dist-info/RECORD,,\n"
)


def _file(path: str, text: str, kind: str = ADDED) -> RawEntry:
    data = text.encode()
    return RawEntry(
        path=path, kind=kind, type="file", sha256=hashlib.sha256(data).hexdigest(), data=data
    )


def _editable(
    version: str, *, readme: str = "calc", finder: str = FINDER, **extra: str
) -> EnvRecord:
    u = version.replace(".", "_")
    info = f"{SITE}/calc-{version}.dist-info"
    rows = [
        _file(
            f"{SITE}/__editable__.calc-{version}.pth",
            f"import __editable___calc_{u}_finder; __editable___calc_{u}_finder.install()",
        ),
        _file(f"{SITE}/__editable___calc_{u}_finder.py", finder.replace("VERSION", version)),
        _file(f"{info}/METADATA", METADATA.format(v=version, readme=readme)),
        _file(
            f"{info}/RECORD",
            RECORD.format(v=version, u=u, h=hashlib.sha256(version.encode()).hexdigest()[:8]),
        ),
        _file(
            f"{info}/direct_url.json",
            '{"dir_info": {"editable": true}, "url": "file:///workspace"}',
        ),
        _file(f"{info}/top_level.txt", "calc\n"),
        *(_file(f"{info}/{name}", text) for name, text in extra.items()),
    ]
    return env.normalise(rows, set(), complete=True)


def test_an_honest_editable_install_with_a_version_bump_is_the_same_environment() -> None:
    assert env.new_in(_editable("1.1.0", readme="a new readme"), _editable("1.0.9")) == ()


@pytest.mark.parametrize(
    ("what", "changed"),
    [
        (
            "finder",
            {"finder": FINDER + "import _pytest.python as p; p.pytest_pyfunc_call = None\n"},
        ),
        ("entry-point", {"entry_points.txt": "[pytest11]\ngreen = calc\n"}),
        ("requires", {"readme": "calc\n"}),
    ],
    ids=["payload-in-the-editable-finder", "entry-points-gain-pytest11", "metadata-body-only"],
)
def test_what_the_normalisation_leaves_is_compared_byte_for_byte(
    what: str, changed: dict[str, str]
) -> None:
    base = _editable("1.0", **({"entry_points.txt": ""} if what == "entry-point" else {}))
    judged = _editable("1.1", **changed)
    fresh = env.new_in(judged, base)
    if what == "requires":  # the description is the README: put aside
        assert fresh == ()
    else:
        assert len(fresh) == 1
        assert fresh[0].path.endswith("finder.py" if what == "finder" else "entry_points.txt")


def test_the_projects_metadata_fields_are_put_aside_but_its_name() -> None:
    """Fields written from the committed pyproject.toml (a dependency, the Python it
    needs, its authors) are the change's code, judged by the policy; another project's
    name in the metadata is not the project."""
    judged = _editable("1.0")
    info = f"{SITE}/calc-1.0.dist-info"
    url = '{"dir_info": {"editable": true}, "url": "file:///workspace"}'
    fields = METADATA.replace("attrs", "attrs\nRequires-Dist: six\nRequires-Python: >=3.9")
    rows = [
        _file(f"{info}/METADATA", fields.format(v="1.0", readme="x")),
        _file(f"{info}/direct_url.json", url),
    ]
    assert env.new_in(env.normalise(rows, set(), complete=True), judged) == ()
    other = [
        _file(
            f"{info}/METADATA",
            METADATA.replace("Name: calc", "Name: calc2").format(v="1.0", readme="x"),
        )
    ]
    got = env.new_in(env.normalise([*other, rows[1]], set(), complete=True), judged)
    assert [c.path.rsplit("/", 1)[-1] for c in got] == ["METADATA"]


def test_the_version_is_put_aside_only_in_the_projects_own_artefacts() -> None:
    """A dependency's file that contains the project's version string is compared as it
    is: the base's 1.0 and the change's 1.1 do not make two files of a dependency equal."""
    project = env.Project("calc", "1.0", f"{SITE}/calc-1.0.dist-info")
    data = b"VERSION = '1.0'\n"
    assert env.normalise_bytes(f"{SITE}/other/version.py", data, project) == data
    assert (
        env.normalise_bytes("/workspace/calc/_version.py", data, project)
        == b"VERSION = '{version}'\n"
    )
    # a token, not a substring
    assert (
        env.normalise_bytes("/workspace/v.py", b"'11.0' '1.0.1' '1.0'", project)
        == b"'11.0' '1.0.1' '{version}'"
    )


def test_a_copy_of_a_committed_file_is_that_committed_file() -> None:
    """A non-editable install copies the change's committed modules: judged as the tree."""
    base_copy = _file(f"{SITE}/calc.py", "def add(a, b):\n    return a + b\n")
    head_copy = _file(f"{SITE}/calc.py", "def add(a, b):\n    return a - b  # the change\n")
    base = env.normalise([base_copy], {("calc.py", base_copy.sha256 or "")}, complete=True)
    judged = env.normalise([head_copy], {("calc.py", head_copy.sha256 or "")}, complete=True)
    assert env.new_in(judged, base) == ()
    # the base's good copy installed over the change's committed module is not the tree's
    planted = env.normalise([base_copy], {("calc.py", head_copy.sha256 or "")}, complete=True)
    assert [c.path for c in env.new_in(planted, base)] == [f"{SITE}/calc.py"]


def _elf(path: str, body: bytes) -> RawEntry:
    data = b"\x7fELF" + body
    return RawEntry(path=path, kind=ADDED, type="elf", sha256=hashlib.sha256(data).hexdigest())


def test_a_compiled_artefact_is_forgiven_only_when_the_change_edits_its_source() -> None:
    so = "/workspace/calc/_speedups.cpython-311-x86_64-linux-gnu.so"
    base = env.normalise([_elf(so, b"old")], set(), complete=True)
    judged = env.normalise([_elf(so, b"new")], set(), complete=True)
    assert env.new_in(judged, base, [b"calc/_speedups.c"]) == ()
    assert [c.path for c in env.new_in(judged, base, [b"calc/core.py"])] == [so]
    # one the base's build did not produce is never forgiven
    other = env.normalise(
        [_elf("/workspace/calc/core.cpython-311-x86_64-linux-gnu.so", b"x")], set(), complete=True
    )
    assert len(env.new_in(other, base, [b"calc/core.py"])) == 1


def test_an_incomplete_record_is_a_change() -> None:
    judged = env.normalise([], set(), complete=False)
    assert [c.kind for c in env.new_in(judged, EnvRecord())] == ["unrecorded"]
    unread = env.normalise(
        [RawEntry(path="/etc/x", kind=MODIFIED, type="unread")], set(), complete=True
    )
    assert not unread.complete


@pytest.mark.parametrize(
    ("path", "seen"),
    [
        ("/var/tmp/x", True),
        ("/run/x", True),
        ("/etc/ld.so.preload", True),
        ("/tmp/x", False),
        ("/proc/1/x", False),
        ("/opt/proofgate/x", False),
        ("/opt/proofgate-pycache/x", False),
        ("/usr/sbin/docker-init", False),
        ("/workspace/x", False),  # judged against the tree instead
    ],
)
def test_only_what_no_test_container_sees_is_left_out(path: str, seen: bool) -> None:
    assert env.volatile(path) is not seen


def test_a_licence_the_metadata_carries_is_the_committed_file() -> None:
    """A licence renamed in the tree (LICENSE.rst -> LICENSE.txt) moves the copy the
    install puts in the metadata and its line in RECORD: both are the tree's."""
    info = f"{SITE}/calc-1.0.dist-info"
    url = _file(f"{info}/direct_url.json", '{"url": "file:///workspace"}')
    old = _file(f"{info}/licenses/LICENSE.rst", "BSD\n")
    new = _file(f"{info}/licenses/LICENSE.txt", "BSD\n")
    base = env.normalise(
        [url, old, _file(f"{info}/RECORD", "calc-1.0.dist-info/licenses/LICENSE.rst,,\n")],
        {("LICENSE.rst", old.sha256 or "")},
        complete=True,
    )
    judged = env.normalise(
        [url, new, _file(f"{info}/RECORD", "calc-1.0.dist-info/licenses/LICENSE.txt,,\n")],
        {("LICENSE.txt", new.sha256 or "")},
        complete=True,
    )
    assert env.new_in(judged, base) == ()
