"""The one place where Docker SDK exceptions become proofgate's (STYLE §4).

Two kinds of failure, told apart once here:

- the daemon is gone or unusable (connection refused, timeout, broken transport): every
  call site gets `SandboxError`, which the orchestrator turns into `docker-unavailable`;
- the daemon answered and refused one request (`docker.errors.APIError`): `DockerRefused`,
  which a call site handles where a refusal is evidence (the container could not start,
  the report does not exist) and lets propagate otherwise (it is a `SandboxError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import docker.errors
import requests

from gate.sandbox.interface import SandboxError

DAEMON_HELP = (
    "Start Docker (on Debian as root, scripts/ensure-docker installs and starts it), "
    "or point DOCKER_HOST at a running daemon."
)

# Failures that mean the daemon itself is gone, as opposed to one request being refused.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    ConnectionError,
)


class DockerRefused(SandboxError):
    """The daemon refused one request; `status` is its HTTP status (404: not found)."""

    def __init__(self, what: str, explanation: str, status: int | None) -> None:
        super().__init__(f"cannot {what}: {explanation}")
        self.what = what
        self.explanation = explanation
        self.status = status

    @property
    def not_found(self) -> bool:
        return self.status == 404


def is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, docker.errors.APIError):
        return False
    return isinstance(exc, (*TRANSPORT_ERRORS, docker.errors.DockerException))


def daemon_gone(what: str, exc: BaseException) -> SandboxError:
    return SandboxError(
        f"the Docker daemon stopped answering while trying to {what} ({exc}). {DAEMON_HELP}"
    )


@contextmanager
def docker_errors(what: str) -> Iterator[None]:
    """Translate the SDK's exceptions raised inside the block; `what` completes
    "cannot ..." and "while trying to ..." (e.g. "create the check's container").

    Raises:
        DockerRefused: the daemon refused the request.
        SandboxError: the daemon does not answer.
    """
    try:
        yield
    except docker.errors.APIError as e:
        raise DockerRefused(what, str(e.explanation or e), e.status_code) from e
    except (docker.errors.DockerException, *TRANSPORT_ERRORS) as e:
        raise daemon_gone(what, e) from e
