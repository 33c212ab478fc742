"""The port the orchestrator uses to run checks in a clean room."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from gate.model import CheckResult, CheckSpec, ImageRef
from gate.util.journal import Journal


class SandboxError(Exception):
    """The clean room cannot be used at all (daemon unreachable). Becomes an INCONCLUSIVE
    reason `docker-unavailable`, never an exit-2 error."""


class ImageError(SandboxError):
    """The configured image cannot be resolved to a digest (missing, pull not allowed)."""


class Sandbox(Protocol):
    def resolve_image(self, name: str) -> ImageRef:
        """Resolve `name` to a local image id (and repo digest when known).

        Raises:
            SandboxError: the daemon does not answer.
            ImageError: the image is not present locally and pulling is not allowed.
        """
        ...

    def run_check(
        self,
        spec: CheckSpec,
        image: ImageRef,
        tree_tar: Callable[[], Iterator[bytes]],
        journal: Journal,
        *,
        stop: threading.Event | None = None,
    ) -> CheckResult:
        """Create a brand-new container, stream a fresh copy of the tree into /workspace,
        run its phases in order and remove the container whatever happens.

        Container-level failures come back as `CheckResult(started=False, error=...)`.
        Checks run in worker threads, where no Ctrl-C arrives: once `stop` is set, the
        running command is killed, the containers are removed and KeyboardInterrupt is
        raised, as a Ctrl-C in the calling thread would.

        Raises:
            SandboxError: the daemon went away.
            KeyboardInterrupt: interrupted, or `stop` was set.
        """
        ...

    def sweep(self) -> tuple[str, ...]:
        """Remove whatever is still labeled with this sandbox's proof id; called once
        every check of the proof has ended. Best effort: never raises. Returns what it
        removed ("container 0123456789ab", ...)."""
        ...
