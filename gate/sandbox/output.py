"""A command's output and the wait for it (gate.sandbox.container runs the commands)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gate.witness.host import Scanner


@dataclass
class LogSink:
    """Consumes one command's output stream: full SHA-256, byte count, bounded tail."""

    tail_limit: int
    sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    size: int = 0
    tail: bytearray = field(default_factory=bytearray)
    error: BaseException | None = None
    scanner: Scanner | None = None  # test commands: the witness lines in the output

    def consume(self, stream: Iterator[bytes]) -> None:
        try:
            for chunk in stream:
                if not chunk:
                    continue
                self.sha256.update(chunk)
                if self.scanner is not None:
                    self.scanner.feed(chunk)
                self.size += len(chunk)
                self.tail += chunk
                if len(self.tail) > 2 * self.tail_limit + 65536:
                    del self.tail[: len(self.tail) - self.tail_limit]
        except BaseException as e:  # noqa: BLE001 — handed to the main thread
            self.error = e

    def tail_text(self) -> str:
        data = bytes(self.tail[len(self.tail) - self.tail_limit :]) if self.tail_limit else b""
        return data.decode("utf-8", "replace")


def join_until(
    thread: threading.Thread,
    deadline: float,
    ended: Callable[[], bool] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Join `thread` until `deadline`, until `ended()` or until `stop` is set, in short
    slices so that a signal handler (Ctrl-C, SIGTERM) runs promptly in the main thread and
    a worker thread sees `stop` promptly."""
    while thread.is_alive():
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            return
        thread.join(min(left, 0.1))
        if thread.is_alive() and ended is not None and ended():
            return


def check_stop(stop: threading.Event | None) -> None:
    """Raise KeyboardInterrupt in a worker thread once the run was told to stop."""
    if stop is not None and stop.is_set():
        raise KeyboardInterrupt("the proof was interrupted")
