"""Clean-room overhead: the same tree and commands run natively and in `DockerSandbox`.

    python benchmarks/overhead.py [--files 2000] [--runs 7] [--suite-seconds 20] [--quick]

It generates a Python project of `--files` files whose pytest suite burns about
`--suite-seconds` of CPU, streams it as a tar archive (as the git adapter does), and
measures in one run:

1. per-check overhead on that tree with a trivial command (`true`): native = unpack the
   tar into a fresh directory with `tar -x` (as `git worktree add` writes every file)
   and run it there; clean room = `run_check` (container
   create, tree copy, exec, remove). Median of `--runs`. Goal: clean room - native
   <= 0.4 s.
2. the suite itself, once natively (host Python + pytest) and once in the clean room.
   Goal: ratio <= 1.10 for a suite of >= 20 s.

Needs a Docker daemon and the local image proofgate/cleanroom:latest (make image).
The end-to-end comparison against `git worktree add` + `proofgate prove` belongs to the
orchestrator; this measures the clean room's share of it.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator

from gate.model import CheckSpec, Command, Limits, Phase
from gate.sandbox.docker import DockerSandbox
from gate.util.journal import Journal

IMAGE = "proofgate/cleanroom:latest"
TEST_MODULES = 40


def project_files(files: int, suite_seconds: float) -> dict[str, bytes]:
    """A package with `files` files in all; the tests burn CPU for about `suite_seconds`."""
    loops = _calibrate(suite_seconds / TEST_MODULES)
    entries: dict[str, bytes] = {
        "pyproject.toml": b'[project]\nname = "bench"\nversion = "0"\n',
        "src/bench/__init__.py": (
            b"def work(n):\n    total = 0\n    for i in range(n):\n"
            b"        total = (total * 31 + i) % 1000003\n    return total\n"
        ),
    }
    for i in range(TEST_MODULES):
        entries[f"tests/test_m{i:03d}.py"] = (
            f"import sys\nsys.path.insert(0, 'src')\nfrom bench import work\n\n"
            f"def test_work_{i}():\n    assert work({loops}) >= 0\n"
        ).encode()
    for i in range(max(0, files - len(entries))):
        entries[f"src/bench/data/d{i // 100:03d}/f{i:05d}.txt"] = f"payload {i}\n".encode() * 20
    return entries


def make_tree(files: int, suite_seconds: float) -> bytes:
    """`project_files` as an uncompressed tar, as the git adapter streams a tree."""
    entries = project_files(files, suite_seconds)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _calibrate(seconds: float) -> int:
    n = 200_000
    t = time.perf_counter()
    total = 0
    for i in range(n):
        total = (total * 31 + i) % 1000003
    per = (time.perf_counter() - t) / n
    return max(1000, int(seconds / per))


def chunks_of(data: bytes) -> Callable[[], Iterator[bytes]]:
    def gen() -> Iterator[bytes]:
        for i in range(0, len(data), 1 << 16):
            yield data[i : i + (1 << 16)]

    return gen


def native(tree: bytes, argv: list[str]) -> float:
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="proofgate-native-") as d:
        # like `git worktree add`: write every file of the tree to a fresh directory
        subprocess.run(["tar", "-x", "-C", d], input=tree, check=True)  # noqa: S607
        subprocess.run(argv, cwd=d, check=True, stdout=subprocess.DEVNULL)  # noqa: S603
    return time.perf_counter() - t


def clean_room(sandbox: DockerSandbox, tree: bytes, argv: list[str]) -> float:
    image = sandbox.resolve_image(IMAGE)
    check = CheckSpec(
        name="bench",
        phases=((Phase.TEST, (Command(argv=tuple(argv)),)),),
        limits=Limits(timeout=3600, cpus=2.0, memory=2 * 1024**3),
    )
    t = time.perf_counter()
    result = sandbox.run_check(check, image, chunks_of(tree), Journal())
    elapsed = time.perf_counter() - t
    if not (result.started and all(p.ok for p in result.phases)):
        raise SystemExit(f"clean-room run failed: {result}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--suite-seconds", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="overhead only, no suite")
    args = parser.parse_args(argv)

    tree = make_tree(args.files, args.suite_seconds)
    sandbox = DockerSandbox()
    print(f"tree: {args.files} files, {len(tree) / 1e6:.1f} MB tar", file=sys.stderr)

    clean_room(sandbox, tree, ["true"])  # warm-up: page cache, image layers
    tiny = make_tree(3, 0.0)
    fixed = statistics.median(clean_room(sandbox, tiny, ["true"]) for _ in range(args.runs))
    print(f"clean room fixed cost (3-file tree, trivial command): {fixed:.3f} s")
    nat = [native(tree, ["true"]) for _ in range(args.runs)]
    box = [clean_room(sandbox, tree, ["true"]) for _ in range(args.runs)]
    n_med, b_med = statistics.median(nat), statistics.median(box)
    print(f"per-check, trivial command: native {n_med:.3f} s, clean room {b_med:.3f} s")
    print(f"per-check overhead (median of {args.runs}): {b_med - n_med:.3f} s (goal <= 0.4 s)")

    if not args.quick:
        suite = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
        host_suite = [sys.executable, *suite[1:]]
        n_suite = native(tree, host_suite)
        b_suite = clean_room(sandbox, tree, suite)
        print(f"suite: native {n_suite:.2f} s, clean room {b_suite:.2f} s")
        print(f"suite ratio: {b_suite / n_suite:.3f}x (goal <= 1.10x for a suite >= 20 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
