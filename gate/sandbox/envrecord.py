"""One run's record of what setup and build left (SPEC §3.2), taken as the run goes:
the build container frozen, what changed outside /workspace read beside the test phase,
/workspace read through the holder before the first test command, then composed into
one record (gate/differential/environment.py judges it; gate/sandbox/envdiff.py reads).
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable

from docker import APIClient

from gate.differential import environment as envjudge
from gate.differential.tarprotect import Manifest
from gate.model import EnvRecord
from gate.sandbox import envdiff
from gate.sandbox.errors import DockerRefused, docker_errors
from gate.util.journal import Journal

__all__ = ["Recorder"]

_FREEZE_RETRIES_S = (0.2, 0.5, 1.0, 2.0)  # waits before asking the runtime to freeze again


class Recorder:
    """What one run's setup and build left: None until both have ended, so a run whose
    setup or build did not finish has no record, never an empty one."""

    def __init__(
        self,
        api: APIClient,
        journal: Journal,
        check: str,
        *,
        start_env: EnvRecord | None,
        stop: threading.Event | None,
    ) -> None:
        self.api = api
        self.journal = journal
        self.check = check
        self.stop = stop
        self.start_env = start_env  # what a cached environment's setup left
        self.record: EnvRecord | None = None
        self.manifest: Manifest = {}  # the tree as materialized (tarprotect)
        self._outside: tuple[list[envjudge.RawEntry], bool] | None = None
        self._inside: tuple[list[envjudge.RawEntry], bool] | None = None
        self._thread: threading.Thread | None = None  # reads the frozen build container
        self._frozen: str | None = None
        self._error: BaseException | None = None

    def freeze(self, cid: str) -> None:
        """Pause the container (its cgroup frozen), asking again when the runtime gives up.

        Under heavy load the kernel may not freeze every task before runc's own retries
        run out ("OCI runtime pause failed: unable to freeze"); runc leaves retrying to the
        caller. Without this a base run ended after its build with no test phase, and
        what stopped it was lost.

        Raises:
            DockerRefused, SandboxError: still refused after the last attempt.
        """
        for delay in (*_FREEZE_RETRIES_S, None):
            try:
                with docker_errors("freeze the container after setup and build"):
                    self.api.pause(cid)
                return
            except DockerRefused as e:
                if delay is None or e.not_found or self.stop is not None and self.stop.is_set():
                    raise
                self.journal.append("freeze-retried", check=self.check, error=str(e))
                time.sleep(delay)

    def outside(self, container: str, excluded: tuple[str, ...]) -> None:
        """What setup and build left outside /workspace in `container` (frozen)."""
        try:
            rows, complete = envdiff.outside(self.api, container, excluded=excluded)
        except DockerRefused as e:  # no record is an incomplete one: never "unchanged"
            self.journal.append("environment-unrecorded", check=self.check, error=str(e))
            rows, complete = [], False
        self._outside = (rows, complete)

    def start(self, frozen: str, excluded: tuple[str, ...]) -> None:
        """Read what the frozen build container changed, beside the test phase."""

        def work() -> None:
            try:
                self.outside(frozen, excluded)
            except BaseException as e:  # noqa: BLE001 - raised by `finish`
                self._error = e

        self._frozen = frozen
        self._thread = threading.Thread(target=work, name="proofgate-envdiff", daemon=True)
        self._thread.start()

    def workspace(self, holder: str) -> None:
        """/workspace after setup and build, against the tree as materialized."""
        try:
            rows, complete = envdiff.workspace(self.api, holder, self.manifest)
        except DockerRefused as e:  # no record is an incomplete one: never "unchanged"
            self.journal.append("environment-unrecorded", check=self.check, error=str(e))
            rows, complete = [], False
        self._inside = (rows, complete)

    def finish(self, remove: Callable[[str | None], None], stale: list[str]) -> None:
        """Wait for the reads, remove the frozen build container, compose the record.

        Raises:
            DockerRefused, SandboxError: the daemon refused, or did not answer in time.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        frozen, self._frozen = self._frozen, None
        if frozen is not None:
            try:
                remove(frozen)
            except BaseException:
                stale.append(frozen)  # for the check's removal to try again
                raise
        error, self._error = self._error, None
        if error is not None:
            raise error
        self.compose()

    def compose(self) -> None:
        """Once the reads are in: the record of this run (once), on top of what a cached
        environment's setup left."""
        outside, inside = self._outside, self._inside
        if outside is None:
            return
        self._outside = self._inside = None
        rows = outside[0] + (inside[0] if inside is not None else [])
        complete = outside[1] and (inside is None or inside[1])
        committed = {
            (posixpath.basename(path), digest)
            for path, (kind, digest) in self.manifest.items()
            if kind in ("file", "exec")
        }
        got = envjudge.normalise(rows, committed, complete=complete)
        self.record = envjudge.merge(self.start_env or EnvRecord(), got)
        self.journal.append(
            "environment-recorded",
            check=self.check,
            changes=len(got.changes),
            complete=got.complete,
        )
