"""A stand-in for the `Sandbox` port (gate/sandbox/interface.py) with scripted outcomes.

For orchestration tests that need no container: policy paths, configuration, approvals,
the clean room being unavailable, and the mapping from check results to verdicts. It
behaves like `DockerSandbox` where the orchestrator can tell: commands run in phase order
and a check stops at the first command that does not succeed; the JUnit report comes back
only when the test phase ran and nothing went wrong; `run_check` consumes the tree stream
it is given (so an unsafe tree fails as it would) and records the files it saw.

What a check does is scripted per check name with `Script`; checks without a script
succeed with exit code 0 everywhere. The clean room itself (isolation, limits, read-back)
is tested against the real Docker daemon in tests/integration/.
"""

from __future__ import annotations

import _thread
import hashlib
import io
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from gate.model import (
    CheckResult,
    CheckSpec,
    CommandResult,
    ImageRef,
    Phase,
    PhaseResult,
    Sha256,
)
from gate.sandbox.interface import ImageError, SandboxError
from gate.util.journal import Journal

IMAGE_ID = "sha256:" + "5" * 64

JUNIT_PASSED = b'<testsuite tests="1"><testcase classname="t" name="test_ok"/></testsuite>'
JUNIT_FAILED = (
    b'<testsuite tests="1" failures="1">'
    b'<testcase classname="t" name="test_bad"><failure message="no"/></testcase>'
    b"</testsuite>"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Script:
    """What one check does in the stand-in.

    `exit_codes` are given to the check's commands in order, across phases (commands
    beyond the tuple exit 0); `timed_out`/`oom_killed` mark the first command whose
    exit code is not 0. `junit` is the report read back after the test phase. `error`
    makes the container fail to start (`started=False`). `raises` is raised from
    `run_check` instead of a result (a `SandboxError`: the daemon went away; a
    `KeyboardInterrupt`: Ctrl-C while the check runs). `wait_for` holds the check until
    the named check has started, which only concurrent checks get past; `until_stopped`
    keeps it running until the orchestrator sets the stop event (Ctrl-C elsewhere).
    """

    exit_codes: tuple[int, ...] = ()
    timed_out: bool = False
    oom_killed: bool = False
    junit: bytes | None = None
    error: str | None = None
    raises: BaseException | None = None
    wait_for: str | None = None  # runs on only once that check has started (concurrency)
    until_stopped: bool = False  # runs until the proof's stop event is set, then raises
    interrupt_main: bool = False  # a Ctrl-C reaches the main thread while this one runs


def _command(argv: tuple[str, ...], code: int, script: Script) -> CommandResult:
    log = f"{' '.join(argv)} -> {code}\n".encode()
    failed = code != 0
    return CommandResult(
        argv=argv,
        exit_code=None if failed and (script.timed_out or script.oom_killed) else code,
        duration_s=0.01,
        timed_out=failed and script.timed_out,
        oom_killed=failed and script.oom_killed,
        log_sha256=Sha256(hashlib.sha256(log).hexdigest()),
        log_bytes=len(log),
        log_tail=log.decode(),
    )


def _tree_files(tree_tar: Callable[[], Iterator[bytes]]) -> dict[str, bytes]:
    data = b"".join(tree_tar())
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                files[member.name] = extracted.read()
    return files


@dataclass
class SandboxStandIn:
    """Implements `gate.sandbox.interface.Sandbox`."""

    scripts: Mapping[str, Script] = field(default_factory=dict)
    image_error: str | None = None  # resolve_image raises ImageError with this message
    unavailable: str | None = None  # resolve_image raises SandboxError with this message
    images: list[str] = field(default_factory=list)  # names resolved, in order
    ran: list[CheckSpec] = field(default_factory=list)  # checks run, in order
    trees: dict[str, dict[str, bytes]] = field(default_factory=dict)  # check -> files seen
    started: list[str] = field(default_factory=list)  # checks that began running, in order
    _lock: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def _started(self, name: str) -> None:
        with self._lock:
            self.started.append(name)
            self._lock.notify_all()

    def _await(self, name: str, stop: threading.Event | None) -> None:
        give_up = time.monotonic() + 60  # a hang guard: run one after another, it never starts
        with self._lock:
            while name not in self.started:
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt("stopped")
                if time.monotonic() > give_up:
                    raise AssertionError(f"check {name} never started while this one ran")
                self._lock.wait(0.05)

    def resolve_image(self, name: str) -> ImageRef:
        self.images.append(name)
        if self.unavailable is not None:
            raise SandboxError(self.unavailable)
        if self.image_error is not None:
            raise ImageError(self.image_error)
        return ImageRef(name=name, id=IMAGE_ID)

    def sweep(self) -> tuple[str, ...]:
        return ()

    def run_check(
        self,
        spec: CheckSpec,
        image: ImageRef,
        tree_tar: Callable[[], Iterator[bytes]],
        journal: Journal,
        *,
        stop: threading.Event | None = None,
    ) -> CheckResult:
        with self._lock:
            self.ran.append(spec)
        script = self.scripts.get(spec.name, Script())
        files = _tree_files(tree_tar)
        with self._lock:
            self.trees[spec.name] = files
        self._started(spec.name)
        if script.wait_for is not None:
            self._await(script.wait_for, stop)
        if script.interrupt_main:
            _thread.interrupt_main()  # what SIGINT does: KeyboardInterrupt in the main thread
        if script.until_stopped:
            while stop is not None and not stop.wait(0.05):
                pass
            journal.append("container-removed", check=spec.name, standin=True)
            raise KeyboardInterrupt("stopped")
        if script.raises is not None:
            raise script.raises
        if script.error is not None:
            return CheckResult(name=spec.name, image=image, started=False, error=script.error)
        journal.append("container-started", check=spec.name, standin=True)
        codes = iter(script.exit_codes)
        phases: list[PhaseResult] = []
        test_ran = failed = False
        for phase, commands in spec.phases:
            results: list[CommandResult] = []
            for command in commands:
                result = _command(command.argv, next(codes, 0), script)
                results.append(result)
                if not result.ok:
                    failed = True
                    break
            phases.append(PhaseResult(phase=phase, commands=tuple(results)))
            test_ran = test_ran or phase is Phase.TEST
            if failed:
                break
        journal.append("container-removed", check=spec.name, standin=True)
        report = script.junit if test_ran and spec.junit is not None else None
        return CheckResult(
            name=spec.name, image=image, started=True, phases=tuple(phases), junit_report=report
        )


@dataclass
class StandInFactory:
    """The sandbox factory `gate.proof.prove.prove` takes (called with the proof id); counts
    its calls and keeps the proof ids it was given."""

    sandbox: SandboxStandIn = field(default_factory=SandboxStandIn)
    unavailable: str | None = None  # the factory itself raises SandboxError (no daemon)
    calls: int = 0
    proofs: list[str] = field(default_factory=list)

    def __call__(self, proof: str = "") -> SandboxStandIn:
        self.calls += 1
        self.proofs.append(proof)
        if self.unavailable is not None:
            raise SandboxError(self.unavailable)
        return self.sandbox
