"""Benchmark: what the environment record costs a run with a build (SPEC §3.2).

In a container of the clean-room image, a build-like step writes what an editable
install writes (a `.pth` hook, a finder module, a console script) and N other files
outside /workspace; then, interleaved in the same run, the step that ends a build is
timed both ways: commit alone (what a run without a differential pays), against freeze +
the daemon's `changes` + the digests of every changed path + commit (what a run with a
differential pays). Prints the medians and the difference. Needs Docker and the local
image proofgate/cleanroom:latest.

    python -m benchmarks.environment [--repeats 5] [--files 2000]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import docker

from gate.sandbox import envdiff

IMAGE = "proofgate/cleanroom:latest"
LABEL = {"proofgate-benchmark": "environment"}

WRITE = (
    "S=/usr/local/lib/python3.11/dist-packages; mkdir -p $S/pkg; "
    "echo /workspace/src > $S/__editable__.calc-0.1.pth; echo 'x = 1' > $S/__editable___finder.py; "
    "printf '#!/usr/bin/python3\\nimport calc\\n' > /usr/local/bin/calc; "
    "i=0; while [ $i -lt {files} ]; do echo $i > $S/pkg/m$i.py; i=$((i+1)); done"
)


def _once(api: docker.APIClient, files: int, *, record: bool) -> float:
    host = api.create_host_config(network_mode="none")
    cid = api.create_container(
        IMAGE, entrypoint=["sleep", "infinity"], labels=LABEL, host_config=host
    )["Id"]
    image = None
    try:
        api.start(cid)
        e = api.exec_create(cid, ["sh", "-c", WRITE.format(files=files)])
        api.exec_start(e)
        t = time.perf_counter()
        got: list[str] = []

        def commit() -> None:
            got.append(api.commit(cid, pause=not record)["Id"])

        if record:  # as the sandbox does: frozen, the listing beside the commit
            api.pause(cid)
            worker = threading.Thread(target=commit)
            worker.start()
            envdiff.outside(api, cid)
            worker.join()
        else:
            commit()
        image = got[0]
        return time.perf_counter() - t
    finally:
        api.remove_container(cid, force=True)
        if image is not None:
            api.remove_image(image, force=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    api = docker.APIClient()
    plain: list[float] = []
    recorded: list[float] = []
    for _ in range(args.repeats):
        plain.append(_once(api, args.files, record=False))
        recorded.append(_once(api, args.files, record=True))
    a, b = statistics.median(plain), statistics.median(recorded)
    print(f"commit alone:             {a * 1000:7.1f} ms (median of {args.repeats})")
    print(f"freeze + record + commit: {b * 1000:7.1f} ms")
    print(f"the record costs:         {(b - a) * 1000:+7.1f} ms ({b / a:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
