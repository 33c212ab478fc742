"""Small steps of a check's containers that need nothing of its state: a command's exit
status and OOM kill as the daemon records them, and independent daemon requests at once
(gate/sandbox/container.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from docker import APIClient

from gate.model import CheckSpec, Phase
from gate.sandbox.errors import DockerRefused, docker_errors

__all__ = ["concurrently", "exit_code", "lone", "non_root", "oom_killed", "overlaps"]


def exit_code(api: APIClient, exec_id: str) -> int | None:
    """A command's exit status; None when the daemon has none."""
    # The stream can close a moment before the daemon records the exit status.
    for _ in range(50):
        try:
            with docker_errors("read an exit status"):
                info = api.exec_inspect(exec_id)
        except DockerRefused:
            return None
        if not info.get("Running"):
            code = info.get("ExitCode")
            return int(code) if code is not None else None
        time.sleep(0.05)
    return None


def oom_killed(api: APIClient, container: str, since: float, status: int) -> bool:
    """Whether the kernel's OOM killer struck in `container` during a command.

    Docker 20.10 sets State.OOMKilled only when the container's init dies; an OOM
    kill of an exec'd process shows up as an `oom` event. Newer daemons set both.
    """
    try:
        with docker_errors("inspect the container"):
            state = api.inspect_container(container).get("State") or {}
            if state.get("OOMKilled"):
                return True
            # A SIGKILL (137) may come from the OOM killer; its event can lag a little.
            until = time.time() + (0.5 if status == 137 else 0.0)
            events = api.events(
                since=since - 1,
                until=until,
                filters={"container": [container], "event": ["oom"]},
                decode=True,
            )
            return any(True for _ in events)
    except DockerRefused:
        return False


def concurrently(first: Callable[[], None], *rest: Callable[[], None]) -> None:
    """Run independent daemon requests at once, `first` in this thread; after all ended,
    raise the first one's error (in argument order)."""
    errors: list[BaseException | None] = [None] * (1 + len(rest))

    def run(i: int, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as e:  # noqa: BLE001 - raised below, after the others ended
            errors[i] = e

    threads = [
        threading.Thread(target=run, args=(i, step), daemon=True) for i, step in enumerate(rest, 1)
    ]
    for thread in threads:
        thread.start()
    run(0, first)
    for thread in threads:
        thread.join()
    raised = next((e for e in errors if e is not None), None)
    if raised is not None:
        raise raised


def lone(spec: CheckSpec) -> bool:
    """Whether the check is one container from start to end: a single test command, no
    setup or build, and no report to read back after it (a check with a differential
    also records its environment through the holder)."""
    commands = [c for _, phase_commands in spec.phases for c in phase_commands]
    tests_only = all(phase is Phase.TEST for phase, _ in spec.phases)
    return tests_only and len(commands) == 1 and spec.junit is None


def non_root(user: str) -> bool:
    name = user.split(":", 1)[0]
    return name not in ("", "0", "root")


def overlaps(path: str, reserved: tuple[str, ...]) -> bool:
    path = path.rstrip("/") or "/"
    return (
        any(path == r or path.startswith(r.rstrip("/") + "/") for r in reserved if r != "/")
        or path == "/"
    )
