"""The Docker clean room: `DockerSandbox` implements the `Sandbox` port with the Docker SDK.

This module resolves images and hands each check to `gate.sandbox.container.CheckRun`,
which owns the containers, the workspace volume and the commands; `copy_in` streams the
tree in and `readback` reads the JUnit report out through the daemon. What the clean room
does and does not protect against is written down in docs/security.md ("The clean room").
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import docker
import docker.errors

from gate import differential
from gate.model import (
    CheckResult,
    CheckSpec,
    EgressRecord,
    EnvRecord,
    ImageRef,
    Phase,
    PhaseResult,
)
from gate.sandbox import egress, envcache, labels
from gate.sandbox.container import CheckRun
from gate.sandbox.errors import DAEMON_HELP, TRANSPORT_ERRORS, DockerRefused, docker_errors
from gate.sandbox.interface import ImageError, SandboxError
from gate.util.journal import Journal

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
        egress_environ: Mapping[str, str] | None = None,
        proof: str | None = None,
    ) -> None:
        """`egress_environ`: where the egress broker's test-only overrides are read from
        (`gate.sandbox.egress.unsafe_overrides`); None: this process's environment. The
        Action passes an empty mapping, so a workflow's `env` cannot loosen the broker.
        `proof`: the proof id every object it creates is labeled with
        (gate/sandbox/labels.py); None: a fresh one.

        Raises:
            UsageError: a malformed proof id or PROOFGATE_LABELS.
        """
        if log_tail_bytes < 0:
            raise ValueError("log_tail_bytes must not be negative")
        self.labels = labels.ProofLabels.for_proof(proof, os.environ)
        try:
            self._client = client if client is not None else docker.from_env()
            self._client.ping()
        except (docker.errors.DockerException, *TRANSPORT_ERRORS) as e:
            raise SandboxError(f"cannot reach the Docker daemon ({e}). {DAEMON_HELP}") from e
        self._api = self._client.api
        self._allow_pull = allow_pull
        self._tail = log_tail_bytes
        self._egress_environ = egress_environ

    def engine_id(self) -> str | None:
        """The daemon's engine id (`docker info` ID): which daemon ran the checks, for the
        receipt. Never its address or credentials (a `DOCKER_HOST` may carry a user name).

        Raises:
            SandboxError: the daemon does not answer.
        """
        with docker_errors("read the Docker daemon's info"):
            info = self._api.info()
        got = info.get("ID") if isinstance(info, dict) else None
        return str(got) if got else None

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
        if spec.setup_inputs is None or not any(p is Phase.SETUP for p, _ in spec.phases):
            run = CheckRun(
                self._api,
                spec,
                image,
                journal,
                record_environment=differential.enabled(spec),
                **self._opts(stop),
            )
            result = self._run(run, tree_tar)
            return result if spec.setup_inputs is None else _with_environment(result, "off")
        return self._run_cached(spec, image, tree_tar, journal, stop)

    def sweep(self) -> tuple[str, ...]:
        """Remove whatever is still labeled with this sandbox's proof id (an object whose
        creation an interrupted request never reported back); call once every check of
        the proof has ended. Best effort: never raises. Returns what it removed."""
        return labels.sweep(self._api, self.labels.selector).removed

    def _opts(self, stop: threading.Event | None) -> dict[str, Any]:
        return {
            "log_tail_bytes": self._tail,
            "stop": stop,
            "egress_environ": self._egress_environ,
            # read again per check: a long-lived sandbox (a test module's) tags each
            # check with the PROOFGATE_LABELS in force when it starts
            "labels": dataclasses.replace(self.labels, extra=labels.extra_labels(os.environ)),
        }

    @staticmethod
    def _run(run: CheckRun, tree_tar: Callable[[], Iterator[bytes]]) -> CheckResult:
        try:
            try:
                result = run.execute(tree_tar)
            except BaseException:
                run.remove(raise_on_failure=False)
                raise
            run.remove(raise_on_failure=True)
        finally:
            run.close_egress()
        return result

    def _run_cached(
        self,
        spec: CheckSpec,
        image: ImageRef,
        tree_tar: Callable[[], Iterator[bytes]],
        journal: Journal,
        stop: threading.Event | None,
    ) -> CheckResult:
        """Setup from a cached environment, or setup on the inputs alone and commit it;
        then build and test on a fresh copy of the whole tree (gate/sandbox/envcache.py)."""
        assert spec.setup_inputs is not None  # noqa: S101 - caller checked
        inputs, digest = envcache.setup_inputs(tree_tar, spec.setup_inputs)
        try:
            overrides = egress.unsafe_overrides(
                os.environ if self._egress_environ is None else self._egress_environ
            )
        except egress.EgressStartError as e:
            return CheckResult(name=spec.name, image=image, started=False, error=str(e))
        record = differential.enabled(spec)
        key = envcache.key(spec, image, digest, overrides, recorded=record)
        # one setup per key at a time in this process: the runs of a differential that
        # share it (head, trusted, proving) wait for the first, then hit its entry
        with _setup_lock(key):
            got = self._environment(spec, image, journal, stop, inputs, key, record)
        if isinstance(got, CheckResult):
            return got  # setup failed: the check ends here, nothing is kept
        cached, setup_phases, changes, setup_egress, state = got
        if state == "hit" and overrides.active and spec.limits.network == "setup":
            # the environment was made under these overrides: the receipt says so
            journal.append(
                "egress-unsafe-overrides",
                check=spec.name,
                allow_nets=list(overrides.allow_nets),
                hosts=[h for h, _ in overrides.hosts],
                network=overrides.network,
                cached=True,
            )
        rest = dataclasses.replace(
            spec, phases=tuple(p for p in spec.phases if p[0] is not Phase.SETUP)
        )
        run = CheckRun(
            self._api,
            rest,
            image,
            journal,
            start_image=cached,
            record_environment=record,
            start_env=changes,
            **self._opts(stop),
        )
        result = self._run(run, tree_tar)
        result = dataclasses.replace(
            result, phases=setup_phases + result.phases, egress=setup_egress
        )
        return _with_environment(result, state, key, cached)

    def _environment(
        self,
        spec: CheckSpec,
        image: ImageRef,
        journal: Journal,
        stop: threading.Event | None,
        inputs: bytes,
        key: str,
        record: bool,
    ) -> (
        tuple[str, tuple[PhaseResult, ...], EnvRecord | None, EgressRecord | None, str]
        | CheckResult
    ):
        """The cached environment of `key`, made by setup on the inputs alone on a miss:
        (image, setup results, what setup changed, egress record, hit|miss), or the
        result of a setup that failed."""
        found = envcache.lookup(self._api, key)
        journal.append(
            "environment-looked-up",
            check=spec.name,
            key=key,
            cache="hit" if found is not None else "miss",
        )
        if found is not None:
            changes = found.changes
            if record and changes is None:  # recorded by key; a label lost is no record
                changes = EnvRecord(complete=False)
            return found.image, found.setup, changes, None, "hit"
        setup = dataclasses.replace(
            spec, phases=tuple(p for p in spec.phases if p[0] is Phase.SETUP), junit=None
        )
        run = CheckRun(
            self._api,
            setup,
            image,
            journal,
            commit_labels=envcache.labels(key),
            record_environment=record,
            **self._opts(stop),
        )
        done = self._run(run, lambda: iter((inputs,)))
        if run.committed is None:
            return _with_environment(done, "miss", key)
        try:
            envcache.tag(self._api, run.committed, key)
        except DockerRefused as e:
            raise SandboxError(str(e)) from e
        envcache.prune(self._api)
        return run.committed, done.phases, run.env_changes, done.egress, "miss"


_SETUP_LOCKS: dict[str, threading.Lock] = {}
_SETUP_LOCKS_GUARD = threading.Lock()


def _setup_lock(key: str) -> threading.Lock:
    with _SETUP_LOCKS_GUARD:
        return _SETUP_LOCKS.setdefault(key, threading.Lock())


def _with_environment(
    result: CheckResult, cache: str, key: str | None = None, image: str | None = None
) -> CheckResult:
    return dataclasses.replace(result, environment={"cache": cache, "key": key, "image": image})


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
