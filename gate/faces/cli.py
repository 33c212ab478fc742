"""`proofgate` command line (SPEC §5). `main(argv) -> int`; exit codes per SPEC §3/§5.

Its size (~700 lines) is honest: nine subcommands, each one argument parser and one
short handler mapping adapters' errors to exit codes; the work lives in the modules
they call.

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
from typing import TYPE_CHECKING

from gate import __version__
from gate.errors import GateError, UsageError
from gate.model import JsonDict, Trigger, TriggerKind, Verdict

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from gate.git.repo import GitRepository
    from gate.model import Approval
    from gate.proof.prove import ProveRequest
    from gate.proof.shard import ShardSpec
    from gate.sandbox.interface import Sandbox

log = logging.getLogger("gate")

EXIT_USAGE = 2
EXIT_VERIFY_FAILED = 1
EXIT_INTERRUPTED = 130
ENV_SIGNING_KEY = "PROOFGATE_SIGNING_KEY"


class _Parser(argparse.ArgumentParser):
    """argparse that names the program in errors and exits 2 (usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"proofgate: error: {message}\n")


def _verdict_arg(text: str) -> Verdict:
    try:
        return Verdict(text.upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(v.value for v in Verdict)}, got {text!r}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="count", default=0, help="more progress on stderr (-vv: debug)"
    )
    parser = _Parser(
        prog="proofgate",
        description="Prove a change's exact patch in a Docker clean room and sign a receipt.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"proofgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def revisions(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repo", default=".", metavar="DIR", help="the git repository (default .)")
        p.add_argument("--base", metavar="REV", help="base revision (with --worktree: HEAD)")
        p.add_argument("--head", metavar="REV", help="head revision")
        p.add_argument(
            "--worktree",
            action="store_true",
            help="the head is the working tree as it is now (tracked and non-ignored "
            "untracked files), captured without touching the repository",
        )
        p.add_argument(
            "--config",
            type=Path,
            metavar="FILE",
            help="a local configuration file you trust (default: .github/proofgate.yml "
            "from the base commit's tree)",
        )
        p.add_argument("--json", action="store_true", help="print the predicate as JSON on stdout")

    p = sub.add_parser(
        "prove",
        parents=[common],
        help="prove a change in the clean room and write a receipt",
        description="Capture the patch merge-base(base, head)..head, re-apply it to the base "
        "tip privately, run the configured checks each in a fresh container, and sign a "
        "receipt. Exit 0 PROVEN, 10 FAILED, 11 HELD, 12 BLOCKED, 13 INCONCLUSIVE, 2 usage.",
    )
    revisions(p)
    p.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help=f"Ed25519 private key (PEM) to sign the receipt; or set {ENV_SIGNING_KEY}",
    )
    p.add_argument(
        "--approval", type=Path, metavar="FILE", help="a signed approval of a HELD result"
    )
    p.add_argument(
        "--approver-key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="a public key trusted to sign approvals (repeatable; the signing key's own "
        "public key is trusted too)",
    )
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="write receipt.json, receipt.md, patch.diff"
    )
    p.add_argument(
        "--allow-pull",
        action="store_true",
        default=os.environ.get("PROOFGATE_ALLOW_PULL", "") == "1",
        help="pull the clean-room image when it is not present locally (PROOFGATE_ALLOW_PULL=1)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="prove shard I of N: the same patch, only this shard's share of each check's "
        "tests; the receipt counts only through `proofgate aggregate`; exits 0 when the "
        "share is PROVEN or HELD (an empty share included), else as its verdict",
    )
    p.add_argument(
        "--balance-from",
        type=Path,
        metavar="RECEIPT",
        help="with --shard: balance the split by the per-test durations a verified "
        "receipt records, a one-job receipt included (give the same receipt to every "
        "shard); durations that cannot balance fall back to the path-hash split, said so",
    )
    p.add_argument(
        "--balance-key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="a public key trusted to have signed the --balance-from receipt (repeatable)",
    )

    p = sub.add_parser(
        "aggregate",
        parents=[common],
        help="combine the receipts of a proof's shards into one signed receipt",
        description="Verify every shard receipt with the trusted keys, refuse a set that "
        "disagrees or misses or repeats a shard (INCONCLUSIVE), apply the differential to "
        "the union of the shards' tests and sign one receipt. Exit codes as prove; 1 when "
        "no receipt verifies.",
    )
    p.add_argument("receipts", nargs="+", type=Path, metavar="RECEIPT", help="shard receipts")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        required=True,
        metavar="PUB",
        help="a public key trusted to have signed the shard receipts (repeatable)",
    )
    p.add_argument(
        "--signing-key",
        type=Path,
        metavar="FILE",
        help=f"Ed25519 private key (PEM) to sign the aggregate; or set {ENV_SIGNING_KEY}",
    )
    p.add_argument("--out", type=Path, metavar="DIR", help="write receipt.json, receipt.md")
    p.add_argument("--json", action="store_true", help="print the predicate as JSON on stdout")

    p = sub.add_parser(
        "policy",
        parents=[common],
        help="pre-flight: evidence and policy only, runs nothing",
        description="Evidence + policy only; runs nothing. Exit 0 ALLOW, 11 HOLD, 12 DENY, "
        "13 evidence incomplete, 2 usage.",
    )
    revisions(p)

    p = sub.add_parser(
        "verify",
        parents=[common],
        help="verify a receipt's signature, journal and subjects",
        description="Exit 0 only for a valid signature by a given key whose subjects match "
        "--commit/--tree/--patch and whose verdict meets --require; 1 otherwise; 2 usage.",
    )
    p.add_argument("receipt", nargs="?", type=Path, metavar="RECEIPT", help="receipt.json (DSSE)")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        required=True,
        metavar="PUB",
        help="trusted public key (repeatable)",
    )
    p.add_argument("--commit", metavar="SHA", help="the head commit the receipt must be for")
    p.add_argument("--tree", metavar="SHA", help="the proven tree the receipt must be for")
    p.add_argument("--patch", type=Path, metavar="FILE", help="patch.diff whose sha256 must match")
    p.add_argument("--require", type=_verdict_arg, metavar="VERDICT", help="e.g. PROVEN")
    p.add_argument(
        "--github",
        metavar="OWNER/REPO",
        help="find the receipts through the commit's check runs (needs --commit; token from "
        "GITHUB_TOKEN, API from GITHUB_API_URL)",
    )
    p.add_argument(
        "--repository",
        metavar="OWNER/REPO",
        help="the repository the receipt must be for (with --github: that repository)",
    )
    p.add_argument(
        "--branch",
        metavar="REF",
        help="the branch the change must have been proven for (trigger.base_ref; NAME or "
        "refs/heads/NAME); also requires a pull_request or merge_group trigger. With "
        "--github the default is the repository's default branch",
    )
    p.add_argument(
        "--accept-reproof",
        action="store_true",
        help="also accept a re-proof of a commit (trigger kind `commit`): it proves the "
        "commit's tree, not that a policy judged the change",
    )
    p.add_argument(
        "--config-path",
        default=".github/proofgate.yml",
        metavar="PATH",
        help="with --github, or --branch and --commit: where the repository keeps its "
        "configuration; a receipt proven under a file at another path does not count "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--repo",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="with --github: a checkout holding the released commit, whose configuration "
        "blob the receipt must match (default .)",
    )

    p = sub.add_parser(
        "show", parents=[common], help="render a receipt as Markdown, or print its predicate"
    )
    p.add_argument("receipt", type=Path, metavar="RECEIPT")
    p.add_argument("--json", action="store_true", help="print the predicate as JSON")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="verify with this key first (without one, the receipt is shown unverified)",
    )

    p = sub.add_parser(
        "apply",
        parents=[common],
        help="apply a PROVEN receipt's exact patch to an unchanged working tree",
        description="Apply the receipt's patch to the working tree only if the receipt "
        "verifies, is PROVEN, the patch file matches its digest, and HEAD and the working "
        "tree still equal its base. Exit 0 applied, 1 refused (nothing changed), 2 usage.",
    )
    p.add_argument("receipt", type=Path, metavar="RECEIPT", help="receipt.json (DSSE)")
    p.add_argument(
        "--key", type=Path, action="append", required=True, metavar="PUB", help="trusted public key"
    )
    p.add_argument("--repo", default=".", metavar="DIR", help="the checkout (default .)")
    p.add_argument(
        "--patch", type=Path, metavar="FILE", help="the patch (default: patch.diff beside RECEIPT)"
    )

    p = sub.add_parser("keygen", parents=[common], help="create an Ed25519 signing key pair")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")

    p = sub.add_parser(
        "approve",
        parents=[common],
        help="sign an approval of a HELD result, bound to its patch digest and policy",
    )
    p.add_argument("--key", type=Path, required=True, metavar="FILE", help="approver's private key")
    p.add_argument(
        "--receipt", type=Path, metavar="RECEIPT", help="take digest + fingerprint from it"
    )
    p.add_argument("--patch-sha256", metavar="HEX")
    p.add_argument("--policy-fingerprint", metavar="HEX")
    p.add_argument("--approver", required=True, metavar="NAME")
    p.add_argument("--out", type=Path, required=True, metavar="FILE")

    p = sub.add_parser(
        "cache",
        parents=[common],
        help="list or prune the cached setup environments; prune also removes dead "
        "proofs' leftovers and stale bytecode listings",
    )
    p.add_argument("action", choices=("ls", "prune"))
    p.add_argument("--keep", type=int, default=0, metavar="N", help="prune: keep the N newest")

    p = sub.add_parser(
        "demo", parents=[common], help="prove a bundled example end to end (needs Docker)"
    )
    p.add_argument("--out", type=Path, default=Path("proofgate-demo"), metavar="DIR")
    p.add_argument(
        "--image",
        default=os.environ.get("PROOFGATE_DEMO_IMAGE", "proofgate/cleanroom:latest"),
        help="clean-room image for the demo (PROOFGATE_DEMO_IMAGE)",
    )
    return parser


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


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror}") from e


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
            key_pem = _read(args.key, "--key")
        elif os.environ.get(ENV_SIGNING_KEY):
            key_pem = os.environ[ENV_SIGNING_KEY].encode("utf-8")
        if key_pem is not None:
            approver_keys.append(
                receipt.load_private_key(key_pem, source="the signing key").public_key()
            )
        approver_keys.extend(
            receipt.load_public_key(_read(path, "--approver-key"), source=str(path))
            for path in args.approver_key
        )
    approval_doc = _read(args.approval, "--approval") if run_checks and args.approval else None
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
        receipt.load_public_key(_read(p, "--balance-key"), source=str(p)) for p in args.balance_key
    ]
    try:
        verified = receipt.verify(_read(path, "--balance-from"), receipt.Signed(keys))
    except receipt.ReceiptError as e:
        raise UsageError(f"--balance-from {path} does not verify: {e}") from e
    from gate.proof.shard import recorded_durations

    return recorded_durations(verified.predicate.to_dict())


def _cmd_aggregate(args: argparse.Namespace) -> int:
    from gate import receipt
    from gate.proof.aggregate import AggregateError, aggregate, shard_patch
    from gate.receipt.files import PATCH_DIFF

    keys = _load_keys(args.key)
    key_pem: bytes | None = None
    if args.signing_key is not None:
        key_pem = _read(args.signing_key, "--signing-key")
    elif os.environ.get(ENV_SIGNING_KEY):
        key_pem = os.environ[ENV_SIGNING_KEY].encode("utf-8")
    signing = (
        receipt.load_private_key(key_pem, source="the signing key") if key_pem is not None else None
    )
    envelopes = [_read(p, "RECEIPT") for p in args.receipts]
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
                neighbours[str(p)] = (p.parent / PATCH_DIFF).read_bytes()
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

    return [receipt.load_public_key(_read(p, "--key"), source=str(p)) for p in paths]


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
        envelope = args.receipt.read_bytes()
    except OSError as e:
        sys.stderr.write(f"proofgate: verify failed: cannot read {args.receipt}: {e.strerror}\n")
        return EXIT_VERIFY_FAILED
    patch = _read(args.patch, "--patch") if args.patch else None
    triggers = None
    if branch is not None:  # a release-style check: how the change reached the branch
        triggers = {TriggerKind.PULL_REQUEST, TriggerKind.MERGE_GROUP}
        if args.accept_reproof:
            triggers.add(TriggerKind.COMMIT)
    expect = receipt.expectations(
        keys,
        commit=args.commit,
        tree=args.tree,
        patch=patch,
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
        envelope, patch = args.receipt.read_bytes(), patch_path.read_bytes()
    except OSError as e:
        sys.stderr.write(f"proofgate: apply refused: cannot read {e.filename}: {e.strerror}\n")
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

    envelope = _read(args.receipt, "receipt")
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

    key = receipt.load_private_key(_read(args.key, "--key"), source=str(args.key))
    patch_sha256, fingerprint = args.patch_sha256, args.policy_fingerprint
    if args.receipt is not None:
        statement = receipt.unverified_statement(_read(args.receipt, "--receipt"))
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
