"""Where things are inside a check's containers: one pure home for the paths that the
sandbox sets up and the differential's judgement reads (SPEC §3.2).

`/workspace` holds the tree. `/opt/proofgate` is proofgate's own volume of the check,
owned by `PROTECTED_UID` and read-only to every phase: the start-up hook in `boot/`, the
witness package in `witness/`, the test phase's bytecode prefix in `links/` (the image's
own bytecode, linked) and, for a differential's runs, the base's pytest configuration in
`config/` (gate/differential/pytestconfig.py). Setup and build compile into another
volume at `/opt/proofgate-pycache`, which no test container mounts (gate/witness/host.py).
"""

from __future__ import annotations

__all__ = ["BOOT_DIR", "CONFIG_DIR", "MOUNT", "PYCACHE", "TEST_PYCACHE", "WITNESS_DIR", "WORKSPACE"]

WORKSPACE = "/workspace"
MOUNT = "/opt/proofgate"
WITNESS_DIR = f"{MOUNT}/witness"
PYCACHE = f"{MOUNT}-pycache"  # setup and build: a volume of its own, never the tests'
TEST_PYCACHE = f"{MOUNT}/links"  # the test phase: read-only, the image's bytecode linked
BOOT_DIR = f"{MOUNT}/boot"
CONFIG_DIR = f"{MOUNT}/config"
