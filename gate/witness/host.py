"""The witness, proofgate's side (SPEC §3.2; the plugin is `plugin.py` beside it).

Every check gets one tmpfs volume of proofgate's own at `/opt/proofgate`, which the
daemon fills before anything of the check runs, everything owned by `PROTECTED_UID` (no
user of the check): the volume's root and `witness/` 0555 and the plugin 0444, so the
check (root without capabilities, or any other user) can import it but never change,
rename or replace it; and `pycache/` (1777), the bytecode prefix, written by setup and
build (all but `pycache/opt/proofgate`: no bytecode for the witness; what they write for
the tree, a differential's test phase does not see). Test containers mount the volume
read-only. A differential's runs get the base's pytest configuration in `config/` (0444;
gate/differential/pytestconfig.py). Test commands get `PYTEST_ADDOPTS=-p proofgate_witness`
(and, with that configuration, `-c` naming it and `--rootdir /workspace`) and `witness/` first
on `PYTHONPATH`, so every pytest session of the test phase loads the plugin before the
tree's code; its line in the command's output (read through the daemon, like the rest of
the log) is parsed here.
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

from gate.differential.paths import CONFIG_DIR, MOUNT, PYCACHE, WITNESS_DIR, WORKSPACE
from gate.differential.tarprotect import PROTECTED_UID
from gate.model import ShardFilter, WitnessSession

__all__ = [
    "MOUNT",
    "PYCACHE",
    "PROTECTED_UID",
    "Scanner",
    "parse_end",
    "parse_session",
    "plugin_tar",
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
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


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


@lru_cache(maxsize=1)
def plugin_digest() -> str:
    """SHA-256 of the plugin's source: what a cached base run was witnessed by."""
    source = resources.files("gate.witness").joinpath("plugin.py").read_bytes()
    return hashlib.sha256(source).hexdigest()


@lru_cache(maxsize=8)
def plugin_tar(
    *,
    writable_prefix: bool,
    bytecode: tuple[str, ...] = (),
    pytest_config: tuple[str, bytes] | None = None,
) -> bytes:
    """The volume's content: `witness/` with the plugin (read-only) and `pycache/`, all
    owned by `PROTECTED_UID`; `pycache/` is 1777 for a check with setup or build (whose
    test containers mount the volume read-only), 0555 otherwise. In the prefix, a link
    to each of the image's `bytecode` files (gate/sandbox/bytecode.py). With
    `pytest_config` (a differential's run), `config/` holds that file, read-only."""
    from gate.sandbox.bytecode import farm_entries  # the volume is made as a check starts

    source = resources.files("gate.witness").joinpath("plugin.py").read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        # The prefix maps a source's absolute path into itself. `pycache/opt/proofgate` is
        # not the check's, so setup and build (the change's code) cannot plant bytecode
        # for the witness that a test command would then run instead of the source; what
        # they write in `pycache/workspace` a differential's test containers never see
        # (an empty read-only mount over it: gate/sandbox/container.py).
        opened = 0o1777 if writable_prefix else 0o555
        dirs = [("witness", 0o555), ("pycache", opened), (f"pycache{WORKSPACE}", opened)]
        dirs += [("pycache/opt", opened), (f"pycache{MOUNT}", 0o555)]
        for name, mode in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            info.uid = info.gid = PROTECTED_UID
            tar.addfile(info)
        info = tarfile.TarInfo(f"witness/{MODULE}.py")
        info.size, info.mode = len(source), 0o444
        info.uid = info.gid = PROTECTED_UID
        info.mtime = 1
        tar.addfile(info, io.BytesIO(source))
        name = PYCACHE.removeprefix(MOUNT + "/")
        for member in farm_entries(bytecode, prefix=name, writable=writable_prefix):
            tar.addfile(member)
        if pytest_config is not None:
            _add_config(tar, *pytest_config)
    return buf.getvalue()


def shard_tar(shard: ShardFilter) -> bytes:
    """`witness/proofgate_shard.json` (SPEC §3.3): the share of the tests this shard runs,
    read by the plugin at import; read-only and owned by `PROTECTED_UID` like the plugin."""
    data = json.dumps(shard.to_dict(), sort_keys=True).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(f"witness/{MODULE.removesuffix('_witness')}_shard.json")
        info.size, info.mode, info.mtime = len(data), 0o444, 1
        info.uid = info.gid = PROTECTED_UID
        tar.addfile(info, io.BytesIO(data))
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
    env: dict[str, str], pytest_config: str | None, *, differential: bool
) -> list[str]:
    """What a test command adds to its environment (`env`: the check's and the image's).
    With `pytest_config` (the file name in the volume's `config/`), pytest reads that
    file and nothing of the tree as its configuration, rooted at the workspace.

    With a differential, every run of it (head, base, trusted, proving) gets the same
    options (SPEC §3.2): a module of the base's tests that does not import against the
    change (or a new test module without it) costs that module's tests, not the whole
    run, as pytest would stop at a collection error otherwise.
    """
    addopts = f"-p {MODULE}"
    if differential:
        addopts += f" {CONTINUE}"
    if pytest_config is not None:
        addopts += f" -c {CONFIG_DIR}/{pytest_config} --rootdir {WORKSPACE}"
    if env.get("PYTEST_ADDOPTS"):
        addopts += " " + env["PYTEST_ADDOPTS"]
    path = WITNESS_DIR + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return [f"PYTEST_ADDOPTS={addopts}", f"PYTHONPATH={path}"]
