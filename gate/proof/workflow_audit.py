"""zizmor, the workflow auditor, on both sides of a CI change (SPEC §2.1).

The changed workflow and action files of each side are written into a private temporary
directory at their repository paths and audited there, offline, with zizmor's default
persona: no configuration file (`--no-config`) and no ignore comments (`--no-ignores`),
so a change cannot switch off an audit by the comment or the config it adds, and no token
in the environment. The findings come back as `AuditFinding`s; `gate.policy.ci` compares
them by audit id and location (the keys down to the step), so lines that shift do not make
a finding new.

What lies one step outside: zizmor's online audits (known-vulnerable actions, impostor
commits) do not run; `ci-action-unverified` asks GitHub about the SHAs instead.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess  # noqa: S404 - zizmor is a program of proofgate's own environment
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gate.policy import AuditFinding, CiAudit

__all__ = ["AUDIT_TIMEOUT_S", "audit", "zizmor_program"]

log = logging.getLogger("gate")

AUDIT_TIMEOUT_S = 120
_MAX_OUTPUT = 16 * 1024 * 1024
MISSING = "zizmor is missing: install proofgate's dependencies (pip install zizmor)"


def zizmor_program() -> str | None:
    """zizmor beside this interpreter (the environment proofgate is installed in), else
    on the PATH of proofgate's own process; None when there is none."""
    beside = Path(sys.executable).parent / "zizmor"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("zizmor")


def _route(raw: object) -> tuple[str | int, ...]:
    out: list[str | int] = []
    for part in raw if isinstance(raw, list) else []:
        if isinstance(part, dict) and "Key" in part:
            out.append(str(part["Key"]))
        elif isinstance(part, dict) and isinstance(part.get("Index"), int):
            out.append(int(part["Index"]))
    return tuple(out)


def _findings(output: bytes, root: Path) -> tuple[AuditFinding, ...]:
    """zizmor's JSON (v1) findings, each at its primary location.

    Raises:
        ValueError: the output is not zizmor's JSON.
    """
    doc = json.loads(output)
    if not isinstance(doc, list):
        raise ValueError("not a list of findings")
    out: list[AuditFinding] = []
    for f in doc:
        if not isinstance(f, dict) or f.get("ignored"):
            continue
        locations = [loc for loc in f.get("locations", []) if isinstance(loc, dict)]
        primary = [
            loc for loc in locations if loc.get("symbolic", {}).get("kind") == "Primary"
        ] or locations
        if not primary:
            continue
        symbolic = primary[0].get("symbolic", {})
        where = str(symbolic.get("key", {}).get("Local", {}).get("verbatim_path", ""))
        try:
            rel = Path(where).resolve().relative_to(root.resolve())
        except ValueError:
            continue
        row = primary[0].get("concrete", {}).get("location", {}).get("start_point", {})
        annotation = str(symbolic.get("annotation", "")).strip()
        desc = str(f.get("desc", f.get("ident", "")))
        out.append(
            AuditFinding(
                ident=str(f.get("ident", "?")),
                path=str(rel).encode("utf-8", "surrogateescape"),
                route=_route(symbolic.get("route", {}).get("route")),
                line=int(row.get("row", 0)) + 1,
                message=f"{desc}: {annotation}" if annotation else desc,
            )
        )
    return tuple(out)


def _audit_side(program: str, files: Mapping[bytes, bytes]) -> tuple[AuditFinding, ...] | str:
    if not files:
        return ()
    with tempfile.TemporaryDirectory(prefix="proofgate-zizmor-") as tmp:
        root = Path(tmp) / "tree"
        for path, data in files.items():
            rel = path.decode("utf-8", "surrogateescape")
            if rel.startswith("/") or ".." in rel.split("/"):
                continue
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        argv = [program, "--offline", "--no-config", "--no-ignores", "--no-exit-codes"]
        argv += ["--no-progress", "--format", "json", "--collect=workflows,actions", str(root)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "NO_COLOR": "1"}
        try:
            done = subprocess.run(  # noqa: S603 - argv from proofgate, no shell
                argv, capture_output=True, timeout=AUDIT_TIMEOUT_S, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            return f"zizmor did not finish in {AUDIT_TIMEOUT_S} s"
        except OSError as e:
            return f"zizmor could not run: {e}"
        if done.returncode != 0 or len(done.stdout) > _MAX_OUTPUT:
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            return f"zizmor failed (exit {done.returncode}): {tail[0][:200]}"
        try:
            return _findings(done.stdout, root)
        except ValueError as e:
            return f"zizmor's output is not its JSON: {e}"


def audit(base: Mapping[bytes, bytes], head: Mapping[bytes, bytes]) -> CiAudit:
    """zizmor's findings on `base` and `head` (path -> content, each side's changed
    workflow and action files); `unavailable` says why there are none (zizmor missing,
    failed or too slow), which holds the change (`ci-audit-finding`)."""
    program = zizmor_program()
    if program is None:
        return CiAudit(unavailable=MISSING)
    sides = []
    # the two sides at once: each is a zizmor process of its own (~0.1 s), in its own
    # directory, and the proof waits for both
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="zizmor") as pool:
        audits = list(pool.map(lambda files: _audit_side(program, files), (base, head)))
    for found in audits:
        if isinstance(found, str):
            log.warning("proofgate: the workflow audit did not run: %s", found)
            return CiAudit(unavailable=found)
        sides.append(found)
    return CiAudit(base=sides[0], head=sides[1])
