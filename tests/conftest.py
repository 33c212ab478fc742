"""Shared fixtures and the Docker gating of STYLE §7.

Tests that need a real Docker daemon and the local clean-room image are marked
`@pytest.mark.docker`. Locally they are skipped when either is missing. Under `CI=true`
that is a failure instead, and so is any Docker test that ends up skipped for whatever
reason: a green CI run with skipped Docker tests is a lie (issue 2).

Every Docker object a proof creates carries `proofgate=1`, its proof's id and whatever
`PROOFGATE_LABELS` names (gate/sandbox/labels.py). Each Docker test runs with
`PROOFGATE_LABELS=proofgate.test=<a value of its own>` (inherited by the `proofgate`
subprocesses it starts), and is followed by a check that nothing with that value is left:
the check judges, and under `CI=true` removes, only what the test itself created, never
another process's proofs on the same daemon.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
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
TEST_LABEL = "proofgate.test"  # set per Docker test through PROOFGATE_LABELS
_SESSION = secrets.token_hex(6)  # this pytest process
_tests = itertools.count()
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


def pytest_configure(config: pytest.Config) -> None:
    # A run started as a background job of a non-interactive shell inherits SIGINT
    # ignored, and Python then leaves it ignored: Ctrl-C (and `_thread.interrupt_main`)
    # would do nothing, here and in every proof a test starts, and a test of what a proof
    # does on Ctrl-C would wait forever. Those tests are about Ctrl-C: give it back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


def own_value() -> str:
    """The current Docker test's `proofgate.test` value ("" outside one)."""
    for item in os.environ.get("PROOFGATE_LABELS", "").split(","):
        key, _, value = item.strip().partition("=")
        if key == TEST_LABEL:
            return value
    return ""


def own_labels() -> dict[str, str]:
    """Labels for an object a test creates itself: it counts as the test's own."""
    return {"proofgate": "1", TEST_LABEL: own_value()}


def own_filter(*more: str) -> dict[str, list[str]]:
    """A Docker `filters` argument selecting only the current test's objects."""
    return {"label": [f"{TEST_LABEL}={own_value()}", *more]}


def labeled(client: docker.DockerClient, value: str) -> set[str]:
    """Containers, volumes, networks and images labeled `proofgate.test=<value>`."""
    label = {"label": [f"{TEST_LABEL}={value}"]}
    # sparse: no per-container inspect, which races with containers removed meanwhile
    found = {
        f"container {c.id}" for c in client.containers.list(all=True, sparse=True, filters=label)
    }
    found |= {f"volume {v['Name']}" for v in client.api.volumes(filters=label).get("Volumes") or []}
    found |= {f"network {n['Id']}" for n in client.api.networks(filters=label)}
    found |= {f"image {i['Id']}" for i in client.api.images(filters=label)}
    return found


def remove(client: docker.DockerClient, thing: str) -> None:
    kind, _, ident = thing.partition(" ")
    with contextlib.suppress(docker.errors.NotFound):
        if kind == "container":
            client.containers.get(ident).remove(force=True)
        elif kind == "volume":
            client.api.remove_volume(ident, force=True)
        elif kind == "network":
            client.api.remove_network(ident)
        else:
            client.images.remove(ident, force=True)


def clean_up(client: docker.DockerClient, value: str) -> set[str]:
    """The suite's cleanup: what is left with `proofgate.test=<value>`, removed under
    CI=true (containers first: they hold the volumes and networks). Returns it."""
    leaked = labeled(client, value)
    if under_ci():
        for thing in sorted(leaked, key=lambda t: not t.startswith("container")):
            with contextlib.suppress(docker.errors.APIError):
                remove(client, thing)
    return leaked


@pytest.fixture
def env_cache(docker_client: docker.DockerClient) -> Iterator[None]:
    """Cached environments made by the test, removed afterwards (others' are left)."""
    from gate.sandbox import envcache

    before = {e.image for e in envcache.entries(docker_client.api)}
    yield
    for entry in envcache.entries(docker_client.api):
        if entry.image not in before:
            docker_client.api.remove_image(entry.image, force=True)


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The differential's base-run cache lives in $XDG_CACHE_HOME: one per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def _no_github_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local run looks pins up on GitHub when GITHUB_TOKEN or GH_TOKEN is set (SPEC §2.1):
    a test sets its own, so a developer's token never sends a test to the real API."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)


@pytest.fixture(autouse=True)
def _no_leaked_containers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """After every Docker test: nothing it created (labeled with its own `proofgate.test`
    value, gate/sandbox/labels.py) remains."""
    if request.node.get_closest_marker("docker") is None or docker_problem() is not None:
        yield
        return
    client: docker.DockerClient = request.getfixturevalue("docker_client")
    value = f"{_SESSION}-{next(_tests)}"
    monkeypatch.setenv("PROOFGATE_LABELS", f"{TEST_LABEL}={value}")
    yield
    leaked = labeled(client, value)
    # an auto-removed container can take a moment to disappear after it was killed
    deadline = time.monotonic() + 5
    while leaked and time.monotonic() < deadline:
        time.sleep(0.2)
        leaked &= labeled(client, value)
    clean_up(client, value)
    assert not leaked, f"left behind, labeled {TEST_LABEL}={value}: {sorted(leaked)}"


@pytest.fixture
def asset() -> Callable[[str], Path]:
    """`asset("name")` -> the path of tests/assets/name, which must exist."""

    def get(name: str) -> Path:
        path = ASSETS / name
        if not path.exists():
            raise FileNotFoundError(f"test asset {name!r} is missing from tests/assets/")
        return path

    return get
