"""A Docker daemon other than the default one: `DOCKER_HOST` reaches it for every command.

The test starts a second dockerd of its own on a non-default unix socket, with its own
data-root, exec-root, pidfile and (in a private mount namespace) its own /etc/docker, so
its engine id differs from the machine's daemon; the clean-room image is loaded into it
under a tag only it has. Skipped where a second daemon cannot be started (not root, no
dockerd or unshare). `tcp://` with TLS and `ssh://` go through the same Docker SDK
`from_env()` path (docs/cli.md, "A remote Docker daemon").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from gate.faces.cli import main
from tests.integration.test_shards import CHECK, head_change, suite
from tests.provecli import IMAGE, cli_prove, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker

REMOTE_TAG = "proofgate-remote-only/cleanroom:test"


def _can_start() -> str | None:
    if os.geteuid() != 0:
        return "starting a second dockerd needs root"
    for tool in ("dockerd", "unshare", "docker"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    return None


@pytest.fixture(scope="module")
def second_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    problem = _can_start()
    if problem is not None:
        pytest.skip(problem)
    root = Path("/tmp") / f"pg-dockerd-{os.getpid()}-{time.monotonic_ns()}"  # short: socket path
    (root / "etc").mkdir(parents=True)
    sock = root / "docker.sock"
    script = (
        f"mount --bind {root}/etc /etc/docker && exec dockerd --data-root {root}/data "
        f"--exec-root {root}/exec --pidfile {root}/dockerd.pid -H unix://{sock} "
        "--bridge=none --iptables=false --ip6tables=false --ip-masq=false"
    )
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(  # noqa: S603 - fixed argv
        # its own network namespace too: a dockerd with --bridge=none in the host's removes
        # the host daemon's docker0 bridge (as tests/integration/test_faults.py says)
        ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script],  # noqa: S607
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    host = f"unix://{sock}"
    try:
        client = None
        for _ in range(100):
            if proc.poll() is not None:
                pytest.skip(
                    f"the second dockerd exited: {(root / 'dockerd.log').read_text()[-500:]}"
                )
            try:
                client = docker.DockerClient(base_url=host)
                client.ping()
                break
            except docker.errors.DockerException:
                client = None
                time.sleep(0.2)
        if client is None:
            pytest.skip("the second dockerd did not answer within 20 s")
        saved = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)  # noqa: S603,S607
        assert saved.stdout is not None
        client.images.load(saved.stdout.read())
        saved.wait()
        client.images.get(IMAGE).tag(REMOTE_TAG)
        client.close()
        yield host
    finally:
        proc.send_signal(signal.SIGTERM)  # the daemon we started, by its own process
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _remote_config(image: str) -> bytes:
    return (
        f"version: 1\nimage: {image}\ndefaults: {{timeout: 60, memory: 256m, pids: 64}}\n"
        f"checks:\n{CHECK}"
    ).encode()


def test_every_command_reaches_the_daemon_docker_host_names(
    tmp_path: Path, second_daemon: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = docker.from_env()
    try:
        local_id = local.info()["ID"]
        with pytest.raises(docker.errors.ImageNotFound):
            local.images.get(REMOTE_TAG)  # only the second daemon has the image
    finally:
        local.close()
    remote = docker.DockerClient(base_url=second_daemon)
    remote_id = remote.info()["ID"]
    assert remote_id != local_id
    base = {b".github/proofgate.yml": _remote_config(REMOTE_TAG), **suite()}
    _, path = pr_repo(tmp_path, base, head_change(regress=False))
    keys = tmp_path / "keys"
    assert main(["keygen", "--out", str(keys)]) == 0

    monkeypatch.setenv("DOCKER_HOST", second_daemon)
    # a one-job proof, and a sharded one: every command runs on the second daemon
    assert cli_prove(path, tmp_path / "one", "--key", str(keys / "proofgate.key")) == 0
    for i in (1, 2):
        out = tmp_path / f"s{i}"
        assert cli_prove(path, out, "--key", str(keys / "proofgate.key"), "--shard", f"{i}/2") == 0
    agg = tmp_path / "agg"
    shards = [str(tmp_path / f"s{i}" / "receipt.json") for i in (1, 2)]
    pub = str(keys / "proofgate.pub")
    assert main(["aggregate", *shards, "--key", pub, "--out", str(agg)]) == 0

    one = receipt_predicate(tmp_path / "one")
    assert one["docker"] == {"engine_id": remote_id}
    assert receipt_predicate(agg)["docker"] == {"engine_ids": [remote_id]}
    text = json.dumps(one)
    assert second_daemon not in text  # the daemon's address is never in the receipt
    assert second_daemon.removeprefix("unix://") not in text
    # nothing of the proof is left on the second daemon
    assert remote.containers.list(all=True) == []
    remote.close()
