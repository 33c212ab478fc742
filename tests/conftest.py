"""Shared fixtures and the Docker gating of STYLE §7.

Tests that need a real Docker daemon and the local clean-room image are marked
`@pytest.mark.docker`. Locally they are skipped when either is missing. Under `CI=true`
that is a failure instead, and so is any Docker test that ends up skipped for whatever
reason: a green CI run with skipped Docker tests is a lie (issue 2).

Containers created by proofgate carry the label `proofgate=1`; every Docker test is
followed by a check that it left none behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
import requests
from hypothesis import HealthCheck, settings

# Property tests judge behaviour, never speed: a loaded CI machine must not turn a slow
# example into a failure (hypothesis' default 200 ms deadline does exactly that).
settings.register_profile("proofgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("proofgate")

CLEANROOM_IMAGE = "proofgate/cleanroom:latest"
CONTAINER_LABEL = "proofgate=1"
ASSETS = Path(__file__).parent / "assets"

_skipped_docker_tests: list[str] = []


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _docker_problem() -> str | None:
    """None when the daemon answers and the clean-room image is present; else why not."""
    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
            client.images.get(CLEANROOM_IMAGE)
        finally:
            client.close()
    except docker.errors.ImageNotFound:
        return f"the clean-room image {CLEANROOM_IMAGE} is missing (run: make image)"
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        return f"no Docker daemon answers ({e}); run: scripts/ensure-docker"
    return None


_UNSET = object()
_problem_cache: list[object] = [_UNSET]


def docker_problem() -> str | None:
    if _problem_cache[0] is _UNSET:
        _problem_cache[0] = _docker_problem()
    problem = _problem_cache[0]
    return problem if isinstance(problem, str) else None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    problem = docker_problem()
    if problem is None:
        return
    if under_ci():
        pytest.fail(f"CI=true and a Docker test cannot run: {problem}", pytrace=False)
    pytest.skip(problem)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "docker" in report.keywords and not hasattr(report, "wasxfail"):
        _skipped_docker_tests.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if under_ci() and _skipped_docker_tests and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if under_ci() and _skipped_docker_tests:
        terminalreporter.section("Docker tests skipped under CI=true", sep="!", red=True)
        for nodeid in _skipped_docker_tests:
            terminalreporter.line(f"SKIPPED {nodeid}", red=True)
        terminalreporter.line(
            "Docker tests must run in CI; a skip fails the run (see tests/conftest.py).",
            red=True,
        )


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    problem = docker_problem()
    if problem is not None:
        if under_ci():
            pytest.fail(f"CI=true and Docker is needed: {problem}", pytrace=False)
        pytest.skip(problem)
    client = docker.from_env(timeout=120)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def cleanroom_image(docker_client: docker.DockerClient) -> str:
    """The local clean-room image built by scripts/build-cleanroom-image (never pulled)."""
    return CLEANROOM_IMAGE


def _labeled(client: docker.DockerClient) -> set[str]:
    """Containers, volumes and images labeled proofgate=1 (the sandbox labels all three)."""
    label = {"label": CONTAINER_LABEL}
    # sparse: no per-container inspect, which races with containers removed meanwhile
    found = {
        f"container {c.id}" for c in client.containers.list(all=True, sparse=True, filters=label)
    }
    found |= {f"volume {v['Name']}" for v in client.api.volumes(filters=label).get("Volumes") or []}
    found |= {f"image {i['Id']}" for i in client.api.images(filters=label)}
    return found


def _remove(client: docker.DockerClient, thing: str) -> None:
    kind, _, ident = thing.partition(" ")
    with contextlib.suppress(docker.errors.NotFound):
        if kind == "container":
            client.containers.get(ident).remove(force=True)
        elif kind == "volume":
            client.api.remove_volume(ident, force=True)
        else:
            client.images.remove(ident, force=True)


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The differential's base-run cache lives in $XDG_CACHE_HOME: one per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def _no_leaked_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every Docker test: no container, volume or image labeled proofgate=1 that it
    created remains."""
    if request.node.get_closest_marker("docker") is None or docker_problem() is not None:
        yield
        return
    client: docker.DockerClient = request.getfixturevalue("docker_client")
    before = _labeled(client)
    yield
    leaked = _labeled(client) - before
    # Another test run on the same daemon may be mid-check: give its containers a moment.
    deadline = time.monotonic() + 10
    while leaked and time.monotonic() < deadline:
        time.sleep(0.5)
        leaked &= _labeled(client)
    if under_ci():
        for thing in leaked:
            _remove(client, thing)
    assert not leaked, f"left behind, labeled {CONTAINER_LABEL}: {sorted(leaked)}"


@pytest.fixture
def asset() -> Callable[[str], Path]:
    """`asset("name")` -> the path of tests/assets/name, which must exist."""

    def get(name: str) -> Path:
        path = ASSETS / name
        if not path.exists():
            raise FileNotFoundError(f"test asset {name!r} is missing from tests/assets/")
        return path

    return get
