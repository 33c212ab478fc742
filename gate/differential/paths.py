"""Where things are inside a check's containers: one pure home for the paths that the
sandbox sets up and the differential's judgement reads (SPEC §3.2).

`/workspace` holds the tree. `/opt/proofgate` is proofgate's own volume of the check,
owned by `PROTECTED_UID`: the witness plugin in `witness/` and the bytecode prefix in
`pycache/` (gate/witness/host.py says who may write what), and, for a differential's
runs, the base's pytest configuration in `config/` (gate/differential/pytestconfig.py).
"""

from __future__ import annotations

__all__ = ["CONFIG_DIR", "MOUNT", "PYCACHE", "WITNESS_DIR", "WORKSPACE"]

WORKSPACE = "/workspace"
MOUNT = "/opt/proofgate"
WITNESS_DIR = f"{MOUNT}/witness"
PYCACHE = f"{MOUNT}/pycache"
CONFIG_DIR = f"{MOUNT}/config"
