"""SIGTERM as Ctrl-C: a cancelled run (the runner sends SIGINT, then SIGTERM) ends through
the same `KeyboardInterrupt` path, which removes containers and writes an INCONCLUSIVE
`interrupted` receipt.

`cli.main` holds the handler for as long as it runs, so the `proofgate` console script and
`python -m gate` behave alike; `python -m gate.faces.action` installs it for the process.
Never on import."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def sigterm_raises_interrupt() -> None:
    """Make SIGTERM raise KeyboardInterrupt in the main thread."""
    signal.signal(signal.SIGTERM, _interrupt)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the block runs; the previous handler is back
    afterwards, so a caller (a test calling `cli.main`) keeps its own.

    Only the main thread can install a handler (and only it receives signals): elsewhere
    this does nothing. A previous handler that Python did not install cannot be restored;
    then ours stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
