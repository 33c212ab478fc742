"""The port the orchestrator uses to run checks in a clean room."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from gate.journal import Journal
from gate.model import CheckResult, CheckSpec, ImageRef


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
    ) -> CheckResult:
        """Create a brand-new container, stream a fresh copy of the tree into /workspace,
        run its phases in order and remove the container whatever happens.

        Container-level failures come back as `CheckResult(started=False, error=...)`.

        Raises:
            SandboxError: the daemon went away.
        """
        ...
