"""Why a base run once stopped after its build under heavy load, and that it no longer does.

With an environment record (a check with a differential), the build container is frozen
(`pause`) before the daemon lists what setup and build changed. Under heavy load the
kernel may not freeze every task before runc's own retries run out, and the daemon
answers "OCI runtime pause failed: unable to freeze: unknown"; runc leaves retrying to
its caller. proofgate asked once, ended the run after the build, and the run's problem
said only "no JUnit report was written". The refusal is injected here into the real
daemon's client; everything else is the real daemon and the clean-room image.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from gate.model import DifferentialMode, ImageRef, Phase
from gate.proof.runs import _outcomes_only
from gate.sandbox.docker import DockerSandbox
from gate.util.journal import Journal
from tests.integration.test_sandbox import make_tree, spec

pytestmark = pytest.mark.docker

TREE = make_tree({"test_ok.py": b"def test_ok():\n    assert True\n"})
CHECK = dataclasses.replace(
    spec(
        build=["true"],
        test=["python3 -m pytest -q -p no:cacheprovider --junitxml=r.xml"],
        junit="r.xml",
    ),
    differential=DifferentialMode.TRUSTED,
)


@pytest.fixture
def refusing(docker_client: docker.DockerClient) -> Iterator[tuple[DockerSandbox, list[int]]]:
    """A sandbox whose daemon refuses to freeze the first `budget[0]` times."""
    client = docker.from_env()
    real = client.api.pause
    budget = [0]

    def pause(container: str) -> None:
        if budget[0] > 0:
            budget[0] -= 1
            raise docker.errors.APIError(
                "500 Server Error",
                explanation=f"Cannot pause container {container}: OCI runtime pause failed: "
                "unable to freeze: unknown",
            )
        real(container)

    client.api.pause = pause  # type: ignore[method-assign]
    try:
        yield DockerSandbox(client, log_tail_bytes=1024), budget
    finally:
        client.close()


def _image(sandbox: DockerSandbox) -> ImageRef:
    return sandbox.resolve_image("proofgate/cleanroom:latest")


def test_a_refused_freeze_is_asked_again_and_the_run_reaches_its_tests(
    refusing: tuple[DockerSandbox, list[int]],
) -> None:
    sandbox, budget = refusing
    budget[0] = 2
    journal = Journal()
    result = sandbox.run_check(CHECK, _image(sandbox), TREE, journal)
    assert result.error is None, result.error
    assert [p.phase for p in result.phases] == [Phase.BUILD, Phase.TEST]
    assert result.junit_report is not None
    assert result.env_changes is not None
    assert result.env_changes.complete
    retried = [e for e in journal.events() if e["kind"] == "freeze-retried"]
    assert len(retried) == 2


def test_a_freeze_refused_to_the_end_is_named_as_the_runs_problem(
    refusing: tuple[DockerSandbox, list[int]],
) -> None:
    sandbox, budget = refusing
    budget[0] = 100
    result = sandbox.run_check(CHECK, _image(sandbox), TREE, Journal())
    assert result.error is not None
    assert "unable to freeze" in result.error
    assert result.env_changes is None  # no record: never an empty one
    run = _outcomes_only(result, "base")
    assert run.outcomes is None
    assert run.problem is not None
    assert "unable to freeze" in run.problem, run.problem
