"""`proofgate` command line (SPEC §5). `main(argv) -> int`; exit codes per SPEC §3/§5.

Ten subcommands, each one short handler mapping adapters' errors to exit codes; their
arguments are `parser.py`'s, the work lives in the modules they call.

Machine output goes to stdout (`--json`); everything for humans goes to stderr through
the `gate` logger.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gate.errors import GateError, UsageError
from gate.faces.parser import ENV_SIGNING_KEY, EXIT_USAGE, build_parser
from gate.model import BaseReceipt, JsonDict, Trigger, TriggerKind, Verdict
from gate.util.bounded import FileTooLarge, read_bounded, sha256_bounded

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from gate.git.repo import GitRepository
    from gate.model import Approval
    from gate.proof.policy_run import TagOracle
    from gate.proof.prove import ProveRequest
    from gate.proof.shard import ShardSpec
    from gate.sandbox.interface import Sandbox

log = logging.getLogger("gate")

EXIT_VERIFY_FAILED = 1
EXIT_INTERRUPTED = 130

_Kind = Literal["key", "receipt", "approval", "patch"]  # of a file named on the command line


def _setup_logging(verbose: int) -> None:
    env = os.environ.get("PROOFGATE_LOGLEVEL", "").upper()
    level = logging.DEBUG if verbose > 1 else logging.INFO
    if env in ("DEBUG", "INFO", "WARNING", "ERROR"):
        level = getattr(logging, env)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("proofgate: %(message)s"))
    root = logging.getLogger("gate")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _prepare_out_dir(out: Path) -> None:
    """Create `out` (a directory we can write) before any work is done.

    Raises:
        UsageError: it exists as something else, or cannot be created or written.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot use --out {out}: {e.strerror or e}") from e
    if not os.access(out, os.W_OK):
        raise UsageError(f"cannot use --out {out}: not writable")


def _limit(kind: _Kind) -> tuple[int, str]:
    """The most bytes a file of `kind` named on the command line may hold, and its name."""
    match kind:
        case "key":
            from gate.receipt.keys import MAX_KEY_BYTES

            return MAX_KEY_BYTES, "a key"
        case "receipt":
            from gate.receipt.dsse import MAX_RECEIPT_BYTES

            return MAX_RECEIPT_BYTES, "a receipt"
        case "approval":
            from gate.proof.approval import MAX_APPROVAL_BYTES

            return MAX_APPROVAL_BYTES, "an approval"
        case "patch":
            from gate.receipt.files import MAX_PATCH_BYTES

            return MAX_PATCH_BYTES, "a patch"


def _read_file(path: Path, kind: _Kind) -> bytes:
    """`path`'s bytes; never more than `kind`'s limit is read (a 2 GiB file, /dev/zero).

    Raises:
        FileTooLarge: it holds more (an OSError).
        OSError: it cannot be read.
    """
    limit, name = _limit(kind)
    return read_bounded(path, limit, name)


def _unreadable(path: Path, e: OSError, what: str = "") -> str:
    """Why `path` (`what`: the flag that named it) was not read, naming it (and the limit)."""
    named = f"{what} {path}" if what else str(path)
    if isinstance(e, FileTooLarge):
        return f"{named} is {e.strerror}"
    return f"cannot read {named}: {e.strerror}"


def _patch_digest(path: Path) -> str:
    """`verify --patch`: the file's SHA-256, hashed as it is read (never held whole).

    Raises:
        UsageError: it cannot be read, or holds more than a patch's limit.
    """
    limit, name = _limit("patch")
    try:
        return sha256_bounded(path, limit, name)
    except OSError as e:
        raise UsageError(_unreadable(path, e, "--patch")) from e


def _read(path: Path, what: str, kind: _Kind) -> bytes:
    """`_read_file` for an input whose problem is a usage error (exit 2).

    Raises:
        UsageError: `path` cannot be read, or holds more than `kind`'s limit.
    """
    try:
        return _read_file(path, kind)
    except OSError as e:
        raise UsageError(_unreadable(path, e, what)) from e


def _short(value: object, n: int = 12) -> str:
    return str(value)[:n] if value else "-"


def _describe_event(kind: object, d: dict[str, object]) -> str | None:
    """One human line for the progress events worth showing; None for the rest."""
    match kind:
        case "evidence-captured":
            tree = _short(d.get("proven_tree")) if d.get("proven_tree") else "none"
            return (
                f"evidence: base {_short(d.get('base'))}, head {_short(d.get('head'))}, "
                f"merge-base {_short(d.get('merge_base'))}; patch {d.get('files')} file(s), "
                f"sha256 {_short(d.get('patch_sha256'))}; proven tree {tree}"
            )
        case "config-loaded":
            source = d.get("source")
            if not isinstance(source, dict):
                return "config: none in the base commit"
            blob = _short(source.get("blob"), 19)
            return f"config: {source.get('source')} {source.get('path')} ({blob})"
        case "policy-decided":
            return f"policy: {d.get('decision')} ({d.get('findings')} finding(s))"
        case "image-resolved":
            return f"image: {d.get('name')} -> {_short(d.get('digest'), 19)}"
        case "command-finished":
            argv = d.get("argv")
            shown = " ".join(map(str, argv)) if isinstance(argv, list) else str(argv)
            status = "timed out" if d.get("timed_out") else f"exit {d.get('exit_code')}"
            where = f"{d.get('check')} / {d.get('phase')}"
            return f"  {where}: `{shown[:80]}` {status} in {d.get('duration_s')} s"
        case "sandbox-unavailable" | "sandbox-lost" | "image-unresolved" | "unsafe-tree":
            return f"{kind}: {d.get('error')}"
        case _:
            return None


def _print_event(event: JsonDict) -> None:
    data = event.get("data")
    d = data if isinstance(data, dict) else {}
    log.debug("journal %s %s %s", event.get("seq"), event.get("kind"), json.dumps(d)[:300])
    line = _describe_event(event.get("kind"), d)
    if line is not None:
        log.info("%s", line)


def _cmd_prove(args: argparse.Namespace, *, run_checks: bool) -> int:
    from gate import receipt
    from gate.errors import ApprovalRejected
    from gate.git.repo import GitRepository
    from gate.proof import approval as approval_mod
    from gate.proof.prove import ProveRequest, prove

    key_pem: bytes | None = None
    approver_keys: list[Ed25519PublicKey] = []
    if run_checks:
        if args.key is not None:
            key_pem = _read(args.key, "--key", "key")
        elif os.environ.get(ENV_SIGNING_KEY):
            key_pem = os.environ[ENV_SIGNING_KEY].encode("utf-8")
        if key_pem is not None:
            approver_keys.append(
                receipt.load_private_key(key_pem, source="the signing key").public_key()
            )
        approver_keys.extend(
            receipt.load_public_key(_read(path, "--approver-key", "key"), source=str(path))
            for path in args.approver_key
        )
    approval_doc = (
        _read(args.approval, "--approval", "approval") if run_checks and args.approval else None
    )
    if approval_doc is not None and not approver_keys:
        raise UsageError("--approval needs a trusted key: pass --key or --approver-key")

    def approver(patch_sha256: str, fingerprint: str) -> Approval | None:
        if approval_doc is None:
            return None
        try:
            return approval_mod.verify_approval(
                approval_doc,
                approver_keys,
                patch_sha256=patch_sha256,
                policy_fingerprint=fingerprint,
            )
        except receipt.ReceiptError as e:
            raise ApprovalRejected(f"the approval in {args.approval} does not count: {e}") from e

    if args.worktree and args.head is not None:
        raise UsageError("--worktree makes the working tree the head: give --base only, not --head")
    if not args.worktree and (args.base is None or args.head is None):
        raise UsageError(f"{args.command} needs --base REV and --head REV, or --worktree")
    out: Path | None = getattr(args, "out", None)
    if out is not None:
        _prepare_out_dir(out)
    with GitRepository(args.repo) as evidence:
        base = args.base or "HEAD"
        request = ProveRequest(
            base=base,
            head=args.head or "",
            config_file=args.config,
            signing_key_pem=key_pem,
            run_checks=run_checks,
            shard=_shard_arg(args),
            balance=_balance_arg(args),
            base_receipt=_base_receipt_arg(args),
            # SPEC §4: a local run; base_ref only when --base names a local branch
            trigger=Trigger(kind=TriggerKind.LOCAL, base_ref=evidence.local_branch(base)),
        )
        if args.worktree:
            request = _worktree_request(request, evidence)
        run = prove(
            dataclasses.replace(request, repo_dir=evidence.workdir),
            evidence=evidence,
            sandbox=lambda proof: _docker_sandbox(bool(getattr(args, "allow_pull", False)), proof),
            approver=approver,
            on_event=_print_event,
            tags=_tag_oracle(),
        )
    if run_checks and not run.signed:
        log.warning(
            "WARNING: the receipt is UNSIGNED (no --key and no %s): nobody can verify it",
            ENV_SIGNING_KEY,
        )
    if out is not None:
        try:
            receipt.write_receipt_files(
                out, envelope=run.envelope, markdown=run.markdown, patch=run.patch
            )
        except OSError as e:
            raise UsageError(f"cannot write the receipt into --out {out}: {e.strerror}") from e
        log.info("wrote %s, receipt.md and patch.diff", out / "receipt.json")
    if args.json:
        sys.stdout.write(json.dumps(run.predicate, indent=2, ensure_ascii=False) + "\n")
    for reason in run.reasons:
        prefix = f"[{reason.check}] " if reason.check else ""
        log.info("reason %s: %s%s", reason.code.value, prefix, reason.message)
    if not run_checks:
        log.info("policy: %s", run.policy_decision.value)
        if run.verdict is Verdict.INCONCLUSIVE:
            return Verdict.INCONCLUSIVE.exit_code
        return {"ALLOW": 0, "HOLD": 11, "DENY": 12}[run.policy_decision.value]
    if run.shard_verdict is not None:
        from gate.proof.shard import exit_code

        log.info(
            "shard verdict: %s (the receipt counts through `proofgate aggregate`)",
            run.shard_verdict.value,
        )
        # SPEC §3.3: a share PROVEN or HELD exits 0, so the matrix reaches the aggregate
        return exit_code(run.shard_verdict)
    log.info("verdict: %s", run.verdict.value)
    return run.verdict.exit_code


def _tag_oracle() -> TagOracle | None:
    """SPEC §2.1: with `GITHUB_TOKEN` or `GH_TOKEN` set, a local run looks up the tags its
    pins name on GitHub (`GITHUB_API_URL`, default api.github.com) as the Action does;
    without one the findings say that they could not verify."""
    token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
    if not token:
        return None
    from gate.github.checks import GitHubChecks

    api_url = os.environ.get("GITHUB_API_URL") or "https://api.github.com"
    # the look-ups name their own repositories; this one is never asked
    return GitHubChecks("proofgate/local-run", token, api_url=api_url)


def _docker_sandbox(allow_pull: bool, proof: str | None = None) -> Sandbox:
    # Imported when a check is about to run: `policy` never loads the Docker SDK.
    from gate.sandbox.docker import DockerSandbox

    return DockerSandbox(proof=proof, allow_pull=allow_pull)


def _shard_arg(args: argparse.Namespace) -> ShardSpec | None:
    from gate.proof.shard import parse_shard

    text = getattr(args, "shard", None)
    if text is None:
        if getattr(args, "balance_from", None) is not None:
            raise UsageError("--balance-from only means something with --shard")
        return None
    return parse_shard(text)


def _balance_arg(args: argparse.Namespace) -> dict[str, dict[str, float]] | None:
    """Per check, seconds per test file, from a receipt verified with --balance-key."""
    from gate import receipt

    path = getattr(args, "balance_from", None)
    if path is None:
        return None
    if not args.balance_key:
        raise UsageError("--balance-from needs --balance-key PUB: only a verified receipt counts")
    keys = [
        receipt.load_public_key(_read(p, "--balance-key", "key"), source=str(p))
        for p in args.balance_key
    ]
    try:
        verified = receipt.verify(_read(path, "--balance-from", "receipt"), receipt.Signed(keys))
    except receipt.ReceiptError as e:
        raise UsageError(f"--balance-from {path} does not verify: {e}") from e
    from gate.proof.shard import recorded_durations

    return recorded_durations(verified.predicate.to_dict())


def _base_receipt_arg(args: argparse.Namespace) -> BaseReceipt | None:
    """SPEC §3.1: the receipt of the base tree's own proof, verified with --base-key. One
    that does not verify is not an error: the proof says why and runs the base's tests,
    as it would without it."""
    import hashlib

    from gate import receipt

    path = getattr(args, "base_receipt", None)
    if path is None:
        if getattr(args, "base_key", None):
            raise UsageError("--base-key only means something with --base-receipt")
        return None
    if not args.base_key:
        raise UsageError("--base-receipt needs --base-key PUB: only a verified receipt counts")
    keys = [
        receipt.load_public_key(_read(p, "--base-key", "key"), source=str(p)) for p in args.base_key
    ]
    envelope = _read(path, "--base-receipt", "receipt")
    digest = hashlib.sha256(envelope).hexdigest()
    try:
        verified = receipt.verify(envelope, receipt.Signed(keys))
    except receipt.ReceiptError as e:
        log.warning("--base-receipt %s does not verify (%s): the base's tests run", path, e)
        return BaseReceipt(digest=digest, refused=str(e))
    raw = verified.statement.get("predicate")
    return BaseReceipt(digest=digest, predicate=raw if isinstance(raw, dict) else None)


def _cmd_aggregate(args: argparse.Namespace) -> int:
    from gate import receipt
    from gate.proof.aggregate import AggregateError, aggregate, shard_patch
    from gate.receipt.files import PATCH_DIFF

    keys = _load_keys(args.key)
    key_pem: bytes | None = None
    if args.signing_key is not None:
        key_pem = _read(args.signing_key, "--signing-key", "key")
    elif os.environ.get(ENV_SIGNING_KEY):
        key_pem = os.environ[ENV_SIGNING_KEY].encode("utf-8")
    signing = (
        receipt.load_private_key(key_pem, source="the signing key") if key_pem is not None else None
    )
    envelopes = [_read(p, "RECEIPT", "receipt") for p in args.receipts]
    out: Path | None = args.out
    if out is not None:
        _prepare_out_dir(out)
    try:
        run = aggregate(envelopes, keys, signing_key=signing, clock=time.time)
    except AggregateError as e:
        sys.stderr.write(f"proofgate: aggregate failed: {e}\n")
        return EXIT_VERIFY_FAILED
    if signing is None:
        log.warning(
            "WARNING: the aggregate receipt is UNSIGNED (no --signing-key and no %s)",
            ENV_SIGNING_KEY,
        )
    if out is not None:
        neighbours: dict[str, bytes] = {}
        for p in args.receipts:
            try:
                neighbours[str(p)] = _read_file(p.parent / PATCH_DIFF, "patch")
            except FileTooLarge as e:
                log.warning("%s: left out", e)
            except OSError:
                continue
        patch = shard_patch(neighbours, str(_get_patch_digest(run.predicate)))
        try:
            if patch is not None:
                receipt.write_receipt_files(
                    out, envelope=run.envelope, markdown=run.markdown, patch=patch
                )
            else:
                (out / "receipt.json").write_bytes(run.envelope)
                (out / "receipt.md").write_text(run.markdown, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write the receipt into --out {out}: {e.strerror}") from e
        log.info("wrote %s and receipt.md", out / "receipt.json")
    if args.json:
        sys.stdout.write(json.dumps(run.predicate, indent=2, ensure_ascii=False) + "\n")
    for reason in run.reasons:
        prefix = f"[{reason.check}] " if reason.check else ""
        log.info("reason %s: %s%s", reason.code.value, prefix, reason.message)
    log.info("verdict: %s", run.verdict.value)
    return run.verdict.exit_code


def _get_patch_digest(predicate: Mapping[str, object]) -> object:
    patch = predicate.get("patch")
    return patch.get("sha256") if isinstance(patch, dict) else None


def _worktree_request(request: ProveRequest, evidence: GitRepository) -> ProveRequest:
    """Capture the working tree and make its synthetic commit the head (issue 20)."""
    from dataclasses import replace

    from gate.model import Trigger, TriggerKind

    snap = evidence.capture_worktree()
    log.info("worktree: captured as %s (%d untracked)", snap.commit[:12], len(snap.untracked))
    if request.base == "HEAD":
        base_ref = snap.head_ref
    else:
        base_ref = request.trigger.base_ref if request.trigger is not None else None
    trigger = Trigger(kind=TriggerKind.LOCAL, base_ref=base_ref)
    return replace(request, head=snap.commit, trigger=trigger)


def _load_keys(paths: Sequence[Path]) -> list[Ed25519PublicKey]:
    from gate import receipt

    return [receipt.load_public_key(_read(p, "--key", "key"), source=str(p)) for p in paths]


def _branch_arg(value: str | None) -> str | None:
    from gate.receipt.verify import branch_ref

    if value is None:
        return None
    try:
        return branch_ref(value)
    except ValueError as e:
        raise UsageError(f"--branch: {e}") from e


def _cmd_verify(args: argparse.Namespace) -> int:
    from gate import receipt

    keys = _load_keys(args.key)
    branch = _branch_arg(args.branch)
    if args.github:
        if not args.commit:
            raise UsageError("verify --github needs --commit SHA")
        if args.receipt is not None:
            raise UsageError("give either a RECEIPT file or --github, not both")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", args.github):
            raise UsageError(f"--github expects OWNER/REPO, got {args.github!r}")
        if not (os.environ.get("GITHUB_TOKEN") or os.environ.get("PROOFGATE_GITHUB_TOKEN")):
            raise UsageError(
                "verify --github reads the check runs with a token: set GITHUB_TOKEN "
                "(a token with `checks: read` on the repository)"
            )
        if args.repository is not None and args.repository != args.github:
            raise UsageError(f"--repository {args.repository} contradicts --github {args.github}")
        from gate.github.checks import GitHubChecks
        from gate.github.interface import GitHubError
        from gate.github.receipts import LocalTrees, find_valid_receipt

        api = GitHubChecks.from_env({**os.environ, "GITHUB_REPOSITORY": args.github})
        try:
            with LocalTrees(args.repo) as trees:
                found, message = find_valid_receipt(
                    api,
                    args.commit,
                    keys,
                    args.require,
                    blob_at=trees.blob_at,
                    branch=branch,
                    accept_reproof=args.accept_reproof,
                    config_path=args.config_path,
                )
            ok = found is not None
        except GitHubError as e:
            ok, message = False, f"cannot read the receipts from GitHub: {e}"
        if ok:
            log.info("%s", message)
            return 0
        sys.stderr.write(f"proofgate: verify failed: {message}\n")
        return EXIT_VERIFY_FAILED
    if args.receipt is None:
        raise UsageError("verify needs a RECEIPT file or --github OWNER/REPO")
    if args.accept_reproof and branch is None:
        raise UsageError("--accept-reproof only means something with --branch")
    try:
        envelope = _read_file(args.receipt, "receipt")
    except OSError as e:  # SPEC §5: 1, as for anything that is not a valid receipt
        sys.stderr.write(f"proofgate: verify failed: {_unreadable(args.receipt, e)}\n")
        return EXIT_VERIFY_FAILED
    patch_sha256 = _patch_digest(args.patch) if args.patch else None
    triggers = None
    if branch is not None:  # a release-style check: how the change reached the branch
        triggers = {TriggerKind.PULL_REQUEST, TriggerKind.MERGE_GROUP}
        if args.accept_reproof:
            triggers.add(TriggerKind.COMMIT)
    expect = receipt.expectations(
        keys,
        commit=args.commit,
        tree=args.tree,
        patch_sha256=patch_sha256,
        repository=args.repository,
        branch=branch,
        triggers=triggers,
        changed=branch is not None and not args.accept_reproof,
        require=args.require,
    )
    from gate.github.receipts import LocalTrees

    with LocalTrees(args.repo) as trees:
        if branch is not None and args.commit:
            # SPEC §5: the same checks as --github, from the local copy of the release:
            # the proven tree is the released commit's own tree, the configuration blob
            # is the one at the configuration path in that tree
            released = trees.commit_tree(args.commit)
            expect = receipt.AllOf(
                expect,
                receipt.Subject(tree=released),
                receipt.ConfigBlob(
                    blob_at=lambda path: trees.blob_at(released, path), path=args.config_path
                ),
            )
        try:
            verified = receipt.verify(envelope, expect)
        except receipt.ReceiptError as e:
            sys.stderr.write(f"proofgate: verify failed: {e}\n")
            return EXIT_VERIFY_FAILED
    log.info("receipt verified: verdict %s", verified.verdict)
    builder = verified.predicate.builder
    if builder is not None:
        log.info(
            "signed by workflow %s (run %s, %s)", builder.workflow, builder.run_id, builder.ref
        )
    return 0


def _cmd_apply(args: argparse.Namespace) -> int:
    from gate.proof.promote import ApplyDiverged, ApplyRefused, apply_receipt

    keys = _load_keys(args.key)
    patch_path: Path = args.patch or args.receipt.parent / "patch.diff"
    try:
        envelope = _read_file(args.receipt, "receipt")
        patch = _read_file(patch_path, "patch")
    except OSError as e:
        sys.stderr.write(f"proofgate: apply refused: {_unreadable(Path(e.filename), e)}\n")
        return EXIT_VERIFY_FAILED
    try:
        done = apply_receipt(envelope, patch, keys, Path(args.repo))
    except ApplyRefused as e:
        what = (
            "apply did not end at the proven tree"
            if isinstance(e, ApplyDiverged)
            else "apply refused"
        )
        sys.stderr.write(f"proofgate: {what}: {e}\n")
        return EXIT_VERIFY_FAILED
    log.info("%s", done)
    return 0


def _has_signatures(envelope: bytes) -> bool:
    try:
        doc = json.loads(envelope)
    except ValueError:
        return False
    return isinstance(doc, dict) and bool(doc.get("signatures"))


def _cmd_show(args: argparse.Namespace) -> int:
    from gate import receipt
    from gate.receipt import render

    try:
        envelope = _read_file(args.receipt, "receipt")
    except FileTooLarge as e:  # as any other file that is not a receipt: 1
        sys.stderr.write(f"proofgate: cannot show {args.receipt}: it is {e.strerror}\n")
        return EXIT_VERIFY_FAILED
    except OSError as e:
        raise UsageError(_unreadable(args.receipt, e, "receipt")) from e
    try:
        if args.key:
            statement = receipt.verify_statement(envelope, _load_keys(args.key))
        else:
            statement = receipt.unverified_statement(envelope)
            log.warning("shown UNVERIFIED: pass --key PUB to check the signature first")
    except receipt.ReceiptError as e:
        what = "did not verify" if args.key else "is not a receipt"
        sys.stderr.write(f"proofgate: cannot show {args.receipt}: it {what}: {e}\n")
        return EXIT_VERIFY_FAILED
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        sys.stderr.write(f"proofgate: {args.receipt} has no predicate\n")
        return EXIT_VERIFY_FAILED
    if args.json:
        sys.stdout.write(render.to_json(predicate) + "\n")
    else:
        # Without a key nothing was checked: the page itself must say so (a junk signature
        # is still "some signature").
        sys.stdout.write(
            render.to_markdown(predicate, signed=_has_signatures(envelope), verified=bool(args.key))
        )
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    """`proofgate cache ls|prune`: the environment cache (docs/performance.md); prune
    also removes the leftovers of proofs whose process has ended and the bytecode
    listings of images that are gone (docs/cleanup.md)."""
    import docker

    from gate.sandbox import bytecode, envcache, labels
    from gate.sandbox.errors import DockerRefused
    from gate.sandbox.interface import SandboxError

    try:
        api = docker.from_env().api
        if args.action == "prune":
            gone = envcache.prune(api, keep=max(0, args.keep))
            log.info("removed %d cached environment(s)", len(gone))
            left = labels.prune_dead(api)
            log.info("removed %d object(s) left by proofs that ended", len(left.removed))
            for thing in left.removed:
                log.debug("removed %s", thing)
            for thing in left.failed:
                log.warning("could not remove %s", thing)
            if left.live or left.unknown:
                log.info(
                    "kept %d object(s) of running proofs and %d of proofs run elsewhere "
                    "(another machine or container: docs/cleanup.md says how to remove them)",
                    left.live,
                    left.unknown,
                )
            listings = bytecode.prune(api)
            log.info("removed %d bytecode listing(s) of images that are gone", len(listings))
            return 1 if left.failed else 0
        for e in envcache.entries(api):
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.created))
            sys.stdout.write(f"{e.image[7:19]}  {when}  {e.size >> 20:>6} MiB  key {e.key}\n")
    except (docker.errors.DockerException, DockerRefused, SandboxError) as e:
        raise UsageError(f"cannot reach the Docker daemon: {e}") from e
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    from gate import receipt

    out: Path = args.out
    _prepare_out_dir(out)
    priv, pub = receipt.generate_keypair()
    key_path, pub_path = out / "proofgate.key", out / "proofgate.pub"
    for path in (key_path, pub_path):
        if path.exists():
            raise UsageError(f"{path} exists already; not overwriting a key")
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(priv)
    os.chmod(key_path, 0o600)
    pub_path.write_bytes(pub)
    keyid = receipt.keyid(receipt.load_public_key(pub, source=str(pub_path)))
    log.info("wrote %s (private, 0600) and %s; keyid %s", key_path, pub_path, keyid)
    return 0


def _cmd_approve(args: argparse.Namespace) -> int:
    from gate import receipt
    from gate.proof import approval
    from gate.util.timefmt import rfc3339

    key = receipt.load_private_key(_read(args.key, "--key", "key"), source=str(args.key))
    patch_sha256, fingerprint = args.patch_sha256, args.policy_fingerprint
    if args.receipt is not None:
        statement = receipt.unverified_statement(_read(args.receipt, "--receipt", "receipt"))
        predicate = statement.get("predicate")
        if isinstance(predicate, dict):
            patch = predicate.get("patch")
            pol = predicate.get("policy")
            if isinstance(patch, dict) and isinstance(pol, dict):
                patch_sha256 = patch_sha256 or patch.get("sha256")
                fingerprint = fingerprint or pol.get("fingerprint")
    if not patch_sha256 or not fingerprint:
        raise UsageError("approve needs --receipt, or --patch-sha256 and --policy-fingerprint")
    for flag, value in (("patch-sha256", patch_sha256), ("policy-fingerprint", fingerprint)):
        if not re.fullmatch(r"[0-9a-f]{64}", str(value)):
            raise UsageError(f"--{flag} must be 64 lowercase hex digits, got {value!r}")
    doc = approval.create_approval(
        approver=args.approver,
        approved_at=rfc3339(time.time()),
        patch_sha256=str(patch_sha256),
        policy_fingerprint=str(fingerprint),
        key=key,
    )
    args.out.write_bytes(doc)
    log.info("wrote approval %s for patch %s", args.out, str(patch_sha256)[:12])
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from gate.faces.demo import run_demo

    return run_demo(out=args.out, image=args.image)


def main(argv: list[str] | None = None) -> int:
    """The `proofgate` command (the console script and `python -m gate`): its exit code.

    While it runs, SIGTERM (what a CI system sends on cancel) raises KeyboardInterrupt as
    Ctrl-C does, so a cancelled proof still removes what it made and writes its
    INCONCLUSIVE `interrupted` receipt; the caller's handler is back on return."""
    from gate.util.signals import sigterm_as_interrupt

    with sigterm_as_interrupt():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    _setup_logging(args.verbose)
    try:
        match args.command:
            case "prove":
                return _cmd_prove(args, run_checks=True)
            case "policy":
                return _cmd_prove(args, run_checks=False)
            case "verify":
                return _cmd_verify(args)
            case "aggregate":
                return _cmd_aggregate(args)
            case "show":
                return _cmd_show(args)
            case "apply":
                return _cmd_apply(args)
            case "keygen":
                return _cmd_keygen(args)
            case "approve":
                return _cmd_approve(args)
            case "demo":
                return _cmd_demo(args)
            case "cache":
                return _cmd_cache(args)
            case _:
                raise UsageError(f"unknown command {args.command!r}")
    except GateError as e:
        sys.stderr.write(f"proofgate: {e}\n")
        return e.exit_code
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        # Interrupted before a verdict existed (a proof interrupted while its checks run
        # still ends with an INCONCLUSIVE receipt). Adapters cleaned up in their `finally`.
        sys.stderr.write("proofgate: interrupted; no verdict\n")
        return EXIT_INTERRUPTED
