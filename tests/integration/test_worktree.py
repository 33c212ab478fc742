"""The local agent loop (issue 20): `prove/policy --worktree` and `apply`.

Real repositories with real working trees: staged, unstaged, untracked, ignored, deleted,
renamed, symlinked and exec-bit changes. The user's repository (including .git) is
byte-identical after every `--worktree` run and after every refused `apply`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from gate import receipt
from gate.faces.cli import main
from gate.git.repo import GitRepository
from gate.model import ReasonCode, Verdict
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.interface import Sandbox
from tests.gitutil import EXEC, Gitlink, checkout, commit, make_repo, repo_dir, snapshot, tree_files

IMAGE = "proofgate/cleanroom:latest"
CONFIG = (
    f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 60, memory: 256m, pids: 64}}\n"
    "checks:\n"
    "  - name: agent\n"
    '    test: "grep -q fixed a.txt && test -x run.sh && test -f new.txt && test ! -e gone.txt"\n'
).encode()
BASE_FILES: dict[bytes, object] = {
    b".github/proofgate.yml": CONFIG,
    b".gitignore": b"*.log\nbuild/\n",
    b"a.txt": b"broken\n",
    b"b.txt": b"b1\n",
    b"gone.txt": b"bye\n",
    b"keep.txt": b"a file that moves\n" * 20,
    b"run.sh": b"#!/bin/sh\necho hi\n",
}


def _checkout(tmp_path: Path, name: str = "repo") -> tuple[pygit2.Repository, Path]:
    """A repository whose working tree and index are its committed base, clean."""
    repo = make_repo(tmp_path, name)
    commit(repo, BASE_FILES, message="base")  # type: ignore[arg-type]
    checkout(repo)
    path = repo_dir(repo)
    excludes = tmp_path / f"{name}-global-excludes"
    excludes.write_bytes(b"secret.env\n")
    repo.config["core.excludesFile"] = str(excludes)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "exclude").write_bytes(b"local.cfg\n")
    return repo, path


def _agent_edits(repo: pygit2.Repository, path: Path) -> None:
    """What an agent leaves behind: every kind of working-tree change."""
    (path / "b.txt").write_bytes(b"b2 staged\n")
    repo.index.add("b.txt")  # staged ...
    repo.index.write()
    (path / "b.txt").write_bytes(b"b3 unstaged on top\n")  # ... then changed again
    (path / "a.txt").write_bytes(b"fixed\n")  # unstaged
    (path / "gone.txt").unlink()  # deleted
    os.rename(path / "keep.txt", path / "moved.txt")  # renamed
    os.chmod(path / "run.sh", 0o755)  # noqa: S103 - the exec-bit change under test
    os.symlink("a.txt", path / "link")  # symlink
    (path / "new.txt").write_bytes(b"untracked\n")  # untracked
    (path / "debug.log").write_bytes(b"ignored by .gitignore\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_bytes(b"ignored directory\n")
    (path / "local.cfg").write_bytes(b"ignored by info/exclude\n")
    (path / "secret.env").write_bytes(b"ignored by core.excludesFile\n")


EXPECTED_HEAD = {
    b".github/proofgate.yml": (0o100644, CONFIG),
    b".gitignore": (0o100644, b"*.log\nbuild/\n"),
    b"a.txt": (0o100644, b"fixed\n"),
    b"b.txt": (0o100644, b"b3 unstaged on top\n"),
    b"link": (0o120000, b"a.txt"),
    b"moved.txt": (0o100644, b"a file that moves\n" * 20),
    b"new.txt": (0o100644, b"untracked\n"),
    b"run.sh": (EXEC, b"#!/bin/sh\necho hi\n"),
}

# os.rename is no `git mv`: the moved file is untracked at its new path
UNTRACKED = [{"path": "link"}, {"path": "moved.txt"}, {"path": "new.txt"}]


def _capture(path: Path) -> tuple[str, str, dict[bytes, tuple[int, bytes]]]:
    with GitRepository(path) as src:
        snap = src.capture_worktree()
        assert src.store_path is not None
        store = pygit2.Repository(str(src.store_path))
        return snap.commit, snap.tree, tree_files(store, snap.tree)


def _git_add_all_tree(path: Path, tmp_path: Path) -> str:
    """The oracle: `git add -A && git write-tree` in a throwaway copy of the checkout."""
    copy = tmp_path / "oracle"
    shutil.copytree(path, copy, symlinks=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "add", "-A"], cwd=copy, env=env, check=True)  # noqa: S607
    out = subprocess.run(  # noqa: S603
        ["git", "write-tree"],  # noqa: S607
        cwd=copy,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.stdout.decode().strip()


def _predicate(envelope: bytes) -> dict[str, object]:
    statement = json.loads(base64.b64decode(json.loads(envelope)["payload"]))
    return statement["predicate"]  # type: ignore[no-any-return]


# -- capture ---------------------------------------------------------------------------


def test_worktree_tree_is_what_git_add_all_would_commit(tmp_path: Path) -> None:
    repo, path = _checkout(tmp_path)
    _agent_edits(repo, path)
    before = snapshot(path)
    _, tree, files = _capture(path)
    assert snapshot(path) == before  # .git included: no object, ref, index or reflog
    assert files == EXPECTED_HEAD
    assert tree == _git_add_all_tree(path, tmp_path)


def test_directory_replaced_by_a_symlink_is_not_read_through(tmp_path: Path) -> None:
    repo, path = _checkout(tmp_path)
    commit(repo, {b"d/inner.txt": b"tracked\n"})
    checkout(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inner.txt").write_bytes(b"a file outside the repository\n")
    shutil.rmtree(path / "d")
    os.symlink(outside, path / "d")
    _, tree, files = _capture(path)
    assert files[b"d"] == (0o120000, os.fsencode(outside))
    assert b"d/inner.txt" not in files
    assert tree == _git_add_all_tree(path, tmp_path)


def test_identical_states_give_identical_commits(tmp_path: Path) -> None:
    repo, path = _checkout(tmp_path)
    _agent_edits(repo, path)
    first, _, _ = _capture(path)
    again, _, _ = _capture(path)
    assert first == again
    (path / "new.txt").write_bytes(b"different\n")
    assert _capture(path)[0] != first


def test_policy_worktree_reports_untracked_files_and_leaves_repo_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, path = _checkout(tmp_path)
    _agent_edits(repo, path)
    before = snapshot(path)
    assert main(["policy", "--repo", str(path), "--worktree", "--json"]) == 0
    assert snapshot(path) == before
    predicate = json.loads(capsys.readouterr().out)
    assert predicate["trigger"] == {"kind": "local", "base_ref": "refs/heads/main"}
    assert predicate["worktree"] == {"untracked": UNTRACKED}
    assert predicate["base"]["commit"] == str(repo.head.target)
    statuses = {e["path"]: e["status"] for e in predicate["inventory"]}
    assert statuses == {
        "a.txt": "modified",
        "b.txt": "modified",
        "gone.txt": "deleted",
        "link": "added",
        "moved.txt": "renamed",
        "new.txt": "added",
        "run.sh": "modified",
    }
    ignored = ("debug.log", "build", "local.cfg", "secret.env")
    assert not any(name in json.dumps(predicate["inventory"]) for name in ignored)


def test_worktree_with_head_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _checkout(tmp_path)
    code = main(["prove", "--repo", str(path), "--worktree", "--head", "main"])
    assert code == 2
    assert "--worktree" in capsys.readouterr().err
    assert main(["policy", "--repo", str(path), "--base", "main"]) == 2
    assert "--head" in capsys.readouterr().err


def test_worktree_of_a_bare_repository_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, bare=True)
    commit(repo, {b"a": b"1"})
    assert main(["policy", "--repo", str(repo_dir(repo)), "--worktree"]) == 2
    assert "no working tree" in capsys.readouterr().err


def test_special_files_are_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _checkout(tmp_path)
    (path / "b.txt").unlink()
    os.mkfifo(path / "b.txt")  # never opened: reading it would block the capture
    assert main(["policy", "--repo", str(path), "--worktree", "--json"]) == 0
    predicate = json.loads(capsys.readouterr().out)
    assert [(e["path"], e["status"]) for e in predicate["inventory"]] == [("b.txt", "deleted")]
    assert any("b.txt: not a file or symlink" in n for n in predicate["coverage"]["notes"])


def test_apply_usage_and_unreadable_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _checkout(tmp_path)
    assert main(["apply", str(tmp_path / "receipt.json"), "--repo", str(path)]) == 2
    assert "--key" in capsys.readouterr().err
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    pub = str(tmp_path / "k" / "proofgate.pub")
    before = snapshot(path)
    assert main(["apply", str(tmp_path / "receipt.json"), "--key", pub, "--repo", str(path)]) == 1
    assert "apply refused: cannot read" in capsys.readouterr().err
    assert snapshot(path) == before


def _never_sandbox(_proof: str) -> Sandbox:
    raise AssertionError("no check may run")


@pytest.mark.parametrize(
    ("written", "named"),
    [("a.txt", "a.txt"), ("late.txt", "the list of files")],
    ids=["file-changed-while-read", "file-added-during-capture"],
)
def test_working_tree_changing_during_capture_is_inconclusive_never_a_mixed_tree(
    tmp_path: Path, written: str, named: str
) -> None:
    repo, path = _checkout(tmp_path)
    _agent_edits(repo, path)

    def agent_still_writing(rel: bytes) -> None:
        if rel == b"a.txt":  # right after proofgate read a.txt, before its second lstat
            (path / written).write_bytes(b"fixed, and more being written\n")

    with GitRepository(path) as src:
        snap = src.capture_worktree(on_read=agent_still_writing)
        run = prove(
            ProveRequest(base="HEAD", head=snap.commit),
            evidence=src,
            sandbox=_never_sandbox,
        )
    assert run.verdict is Verdict.INCONCLUSIVE
    assert [r.code for r in run.reasons] == [ReasonCode.COVERAGE_INCOMPLETE]
    assert named in run.reasons[0].message
    assert run.predicate["proven_tree"] is None
    assert run.predicate["coverage"]["complete"] is False  # type: ignore[index]


def test_changed_module_importing_an_ignored_file_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _checkout(tmp_path)
    (path / "local_settings.log").write_bytes(b"")  # ignored, not a module
    (path / "build" / "__init__.py").parent.mkdir()
    (path / "build" / "__init__.py").write_bytes(b"")  # an ignored package
    (path / "app.py").write_bytes(b"import json\nfrom build import thing\n")
    assert main(["policy", "--repo", str(path), "--worktree", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["coverage"]["notes"]
    assert any("app.py imports build" in n and "ignored" in n for n in notes), notes


def test_nested_repository_is_recorded_as_a_gitlink_not_descended(tmp_path: Path) -> None:
    _, path = _checkout(tmp_path)
    nested = pygit2.init_repository(str(path / "vendor"), initial_head="main")
    sub_head = commit(nested, {b"lib.py": b"x = 1\n"})
    checkout(nested)
    _, tree, files = _capture(path)
    assert files[b"vendor"] == (0o160000, str(sub_head).encode())
    assert not any(p.startswith(b"vendor/") for p in files)
    assert tree == _git_add_all_tree(path, tmp_path)


def test_submodule_is_recorded_at_its_checked_out_commit(tmp_path: Path) -> None:
    repo, path = _checkout(tmp_path)
    source = pygit2.init_repository(str(tmp_path / "subsrc"), initial_head="main")
    first = commit(source, {b"lib.py": b"x = 1\n"})
    commit(repo, {b"sub": Gitlink(str(first))})
    checkout(repo)
    shutil.copytree(tmp_path / "subsrc", path / "sub", dirs_exist_ok=True)
    nested = pygit2.Repository(str(path / "sub"))
    second = commit(nested, {b"lib.py": b"x = 2\n"})  # the submodule moved on
    checkout(nested)
    _, tree, files = _capture(path)
    assert files[b"sub"] == (0o160000, str(second).encode())
    assert tree == _git_add_all_tree(path, tmp_path)


# -- prove --worktree and apply (Docker) ------------------------------------------------


@pytest.fixture(scope="module")
def proven(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The loop: the agent edits a scratch clone, `prove --worktree` proves it there."""
    tmp = tmp_path_factory.mktemp("loop")
    assert main(["keygen", "--out", str(tmp / "keys")]) == 0
    assert main(["keygen", "--out", str(tmp / "other")]) == 0
    _, real = _checkout(tmp, "real")
    scratch = tmp / "scratch"
    shutil.copytree(real, scratch, symlinks=True)
    _agent_edits(pygit2.Repository(str(scratch)), scratch)
    before = snapshot(scratch)
    out = tmp / "out"
    key = str(tmp / "keys" / "proofgate.key")
    code = main(["prove", "--repo", str(scratch), "--worktree", "--key", key, "--out", str(out)])
    assert code == 0
    assert snapshot(scratch) == before
    return {
        "real": real,
        "out": out,
        "pub": tmp / "keys" / "proofgate.pub",
        "key": tmp / "keys" / "proofgate.key",
        "other": tmp / "other" / "proofgate.pub",
        "scratch": scratch,
    }


def _target(proven: dict[str, Path], tmp_path: Path) -> tuple[pygit2.Repository, Path]:
    target = tmp_path / "checkout"
    shutil.copytree(proven["real"], target, symlinks=True)
    return pygit2.Repository(str(target)), target


def _apply(
    proven: dict[str, Path], target: Path, *extra: str, receipt_path: Path | None = None
) -> int:
    rec = receipt_path or proven["out"] / "receipt.json"
    args = ["apply", str(rec), "--repo", str(target), *extra]
    if "--key" not in extra:
        args += ["--key", str(proven["pub"])]
    return main(args)


@pytest.mark.docker
def test_prove_worktree_receipt_is_local_and_names_the_synthetic_head(
    proven: dict[str, Path],
) -> None:
    predicate = _predicate((proven["out"] / "receipt.json").read_bytes())
    assert predicate["verdict"] == "PROVEN"
    assert predicate["trigger"] == {"kind": "local", "base_ref": "refs/heads/main"}
    assert predicate["worktree"] == {"untracked": UNTRACKED}
    head, tree, files = _capture(proven["scratch"])
    assert predicate["head"] == {"commit": head, "tree": tree}  # deterministic commit
    assert predicate["proven_tree"] == tree
    assert files == EXPECTED_HEAD
    assert head not in pygit2.Repository(str(proven["scratch"]))  # private store only


@pytest.mark.docker
def test_apply_is_exact_and_touches_only_the_working_tree(
    proven: dict[str, Path], tmp_path: Path
) -> None:
    repo, target = _target(proven, tmp_path)
    predicate = _predicate((proven["out"] / "receipt.json").read_bytes())
    git_before = snapshot(target / ".git")
    assert _apply(proven, target) == 0
    assert snapshot(target / ".git") == git_before  # no index, object or ref change
    assert _capture(target)[1] == predicate["proven_tree"]
    assert (target / "a.txt").read_bytes() == b"fixed\n"
    assert os.readlink(target / "link") == "a.txt"
    assert os.stat(target / "run.sh").st_mode & 0o111
    assert not (target / "gone.txt").exists()
    assert str(repo.head.target) == predicate["base"]["commit"]  # type: ignore[index]


def _resigned(proven: dict[str, Path], tmp_path: Path, **changes: object) -> Path:
    """The receipt's statement with `changes`, signed again with the trusted key."""
    statement = json.loads(
        base64.b64decode(json.loads((proven["out"] / "receipt.json").read_bytes())["payload"])
    )
    statement["predicate"].update(changes)
    key = receipt.load_private_key(proven["key"].read_bytes(), source="test key")
    out = tmp_path / "resigned"
    out.mkdir()
    (out / "receipt.json").write_bytes(receipt.sign(receipt.serialize(statement), key))
    shutil.copy(proven["out"] / "patch.diff", out / "patch.diff")
    return out / "receipt.json"


def _tampered_signature(proven: dict[str, Path], tmp_path: Path) -> Path:
    doc = json.loads((proven["out"] / "receipt.json").read_bytes())
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[0] ^= 1
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    out = tmp_path / "tampered"
    out.mkdir()
    (out / "receipt.json").write_text(json.dumps(doc))
    shutil.copy(proven["out"] / "patch.diff", out / "patch.diff")
    return out / "receipt.json"


def _head_moved(repo: pygit2.Repository, path: Path) -> None:
    commit(repo, {b"other.txt": b"someone else's commit\n"}, message="moved")
    checkout(repo)


def _dirty(repo: pygit2.Repository, path: Path) -> None:
    (path / "b.txt").write_bytes(b"local edit\n")


def _untracked(repo: pygit2.Repository, path: Path) -> None:
    (path / "notes.txt").write_bytes(b"an untracked file\n")


def _staged(repo: pygit2.Repository, path: Path) -> None:
    (path / "b.txt").write_bytes(b"staged\n")
    repo.index.add("b.txt")
    repo.index.write()
    (path / "b.txt").write_bytes(b"b1\n")  # the working tree equals the base again


@pytest.mark.docker
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("bad-signature", "does not verify"),
        ("wrong-key", "does not verify"),
        ("patch-digest", "the patch file has sha256"),
        ("not-proven", "verdict is FAILED"),
        ("head-moved", "HEAD moved"),
        ("dirty-working-tree", "differs from the receipt's base: M b.txt"),
        ("untracked-file", "differs from the receipt's base: A notes.txt"),
        ("staged-change", "the index has staged changes: M b.txt"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " not in v else "",
)
def test_apply_refuses_every_mismatch_and_changes_nothing(
    proven: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    expected: str,
) -> None:
    repo, target = _target(proven, tmp_path)
    extra: list[str] = []
    receipt_path: Path | None = None
    match case:
        case "bad-signature":
            receipt_path = _tampered_signature(proven, tmp_path)
        case "wrong-key":
            extra = ["--key", str(proven["other"])]
        case "patch-digest":
            bad = tmp_path / "bad.diff"
            bad.write_bytes((proven["out"] / "patch.diff").read_bytes() + b"\n")
            extra = ["--patch", str(bad)]
        case "not-proven":
            receipt_path = _resigned(proven, tmp_path, verdict="FAILED")
        case "head-moved":
            _head_moved(repo, target)
        case "dirty-working-tree":
            _dirty(repo, target)
        case "untracked-file":
            _untracked(repo, target)
        case "staged-change":
            _staged(repo, target)
    before = snapshot(target)
    capsys.readouterr()
    assert _apply(proven, target, *extra, receipt_path=receipt_path) == 1
    err = capsys.readouterr().err
    assert "apply refused" in err
    assert expected in err
    assert snapshot(target) == before


@pytest.mark.docker
def test_agent_relying_on_an_ignored_file_is_failed(tmp_path: Path) -> None:
    """Ignored files are not evidence: a check that needs one fails in the clean room."""
    repo = make_repo(tmp_path)
    config = CONFIG.replace(
        b'"grep -q fixed a.txt && test -x run.sh && test -f new.txt && test ! -e gone.txt"',
        b'"test -f build/generated.txt"',
    )
    commit(repo, {b".github/proofgate.yml": config, b".gitignore": b"build/\n"})
    checkout(repo)
    path = repo_dir(repo)
    (path / "build").mkdir()
    (path / "build" / "generated.txt").write_bytes(b"only on the agent's machine\n")
    before = snapshot(path)
    out = tmp_path / "out"
    assert main(["prove", "--repo", str(path), "--worktree", "--out", str(out)]) == 10
    assert snapshot(path) == before
    predicate = _predicate((out / "receipt.json").read_bytes())
    assert predicate["verdict"] == "FAILED"
    assert predicate["inventory"] == []


@pytest.mark.docker
def test_agent_committing_laxer_rules_in_its_scratch_clone_cannot_apply(
    proven: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the scratch clone the agent controls HEAD: a receipt judged by its own config
    verifies, but `apply` refuses it in a checkout whose HEAD is not its base."""
    scratch = tmp_path / "scratch"
    shutil.copytree(proven["real"], scratch, symlinks=True)
    agent = pygit2.Repository(str(scratch))
    lax = CONFIG.split(b"    test:")[0] + b'    test: "true"\n'
    commit(agent, {b".github/proofgate.yml": lax}, message="agent: relax the rules")
    checkout(agent)
    (scratch / "a.txt").write_bytes(b"still broken\n")
    out = tmp_path / "out"
    key = str(proven["key"])
    assert (
        main(["prove", "--repo", str(scratch), "--worktree", "--key", key, "--out", str(out)]) == 0
    )
    assert main(["verify", str(out / "receipt.json"), "--key", str(proven["pub"])]) == 0
    _, target = _target(proven, tmp_path)
    before = snapshot(target)
    capsys.readouterr()
    assert _apply(proven, target, receipt_path=out / "receipt.json") == 1
    assert "HEAD moved" in capsys.readouterr().err
    assert snapshot(target) == before


@pytest.mark.docker
def test_apply_of_a_branch_receipt_including_a_committed_ignored_file(
    proven: dict[str, Path], tmp_path: Path
) -> None:
    """`apply` takes any PROVEN receipt, also `--base/--head`; a committed file that an
    ignore rule matches is still part of the proven tree it checks afterwards."""
    repo = make_repo(tmp_path)
    config = CONFIG.split(b"    test:")[0] + b'    test: "test -f kept.log"\n'
    base = commit(repo, {b".github/proofgate.yml": config, b".gitignore": b"*.log\n"})
    commit(repo, {b"kept.log": b"committed anyway\n"}, branch="pr", parent=base)
    checkout(repo)
    path = repo_dir(repo)
    out = tmp_path / "out"
    key = str(proven["key"])
    args = ["--base", "main", "--head", "pr", "--key", key, "--out", str(out)]
    assert main(["prove", "--repo", str(path), *args]) == 0
    assert _apply(proven, path, receipt_path=out / "receipt.json") == 0
    assert (path / "kept.log").read_bytes() == b"committed anyway\n"


@pytest.mark.docker
def test_apply_writes_the_proven_bytes_whatever_the_users_whitespace_setting(
    proven: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's global `apply.whitespace=fix` must not rewrite the proven patch on its way
    into the working tree (it would leave a tree that is not the proven one behind)."""
    repo = make_repo(tmp_path)
    config = CONFIG.split(b"    test:")[0] + b"    test: \"grep -q ' $' ws.txt\"\n"
    base = commit(repo, {b".github/proofgate.yml": config})
    commit(repo, {b"ws.txt": b"trailing blanks   \n"}, branch="pr", parent=base)
    checkout(repo)
    path = repo_dir(repo)
    out = tmp_path / "out"
    args = ["--base", "main", "--head", "pr", "--key", str(proven["key"]), "--out", str(out)]
    assert main(["prove", "--repo", str(path), *args]) == 0
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_bytes(b"[apply]\n\twhitespace = fix\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    assert _apply(proven, path, receipt_path=out / "receipt.json") == 0
    assert (path / "ws.txt").read_bytes() == b"trailing blanks   \n"
