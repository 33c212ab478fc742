"""The egress broker's cost per check: the same check with and without it, same run.

    python -m benchmarks.egress [--runs 5] [--mb 20]

Measures, alternating the two arms `--runs` times and reporting medians:

1. per check: `run_check` of a check whose setup is `true` with `network: none` (the
   baseline: no network) and with `network: setup` + an allowlist (internal network,
   broker container started, waited for, stopped, its log read, both removed);
2. a download of `--mb` MiB from a stand-in registry (`python3 -m http.server` in a
   clean-room container on a network created here), timed inside the container: through
   the broker in a check's setup, and directly from a container on the registry's
   network (the baseline).

Only networks and containers created here are used (the broker reaches the stand-in
through the test-only overrides, `PROOFGATE_UNSAFE_EGRESS_*`). Needs a Docker daemon and
the local image proofgate/cleanroom:latest (make image).
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import statistics
import tarfile
import time
from collections.abc import Iterator

import docker

from gate.model import CheckSpec, Command, Limits, Phase
from gate.sandbox.docker import DockerSandbox
from gate.sandbox.egress import UNSAFE_ALLOW_NETS_ENV, UNSAFE_HOSTS_ENV, UNSAFE_NETWORK_ENV
from gate.util.journal import Journal

IMAGE = "proofgate/cleanroom:latest"
HOST = "registry.proofgate.test"
FETCH = (
    "import time, urllib.request; t = time.monotonic(); "
    "n = len(urllib.request.urlopen('http://{host}:8000/blob', timeout=60).read()); "
    "print('FETCH', n, time.monotonic() - t)"
)


def _tree() -> Iterator[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("README")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    yield buf.getvalue()


def _check(setup: str, *, broker: bool) -> CheckSpec:
    limits = Limits(
        timeout=300,
        network="setup" if broker else "none",
        egress=(f"{HOST}:8000",) if broker else (),
        memory=512 * 1024**2,
        cpus=1.0,
    )
    phases = ((Phase.SETUP, (Command.shell(setup),)), (Phase.TEST, (Command.shell("true"),)))
    return CheckSpec(name="bench", phases=phases, limits=limits)


def _fetch_seconds(log_tail: str) -> float:
    line = next(x for x in log_tail.splitlines() if x.startswith("FETCH "))
    return float(line.split()[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=int, default=20)
    args = parser.parse_args(argv)

    client = docker.from_env(timeout=120)
    sandbox = DockerSandbox(client, log_tail_bytes=4096)
    image = sandbox.resolve_image(IMAGE)
    name = f"proofgate-bench-egress-{secrets.token_hex(4)}"
    network = client.networks.create(name, driver="bridge", labels={"proofgate-bench": "1"})
    server = client.containers.run(
        IMAGE,
        [
            "sh",
            "-c",
            f"mkdir -p /srv && head -c {args.mb * 1024 * 1024} /dev/zero > /srv/blob && "
            "cd /srv && exec python3 -m http.server 8000",
        ],
        detach=True,
        network=name,
        user="0",
        labels={"proofgate-bench": "1"},
    )
    try:
        server.reload()
        ip = server.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
        os.environ[UNSAFE_NETWORK_ENV] = name
        os.environ[UNSAFE_ALLOW_NETS_ENV] = f"{ip}/32"
        os.environ[UNSAFE_HOSTS_ENV] = f"{HOST}={ip}"
        time.sleep(1)  # let the stand-in bind its port (a benchmark, not a test)

        per_check: dict[bool, list[float]] = {False: [], True: []}
        fetch: dict[str, list[float]] = {"direct": [], "broker": []}
        for _ in range(args.runs):
            for broker in (False, True):
                t0 = time.monotonic()
                result = sandbox.run_check(_check("true", broker=broker), image, _tree, Journal())
                per_check[broker].append(time.monotonic() - t0)
                assert result.phases[0].ok, result
            result = sandbox.run_check(
                _check(f'python3 -c "{FETCH.format(host=HOST)}"', broker=True),
                image,
                _tree,
                Journal(),
            )
            fetch["broker"].append(_fetch_seconds(result.phases[0].commands[0].log_tail))
            out = client.containers.run(
                IMAGE,
                ["python3", "-c", FETCH.format(host=ip)],
                network=name,
                remove=True,
                labels={"proofgate-bench": "1"},
            )
            fetch["direct"].append(_fetch_seconds(out.decode()))
    finally:
        server.remove(force=True)
        network.remove()

    base, with_broker = (statistics.median(per_check[b]) for b in (False, True))
    direct, brokered = statistics.median(fetch["direct"]), statistics.median(fetch["broker"])
    print(f"per check (setup `true`), median of {args.runs}:")
    print(f"  network: none        {base:6.3f} s")
    print(f"  network: setup+egress {with_broker:6.3f} s")
    print(f"  ratio {with_broker / base:.2f}x, +{with_broker - base:.3f} s per check")
    print(f"download of {args.mb} MiB, median of {args.runs}:")
    print(f"  direct               {direct:6.3f} s ({args.mb / direct:.0f} MiB/s)")
    print(f"  through the broker   {brokered:6.3f} s ({args.mb / brokered:.0f} MiB/s)")
    print(f"  ratio {brokered / direct:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
