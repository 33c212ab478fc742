"""The witness (SPEC §3.2): the plugin in a real pytest, the line parser, the judgement,
and the protected archive (gate/witness/plugin.py, gate/witness/host.py,
gate/witness/judge.py, gate/differential/tarprotect.py)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gate.differential.tarprotect import PROTECTED_UID, protect
from gate.model import (
    CheckResult,
    CheckSpec,
    CommandResult,
    ImageRef,
    Phase,
    PhaseResult,
    Sha256,
    WitnessSession,
)
from gate.witness import judge as witness
from gate.witness.host import MARKER, MAX_SESSIONS, Scanner, plugin_tar


def _pytest_with_witness(
    project: Path,
    *args: str,
    runner: list[str] | None = None,
    workspace: Path | None = None,
) -> tuple[int, list[dict[str, object]]]:
    plug = project.parent / "plug"
    plug.mkdir(exist_ok=True)
    if not (plug / "boot").exists():
        with tarfile.open(fileobj=io.BytesIO(plugin_tar())) as t:
            t.extractall(plug, filter="data")
    if workspace is not None:  # the plugin as shipped, with `workspace` for /workspace
        for module in (plug / "witness" / "proofgate_witness").glob("*.py"):
            module.chmod(0o644)
            text = module.read_text().replace('"/workspace/"', repr(f"{workspace}/"))
            module.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    # as in the clean room: the start-up hook first on PYTHONPATH loads the witness
    env.update(PYTHONPATH=str(plug / "boot"), PYTEST_ADDOPTS="-p proofgate_witness")
    # the suite's own pytest plugins (hypothesis patches pytest) are not the project's
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [*(runner or [sys.executable, "-m", "pytest"]), "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        check=False,
    )
    scanner = Scanner()
    scanner.feed(proc.stdout)
    assert not scanner.problems
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    parsed = [json.loads(ln[len(MARKER) :]) for ln in lines]
    sessions = [d for d in parsed if "end" not in d]
    # each session's process ended normally: its closing line follows
    ends = [d["end"] for d in parsed if "end" in d]
    for d in sessions:
        d["ended"] = d["pid"] in ends
    return proc.returncode, sessions


def _project(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\n"
        "def test_ok():\n    assert True\n"
    )
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_an_honest_session_reports_its_status_counts_and_report_digest(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, lines = _pytest_with_witness(root, "--junitxml=r.xml")
    assert code == 1
    [line] = lines
    assert line["exitstatus"] == 1
    assert line["counts"] == {"passed": 1, "failed": 1, "error": 0, "skipped": 0}
    assert line["tampered"] == []
    report = (root / "r.xml").read_bytes()
    assert line["junit"] == {
        "path": str(root / "r.xml"),
        "sha256": hashlib.sha256(report).hexdigest(),
    }


def test_a_conftest_that_turns_failures_green_is_seen(tmp_path: Path) -> None:
    green = (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    out = yield\n    rep = out.get_result()\n"
        "    rep.outcome, rep.longrepr = 'passed', None\n"
    )
    code, [line] = _pytest_with_witness(_project(tmp_path, **{"conftest.py": green}))
    assert code == 0
    kinds = {t["kind"] for t in line["tampered"]}  # type: ignore[union-attr]
    assert kinds == {"outcome-rewritten"}
    [(path, blob)] = line["conftests"]  # type: ignore[misc]
    data = (tmp_path / "proj" / "conftest.py").read_bytes()
    assert blob == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324


def test_code_under_test_that_patches_pytest_is_seen(tmp_path: Path) -> None:
    patch = (
        "import _pytest.reports as r\n_orig = r.TestReport.from_item_and_call.__func__\n"
        "def _g(cls, item, call):\n    rep = _orig(cls, item, call)\n"
        "    rep.outcome, rep.longrepr = 'passed', None\n    return rep\n"
        "r.TestReport.from_item_and_call = classmethod(_g)\n"
        "def add(a, b):\n    return a - b\n"
    )
    root = _project(tmp_path)
    (root / "calc.py").write_text(patch)
    _, [line] = _pytest_with_witness(root)
    kinds = {t["kind"] for t in line["tampered"]}  # type: ignore[union-attr]
    assert {"pytest-patched", "outcome-rewritten"} <= kinds


def test_the_plugin_reports_the_tests_files_and_what_test_code_read(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        **{
            "cases.json": "[[2, 3, 5]]\n",
            "own.dat": "x\n",
            "test_data.py": (
                "import json, pathlib, calc\n\n"
                "def test_cases():\n"
                "    here = pathlib.Path(__file__)\n"
                "    rows = json.loads(here.with_name('cases.json').read_text())\n"
                "    assert rows and calc.own()\n\n"
                "def test_traceback_reads_no_input():\n"
                "    import inspect, traceback\n"
                "    assert inspect.getsource(calc.own) and traceback.format_stack()\n"
            ),
        },
    )
    (root / "calc.py").write_text(
        "import pathlib\n\ndef add(a, b):\n    return a + b\n\n"
        "def own():\n    return pathlib.Path(__file__).with_name('own.dat').read_text()\n"
    )
    _, [line] = _pytest_with_witness(root, workspace=root)
    prefix = str(root) + "/"
    files = [p.removeprefix(prefix) for p in line["test_files"]]  # type: ignore[union-attr]
    assert files == ["test_calc.py", "test_data.py"]
    listed = line["inputs"]["reads"]  # type: ignore[index]
    reads = [[r.removeprefix(prefix), p.removeprefix(prefix)] for r, p in listed]
    # the test's own read, and the code under test's (proofgate keeps the test's); the
    # sources pytest and the imports read are no reads
    assert reads == [["test_data.py", "cases.json"], ["calc.py", "own.dat"]]


@pytest.mark.parametrize("size", [1, 3, 17, 4096])
def test_the_scanner_finds_lines_in_any_chunking(size: int) -> None:
    good = b'{"v": 1, "exitstatus": 0, "junit": null, "counts": {"passed": 2}}'
    data = b"noise\n" + MARKER + good + b"\nnot at start " + MARKER + b"{}\n" + MARKER + b"junk\n"
    scanner = Scanner()
    for i in range(0, len(data), size):
        scanner.feed(data[i : i + size])
    assert [s.counts for s in scanner.sessions] == [{"passed": 2}]
    assert scanner.problems == ["a witness line that does not parse"]


def test_the_scanner_refuses_a_flood_of_lines() -> None:
    line = MARKER + b'{"exitstatus": 0}\n'
    scanner = Scanner()
    scanner.feed(line * (MAX_SESSIONS + 3))
    assert len(scanner.sessions) == MAX_SESSIONS
    assert scanner.problems == [f"more than {MAX_SESSIONS} witness lines"]


def _session(**kw: object) -> WitnessSession:
    base: dict[str, object] = {
        "exitstatus": 0,
        "junit_path": None,
        "junit_sha256": None,
        "counts": {"passed": 1},
        "conftests": (),
        "tampered": (),
        "xdist": False,
    }
    base.update(kw)
    return WitnessSession(**base)  # type: ignore[arg-type]


def _result(
    sessions: tuple[WitnessSession, ...], *, exit_code: int = 0, junit: bytes | None = None
) -> CheckResult:
    cmd = CommandResult(
        argv=("python3", "-m", "pytest"),
        exit_code=exit_code,
        duration_s=1.0,
        log_sha256=Sha256("0" * 64),
        log_bytes=0,
        log_tail="",
        witness=sessions,
    )
    image = ImageRef(name="img", id="sha256:" + "1" * 64)
    return CheckResult(
        name="unit",
        image=image,
        started=True,
        phases=(PhaseResult(phase=Phase.TEST, commands=(cmd,)),),
        junit_report=junit,
    )


def _spec(junit: str | None) -> CheckSpec:
    from gate.config import load_config  # the real parser, so the spec is what users get

    extra = f", junit: {junit}" if junit else ""
    text = f"version: 1\nimage: img\nchecks:\n  - {{name: unit, test: 'pytest'{extra}}}\n"
    return load_config(text.encode(), source="test").checks[0]


def test_an_exit_status_forced_to_zero_is_a_finding_without_junit() -> None:
    seen = witness.assess(_result((_session(exitstatus=1),)), _spec(None), None)
    assert [k for k, _ in seen.findings] == ["exit-status"]
    # with junit the report judges (`pytest || true` is a legitimate config then)
    report = b"<testsuite/>"
    s = _session(
        exitstatus=1,
        junit_path="/workspace/r.xml",
        junit_sha256=hashlib.sha256(report).hexdigest(),
    )
    assert witness.assess(_result((s,), junit=report), _spec("r.xml"), None).findings == ()


def test_a_report_changed_after_pytest_wrote_it_is_a_finding() -> None:
    s = _session(junit_path="/workspace/reports/j.xml", junit_sha256="a" * 64)
    seen = witness.assess(_result((s,), junit=b"<testsuite/>"), _spec("./reports/j.xml"), None)
    assert [k for k, _ in seen.findings] == ["report-rewritten"]


def test_a_conftest_that_is_not_the_trees_is_a_finding() -> None:
    s = _session(
        conftests=(("/workspace/zz/conftest.py", "b" * 40), ("/workspace/conftest.py", "c" * 40))
    )
    blobs = {b"conftest.py": "c" * 40}
    seen = witness.assess(_result((s,)), _spec(None), blobs.get)
    assert seen.findings == (("conftest-not-in-tree", "zz/conftest.py is not a file of the tree"),)
    assert witness.waive(seen.findings, frozenset(seen.findings), lambda p: False) == ()


NOTHING_CHANGED = frozenset[bytes]().__contains__


def test_a_finding_is_waived_only_for_the_very_same_detail() -> None:
    # SPEC §3.2: a base harness that registers a harmless plugin does not let the change
    # register another one (the kind alone no longer waives)
    base = frozenset({("plugin-registered", "harmless (/workspace/tests/harmless.py)")})
    found = (
        ("plugin-registered", "harmless (/workspace/tests/harmless.py)"),
        ("plugin-registered", "green (/workspace/calc/_speedups.py)"),
    )
    assert witness.waive(found, base, NOTHING_CHANGED) == found[1:]


def test_a_finding_naming_the_changes_code_is_never_waived() -> None:
    # the same plugin file, but the change edits it: not the base's plugin any more
    detail = "calc._speedups (/workspace/calc/_speedups.py)"
    found = (("plugin-registered", detail),)
    base = frozenset(found)
    assert witness.waive(found, base, {b"calc/_speedups.py"}.__contains__) == found
    assert witness.waive(found, base, NOTHING_CHANGED) == ()


def test_the_files_of_the_tests_and_what_test_code_read_come_from_the_sessions() -> None:
    s = _session(
        test_files=("/workspace/calc/tests/test_a.py", "/workspace/tests/test_b.py", "/tmp/x.py"),
        reads=(
            ("/workspace/calc/tests/test_a.py", "/workspace/calc/data/cases.json"),
            ("/workspace/tests/conftest.py", "/workspace/golden/out.txt"),
            ("/workspace/calc/__init__.py", "/workspace/calc/table.dat"),  # the code's own
            ("/workspace/tests/test_b.py", "/workspace/../etc/passwd"),
        ),
    )
    assert witness.test_files((s,)) == (b"calc/tests/test_a.py", b"tests/test_b.py")
    is_test = lambda p: p.endswith(b"conftest.py")  # noqa: E731
    assert witness.test_inputs((s,), is_test) == (b"calc/data/cases.json", b"golden/out.txt")


def _archive(tmp_path: Path) -> bytes:
    import pygit2

    repo = pygit2.init_repository(str(tmp_path / "r"))
    long_dir = "d" * 120
    files = {
        "src/m.py": b"x = 1\n",
        "tests/test_a.py": b"def test_a():\n    pass\n",
        f"tests/{long_dir}/test_{'n' * 90}.py": b"def test_b():\n    pass\n",
        "run.sh": b"#!/bin/sh\n",
    }
    for path, data in files.items():
        (tmp_path / "r" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "r" / path).write_bytes(data)
    subprocess.run(["git", "-C", str(tmp_path / "r"), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path / "r"),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ],
        check=True,
    )
    del repo
    return subprocess.run(
        ["git", "-C", str(tmp_path / "r"), "archive", "HEAD"], check=True, capture_output=True
    ).stdout


@pytest.mark.parametrize("size", [1, 511, 512, 4096, 1 << 20])
def test_protected_files_and_every_directory_belong_to_no_user_of_the_check(
    tmp_path: Path, size: int
) -> None:
    data = _archive(tmp_path)
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    out = b"".join(protect(iter(chunks), lambda p: p.startswith(b"tests/")))
    assert len(out) == len(data)
    got = {}
    with tarfile.open(fileobj=io.BytesIO(out)) as t:  # checksums verified on read
        for m in t.getmembers():
            got[m.name] = (m.uid, m.mode, t.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        want = {m.name: t.extractfile(m).read() if m.isfile() else None for m in t.getmembers()}  # type: ignore[union-attr]
    assert {k: v[2] for k, v in got.items()} == want  # content untouched
    for name, (uid, mode, content) in got.items():
        if content is None:
            assert (uid, mode) == (PROTECTED_UID, 0o1777), name
        elif name.startswith("tests/"):
            assert (uid, mode) == (PROTECTED_UID, 0o444), name
        else:
            assert uid == 0, name


def _as_shard(tmp_path: Path, assigned: dict[str, int]) -> None:
    """The split file proofgate writes in the witness package for shard 1 of 2 (SPEC §3.3)."""
    plug = tmp_path / "plug" / "witness" / "proofgate_witness"
    plug.mkdir(parents=True)
    shard = {"index": 1, "count": 2, "assigned": assigned, "by_unit": []}
    (plug / "proofgate_shard.json").write_text(json.dumps(shard))


def test_an_empty_share_ends_0_and_is_timed_to_the_microsecond(tmp_path: Path) -> None:
    """Every collected test is shard 2's: shard 1's session ends 0, not pytest's 5."""
    root = _project(tmp_path)
    _as_shard(tmp_path, {"test_calc.py": 2})
    code, [line] = _pytest_with_witness(root, "--junitxml=r.xml", workspace=root)
    assert (code, line["exitstatus"], line["counts"]["passed"]) == (0, 0, 0)
    assert b'tests="0"' in (root / "r.xml").read_bytes()
    assert line["durations_us"] == {}


def test_a_session_that_collects_nothing_keeps_status_5(tmp_path: Path) -> None:
    """The negative control: no test at all is pytest's 5 with or without shards (the
    one-job proof of the same tree has it too)."""
    root = _project(tmp_path)
    (root / "test_calc.py").unlink()
    _as_shard(tmp_path, {})
    code, [line] = _pytest_with_witness(root, workspace=root)
    assert (code, line["exitstatus"]) == (5, 5)


def test_the_witness_times_each_top_level_test(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _, [line] = _pytest_with_witness(root, workspace=root)
    durations = line["durations_us"]
    assert isinstance(durations, dict)
    assert sorted(durations) == ["test_calc.py::test_add", "test_calc.py::test_ok"]
    assert all(isinstance(v, int) and v > 0 for v in durations.values())


def test_a_file_of_another_shard_is_not_even_collected(tmp_path: Path) -> None:
    """A shard pays for collecting its own share only: another shard's test file is never
    imported (its tests would only be deselected); its own files run as before."""
    other = (
        "from pathlib import Path\nPath('imported').write_text('x')\n\ndef test_x():\n    pass\n"
    )
    root = _project(tmp_path, **{"test_other.py": other})
    _as_shard(tmp_path, {"test_calc.py": 1, "test_other.py": 2})
    code, [line] = _pytest_with_witness(root, workspace=root)
    assert not (root / "imported").exists()
    assert (code, line["counts"]) == (1, {"passed": 1, "failed": 1, "error": 0, "skipped": 0})


def test_without_a_shard_every_test_file_is_collected(tmp_path: Path) -> None:
    """The negative control: the same tree as one job imports and runs that file."""
    other = (
        "from pathlib import Path\nPath('imported').write_text('x')\n\ndef test_x():\n    pass\n"
    )
    root = _project(tmp_path, **{"test_other.py": other})
    code, [line] = _pytest_with_witness(root, workspace=root)
    assert (root / "imported").exists()
    assert (code, line["counts"]) == (1, {"passed": 2, "failed": 1, "error": 0, "skipped": 0})


def test_a_project_that_turns_warnings_into_errors_runs_under_the_witness(
    tmp_path: Path,
) -> None:
    """The start-up hook imports the witness before pytest marks `-p` plugins for
    assertion rewriting; pytest would warn that it cannot rewrite it, which a project
    with `filterwarnings = error` turns into an error that stops the session."""
    root = _project(tmp_path, **{"pytest.ini": "[pytest]\nfilterwarnings =\n    error\n"})
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    code, [line] = _pytest_with_witness(root, "--junitxml=r.xml")
    assert code == 0
    assert line["counts"] == {"passed": 2, "failed": 0, "error": 0, "skipped": 0}
