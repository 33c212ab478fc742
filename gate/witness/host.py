"""The witness, proofgate's side (SPEC §3.2; the plugin is `plugin.py` beside it).

Every check gets a tmpfs volume of proofgate's own at `/opt/proofgate`, which the daemon
fills through the holder (a container of the configured image in which nothing of the
check runs) before anything of the check runs, everything owned by `PROTECTED_UID` (no
user of the check), and which every container of the check mounts read-only:

- `boot/sitecustomize.py`, the start-up hook (gate/witness/boot.py): test commands get
  `boot/` first on `PYTHONPATH`, so every Python process of the test phase runs it while
  the interpreter starts, before the working directory is on `sys.path`;
- `witness/proofgate_witness/`, the witness package (`plugin.py` and the `plugin_*.py`
  beside it), which the hook loads by path under its name; `PYTEST_ADDOPTS=-p
  proofgate_witness` then finds it in `sys.modules`, never on `sys.path`;
- `links/`, the test phase's bytecode prefix: the image's own bytecode linked
  (gate/sandbox/bytecode.py), nothing written by the check, ever;
- `config/`, for a differential's runs, the base's pytest configuration
  (gate/differential/pytestconfig.py), named with `-c` and `--rootdir /workspace`.

Setup and build compile into a second volume of the check at `/opt/proofgate-pycache`
(`prefix_tar`: the same links, in directories they may add to), which no test container
mounts: bytecode the change's code wrote while setup or build ran never runs in the test
phase. Each pytest session's witness line in the command's output (read through the
daemon, like the rest of the log) is parsed here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from gate.differential.paths import (
    BOOT_DIR,
    CONFIG_DIR,
    MOUNT,
    PYCACHE,
    TEST_PYCACHE,
    WITNESS_DIR,
    WORKSPACE,
)
from gate.differential.tarprotect import PROTECTED_UID
from gate.model import ShardFilter, WitnessSession

__all__ = [
    "BOOT_FILE",
    "MOUNT",
    "PYCACHE",
    "PROTECTED_UID",
    "TEST_PYCACHE",
    "Scanner",
    "parse_end",
    "parse_session",
    "plugin_tar",
    "prefix_tar",
    "shard_tar",
    "test_environment",
]

MODULE = "proofgate_witness"
MARKER = b"##[proofgate-witness] "
_PATTERN = b"\n" + MARKER  # the plugin starts its line with a newline
MAX_SESSIONS = 16
CONTINUE = "--continue-on-collection-errors"
MAX_LINE = 1 << 20


def parse_session(raw: bytes) -> WitnessSession | None:
    """One witness line's JSON, or None when it is not one (nor a closing line)."""
    try:
        d = json.loads(raw)
        junit = d.get("junit") or {}
        pid = d.get("pid")
        inputs = dict(d.get("inputs") or {})
        return WitnessSession(
            exitstatus=int(d["exitstatus"]),
            junit_path=str(junit["path"]) if junit.get("path") else None,
            junit_sha256=str(junit["sha256"]) if junit.get("sha256") else None,
            counts={str(k): int(v) for k, v in dict(d.get("counts") or {}).items()},
            conftests=tuple(
                (str(p), str(b) if b else None) for p, b in list(d.get("conftests") or [])
            ),
            tampered=tuple(
                (str(t["kind"]), str(t.get("detail", ""))) for t in d.get("tampered") or []
            ),
            xdist=bool(d.get("xdist")),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
            ended=False,
            test_files=tuple(str(p) for p in list(d.get("test_files") or [])),
            reads=tuple((str(r), str(p)) for r, p in list(inputs.get("reads") or [])),
            reads_dropped=int(inputs.get("dropped") or 0),
            durations=_durations(d.get("durations_us")),
            plugins=_plugin_rows(d.get("plugins")),
            foreign=tuple(
                f"{row[0]} ({row[1]})"
                for row in list(d.get("foreign") or [])
                if isinstance(row, list) and len(row) == 2
            ),
            early=tuple(
                f"{row[0]} ({row[1]}) {row[2]}"
                for row in list(d.get("early") or [])
                if isinstance(row, list) and len(row) == 3
            ),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _plugin_rows(raw: object) -> tuple[str, ...]:
    """The plugins a session loaded as comparable text: `name (file): hook=digest, ...`;
    conftests are not among them (the trusted run's are the base's, by construction, and
    `conftest-not-in-tree` judges them)."""
    out: list[str] = []
    for row in raw if isinstance(raw, list) else []:
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[2], dict)):
            continue
        name, path = str(row[0]), str(row[1])
        if path.rsplit("/", 1)[-1] == "conftest.py":
            continue
        hooks = ", ".join(f"{k}={v}" for k, v in sorted(row[2].items()))
        out.append(f"{name} ({path}): {hooks}")
    return tuple(sorted(out))


def _durations(raw: object) -> tuple[tuple[str, float], ...]:
    """The witness's seconds per top-level test (it writes whole microseconds); what is
    not one is left out (they only balance a split, SPEC §3.3, and never decide a
    verdict)."""
    if not isinstance(raw, dict):
        return ()
    out: list[tuple[str, float]] = []
    for key, micros in raw.items():
        if isinstance(micros, int) and not isinstance(micros, bool) and micros >= 0:
            out.append((str(key), micros / 1_000_000))
    return tuple(sorted(out))


def parse_end(raw: bytes) -> int | None:
    """The pid of a closing line (`{"v": 1, "end": PID}`), or None when it is not one."""
    try:
        d = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(d, dict) or set(d) != {"v", "end"}:
        return None
    pid = d["end"]
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


@dataclass
class Scanner:
    """Finds the witness lines in a command's output as it streams past (any chunking):
    a line that starts with the marker.

    More than `MAX_SESSIONS` lines, or a line that does not parse, is kept as a problem:
    the plugin writes one well-formed line per session, so anything else was written by
    something else. A closing line (the plugin's last `atexit` hook) marks the sessions
    of its process before it as ended normally.
    """

    sessions: list[WitnessSession] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _line: bytearray = field(default_factory=bytearray)
    _capturing: bool = False
    _carry: bytes = b"\n"  # the end of what came before (the stream starts a line)

    def feed(self, chunk: bytes) -> None:
        """Linear in the output, whatever it is: only the marker is searched for."""
        buf = self._carry + chunk
        self._carry = b""
        i = 0
        while True:
            if self._capturing:
                newline = buf.find(b"\n", i)
                if newline < 0:
                    self._line += buf[i:]
                    if len(self._line) > MAX_LINE:
                        self._problem("a witness line longer than 1 MiB")
                        self._line.clear()
                        self._capturing = False
                    return
                self._line += buf[i:newline]
                self._finish(bytes(self._line))
                self._line.clear()
                self._capturing = False
                i = newline  # that newline may start the next line's marker
                continue
            found = buf.find(_PATTERN, i)
            if found < 0:
                self._carry = buf[max(i, len(buf) - len(_PATTERN) + 1) :]
                return
            self._capturing = True
            i = found + len(_PATTERN)

    def _finish(self, raw: bytes) -> None:
        pid = parse_end(raw)
        if pid is not None:
            self.sessions = [
                dataclasses.replace(s, ended=True) if s.pid == pid else s for s in self.sessions
            ]
            return
        if len(self.sessions) >= MAX_SESSIONS:
            self._problem(f"more than {MAX_SESSIONS} witness lines")
            return
        session = parse_session(raw)
        if session is None:
            self._problem("a witness line that does not parse")
        else:
            self.sessions.append(session)

    def _problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)


# the witness package as it lies in the volume: (name there, source beside this file)
_PACKAGE = (
    ("__init__.py", "plugin.py"),
    ("_code.py", "plugin_code.py"),
    ("_guard.py", "plugin_guard.py"),
    ("_plugins.py", "plugin_plugins.py"),
    ("_reads.py", "plugin_reads.py"),
    ("_shard.py", "plugin_shard.py"),
)
_BOOT = ("sitecustomize.py", "boot.py")
BOOT_FILE = f"{BOOT_DIR}/{_BOOT[0]}"  # the start-up hook as the test containers see it
_SHARD_FILE = "proofgate_shard.json"


def _source(name: str) -> bytes:
    return resources.files("gate.witness").joinpath(name).read_bytes()


@lru_cache(maxsize=1)
def plugin_digest() -> str:
    """SHA-256 of the start-up hook's and the witness's sources: what a cached base run
    was witnessed by."""
    h = hashlib.sha256()
    for there, here in (_BOOT, *_PACKAGE):
        data = _source(here)
        h.update(f"{there}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _directory(tar: tarfile.TarFile, name: str, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    info.uid = info.gid = PROTECTED_UID
    tar.addfile(info)


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, 1
    info.uid = info.gid = PROTECTED_UID
    tar.addfile(info, io.BytesIO(data))


@lru_cache(maxsize=8)
def plugin_tar(
    *,
    bytecode: tuple[str, ...] = (),
    pytest_config: tuple[str, bytes] | None = None,
) -> bytes:
    """The witness volume's content, all owned by `PROTECTED_UID` and read-only: the
    start-up hook, the witness package, the test phase's prefix with a link to each of
    the image's `bytecode` files (gate/sandbox/bytecode.py), the mount point of setup's
    and build's prefix volume and, with `pytest_config` (a differential's run),
    `config/` with that file."""
    from gate.sandbox.bytecode import farm_entries  # the volume is made as a check starts

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        package = WITNESS_DIR.removeprefix(MOUNT + "/") + f"/{MODULE}"
        boot = BOOT_DIR.removeprefix(MOUNT + "/")
        links = TEST_PYCACHE.removeprefix(MOUNT + "/")
        for name in ("witness", package, boot, links):
            _directory(tar, name, 0o555)
        _file(tar, f"{boot}/{_BOOT[0]}", _source(_BOOT[1]))
        for there, here in _PACKAGE:
            _file(tar, f"{package}/{there}", _source(here))
        for name in (f"{links}{WORKSPACE}", f"{links}/opt", f"{links}{MOUNT}"):
            _directory(tar, name, 0o555)
        for member in farm_entries(bytecode, prefix=links, writable=False):
            tar.addfile(member)
        if pytest_config is not None:
            _add_config(tar, *pytest_config)
    return buf.getvalue()


@lru_cache(maxsize=8)
def prefix_tar(*, bytecode: tuple[str, ...] = ()) -> bytes:
    """Setup's and build's prefix volume (mounted at `PYCACHE` in their container and in
    the holder, never in a test container), extracted at its mount point: the image's
    bytecode linked, in directories they may add to."""
    from gate.sandbox.bytecode import farm_entries

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in farm_entries(bytecode, prefix=".", writable=True):
            tar.addfile(member)
    return buf.getvalue()


def shard_tar(shard: ShardFilter) -> bytes:
    """`proofgate_shard.json` in the witness package (SPEC §3.3): the share of the tests
    this shard runs, read by the plugin at import; read-only and owned by
    `PROTECTED_UID` like the plugin."""
    data = json.dumps(shard.to_dict(), sort_keys=True).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        package = WITNESS_DIR.removeprefix(MOUNT + "/") + f"/{MODULE}"
        _file(tar, f"{package}/{_SHARD_FILE}", data)
    return buf.getvalue()


def _add_config(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    where = CONFIG_DIR.removeprefix(MOUNT + "/")
    info = tarfile.TarInfo(where)
    info.type, info.mode = tarfile.DIRTYPE, 0o555
    info.uid = info.gid = PROTECTED_UID
    tar.addfile(info)
    info = tarfile.TarInfo(f"{where}/{name}")
    info.size, info.mode, info.mtime = len(data), 0o444, 1
    info.uid = info.gid = PROTECTED_UID
    tar.addfile(info, io.BytesIO(data))


def test_environment(
    env: dict[str, str], pytest_config: tuple[str, bytes] | None, *, differential: bool
) -> list[str]:
    """What a test command adds to its environment (`env`: the check's and the image's).
    With `pytest_config` (the file's name in the volume's `config/` and its content),
    pytest reads that file and nothing of the tree as its configuration, rooted at the
    workspace, its `pythonpath` given again as absolute paths under it (pytest resolves
    them against the file's directory, which is the volume's here).

    With a differential, every run of it (head, base, trusted, proving) gets the same
    options (SPEC §3.2): a module of the base's tests that does not import against the
    change (or a new test module without it) costs that module's tests, not the whole
    run, as pytest would stop at a collection error otherwise.
    """
    import shlex

    from gate.differential.pytestconfig import pythonpath

    addopts = f"-p {MODULE}"
    if differential:
        addopts += f" {CONTINUE}"
    if pytest_config is not None:
        name, data = pytest_config
        addopts += f" -c {CONFIG_DIR}/{name} --rootdir {WORKSPACE}"
        paths = pythonpath(name, data)
        if paths:
            addopts += " -o " + shlex.quote("pythonpath=" + " ".join(paths))
    if env.get("PYTEST_ADDOPTS"):
        addopts += " " + env["PYTEST_ADDOPTS"]
    path = BOOT_DIR + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return [f"PYTEST_ADDOPTS={addopts}", f"PYTHONPATH={path}"]
