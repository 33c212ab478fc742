# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""The witness's record of what test code read (SPEC §3.2; a part of the witness
package, see `plugin.py`). Imports nothing of proofgate."""

import os
import sys

_getattr = getattr
_getframe = sys._getframe
_isinstance = isinstance
_len = len
_str = str
_sorted = sorted

# SPEC §3.2: what the base's tests depend on comes from the base. The collected tests'
# files (a test's file is the file the run itself reports) and the workspace files test
# code opened for reading (data such as `calc/data/cases.json`), each bounded; proofgate
# keeps the reads whose reader is a test file of the check (gate/differential/__init__.py).
_WORKSPACE = "/workspace/"
_MAX_TEST_FILES = 20000
_MAX_READS = 2000
_SOURCE_DISPLAY = ("/linecache.py",)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _test_files(items):
    """The files the collected tests are defined in (absolute paths), bounded."""
    out = set()
    for item in items:
        path = _getattr(item, "path", None) or _getattr(item, "fspath", None)
        if path is not None:
            out.add(_str(path))
            if _len(out) >= _MAX_TEST_FILES:
                break
    return _sorted(out)


def _reading(mode, flags):
    if _isinstance(mode, str):
        return not any(c in mode for c in "wax+")
    return _isinstance(flags, int) and not flags & _WRITE_FLAGS


def _make_reads():
    """An audit hook (Python 3.8+) on `open`: for a read of a workspace file, the nearest
    workspace frame that asked for it (the reader). Opens made by the import system on
    behalf of a module (its source, through the frozen importlib) are imports, and source
    lines read for a traceback or `inspect` (through `linecache`) are displays: neither
    is recorded. Returns a function giving what was recorded."""
    seen = {}  # (reader, path) -> None, in order
    dropped = [0]

    def hook(event, args):
        if event != "open" or not args:
            return
        path = args[0]
        if not _isinstance(path, str) or not path.startswith(_WORKSPACE):
            return
        if not _reading(args[1] if _len(args) > 1 else None, args[2] if _len(args) > 2 else None):
            return
        try:
            frame = _getframe(1)
        except ValueError:
            return
        reader = None
        for _ in range(64):
            if frame is None:
                break
            name = frame.f_code.co_filename
            if name.startswith("<frozen importlib") or name.endswith(_SOURCE_DISPLAY):
                return
            if name.startswith(_WORKSPACE):
                reader = name
                break
            frame = frame.f_back
        if reader is None or (reader, path) in seen:
            return
        if _len(seen) >= _MAX_READS:
            dropped[0] += 1
            return
        seen[(reader, path)] = None

    if _getattr(sys, "addaudithook", None) is not None:
        sys.addaudithook(hook)

    def to_json():
        return {"reads": [[r, p] for r, p in seen], "dropped": dropped[0]}

    return to_json
