"""SIGTERM as Ctrl-C: a cancelled run (the runner sends SIGINT, then SIGTERM) ends through
the same `KeyboardInterrupt` path, which removes containers and writes an INCONCLUSIVE
`interrupted` receipt. Installed by the entry points only (`python -m gate`,
`python -m gate.faces.action`), never on import."""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def sigterm_raises_interrupt() -> None:
    """Make SIGTERM raise KeyboardInterrupt in the main thread."""
    signal.signal(signal.SIGTERM, _interrupt)
