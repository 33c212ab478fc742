"""The `proofgate` command line's arguments (SPEC §5): one parser, a subparser per command.
`cli.py` maps the parsed arguments to the work and its exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gate import __version__
from gate.model import Verdict

EXIT_USAGE = 2
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
    p.add_argument(
        "--base-receipt",
        type=Path,
        metavar="FILE",
        help="a receipt of the base tree's own proof (the merge queue's, say): the base's "
        "test outcomes come from it instead of a run of the base's tests, when it verifies "
        "with a --base-key and was proven with the same check, image and configuration",
    )
    p.add_argument(
        "--base-key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="a public key trusted to have signed the --base-receipt receipt (repeatable)",
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
