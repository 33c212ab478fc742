"""The foundation's proof that CI really runs Docker: a container from the locally built
clean-room image, no network, a file copied in, a command run, its exit code read."""

from __future__ import annotations

import io
import tarfile

import docker
import pytest

from tests.conftest import own_labels


def _tar_with(name: str, data: bytes, mode: int = 0o755) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = mode
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.docker
@pytest.mark.parametrize(("status", "expected"), [(0, 0), (7, 7)], ids=["exit-0", "exit-7"])
def test_cleanroom_container_runs_copied_script_without_network(
    docker_client: docker.DockerClient, cleanroom_image: str, status: int, expected: int
) -> None:
    script = (
        "#!/bin/sh\n"
        "set -e\n"
        "python3 -c 'import pytest'\n"
        # no network: only the loopback interface exists
        'test "$(ls /sys/class/net)" = lo\n'
        f"exit {status}\n"
    ).encode()
    container = docker_client.containers.create(
        cleanroom_image,
        command=["/workspace/check.sh"],
        network_mode="none",
        labels=own_labels(),
        working_dir="/workspace",
    )
    try:
        assert container.put_archive("/workspace", _tar_with("check.sh", script))
        container.start()
        result = container.wait(timeout=60)
        logs = container.logs().decode("utf-8", "replace")
        assert result["StatusCode"] == expected, logs
    finally:
        container.remove(force=True)
