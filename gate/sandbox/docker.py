"""The Docker clean room: `DockerSandbox` implements the `Sandbox` port with the Docker SDK.

This module resolves images and hands each check to `gate.sandbox.container.CheckRun`,
which owns the containers, the workspace volume and the commands; `copy_in` streams the
tree in and `readback` reads the JUnit report out through the daemon. What the clean room
does and does not protect against is written down in docs/security.md ("The clean room").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import docker
import docker.errors

from gate.journal import Journal
from gate.model import CheckResult, CheckSpec, ImageRef
from gate.sandbox.container import CheckRun
from gate.sandbox.errors import DAEMON_HELP, TRANSPORT_ERRORS, DockerRefused, docker_errors
from gate.sandbox.interface import ImageError, SandboxError

if TYPE_CHECKING:
    from gate.sandbox.interface import Sandbox

log = logging.getLogger("gate.sandbox")


class DockerSandbox:
    """Runs checks in fresh Docker containers (docs/security.md, "The clean room").

    Raises (constructor):
        SandboxError: no Docker daemon answers.
    """

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        allow_pull: bool = False,
        log_tail_bytes: int = 16384,
    ) -> None:
        if log_tail_bytes < 0:
            raise ValueError("log_tail_bytes must not be negative")
        try:
            self._client = client if client is not None else docker.from_env()
            self._client.ping()
        except (docker.errors.DockerException, *TRANSPORT_ERRORS) as e:
            raise SandboxError(f"cannot reach the Docker daemon ({e}). {DAEMON_HELP}") from e
        self._api = self._client.api
        self._allow_pull = allow_pull
        self._tail = log_tail_bytes

    def resolve_image(self, name: str) -> ImageRef:
        """Resolve `name` to the local image id and, when known, its repo digest.

        Pulls only when the sandbox was created with `allow_pull=True`.

        Raises:
            SandboxError: the daemon does not answer.
            ImageError: the image is not present locally and pulling is not allowed, or
                the pull failed, or the name is not a valid image reference.
        """
        try:
            with docker_errors(f"resolve the image {name}"):
                try:
                    image = self._client.images.get(name)
                except docker.errors.ImageNotFound:
                    if not self._allow_pull:
                        raise ImageError(
                            f"the image {name} is not present on the Docker host and pulling "
                            "is not allowed. Build or pull it first (for the clean-room "
                            "image: make image), or allow pulling."
                        ) from None
                    repository, tag, digest = _split_reference(name)
                    log.warning("pulling %s (pulling was allowed)", name)
                    image = self._client.images.pull(repository, tag=digest or tag or "latest")
        except DockerRefused as e:
            raise ImageError(str(e)) from e
        digests = [str(d) for d in (image.attrs.get("RepoDigests") or [])]
        return ImageRef(name=name, id=str(image.id), repo_digest=_pick_repo_digest(name, digests))

    def run_check(
        self,
        spec: CheckSpec,
        image: ImageRef,
        tree_tar: Callable[[], Iterator[bytes]],
        journal: Journal,
        *,
        stop: threading.Event | None = None,
    ) -> CheckResult:
        """Run one check in brand-new containers; see `Sandbox.run_check`.

        Raises:
            SandboxError: the daemon went away, or the network could not be taken away
                after the setup phase, or what the check created could not be removed.
            KeyboardInterrupt: interrupted, or `stop` was set (containers are removed).
        """
        run = CheckRun(self._api, spec, image, journal, log_tail_bytes=self._tail, stop=stop)
        try:
            result = run.execute(tree_tar)
        except BaseException:
            run.remove(raise_on_failure=False)
            raise
        run.remove(raise_on_failure=True)
        return result


def _split_reference(name: str) -> tuple[str, str | None, str | None]:
    """`repo[:tag][@digest]` -> (repo, tag, digest)."""
    rest, _, digest = name.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest or None
    return rest, None, digest or None


def _pick_repo_digest(name: str, digests: list[str]) -> str | None:
    """The RepoDigests entry for `name`'s repository (Docker Hub names normalized)."""
    if not digests:
        return None
    repository, _, digest = _split_reference(name)

    def norm(repo: str) -> str:
        for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/"):
            if repo.startswith(prefix):
                return repo[len(prefix) :]
        return repo

    candidates = [d for d in digests if norm(d.partition("@")[0]) == norm(repository)]
    if digest is not None:
        candidates = [d for d in candidates if d.endswith("@" + digest)] or candidates
    return (candidates or digests)[0]


if TYPE_CHECKING:

    def _implements_the_port(sandbox: DockerSandbox) -> Sandbox:
        return sandbox  # mypy checks DockerSandbox against the Sandbox protocol here
