# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""proofgate's witness: a pytest plugin that reports what pytest itself saw (SPEC §3.2).

This one file is copied into every check container as `proofgate_witness.py`, in a
directory the check cannot write (docs/security.md, "The witness"), and every test
command gets `PYTEST_ADDOPTS=-p proofgate_witness` and that directory on `PYTHONPATH`.
Loaded before any test module or conftest is imported, it writes one line to the
standard output pytest started with, at the end of the session, after the JUnit report
was written:

    ##[proofgate-witness] {"v": 1, "exitstatus": ..., "junit": {...}, ...}

proofgate compares that line with what it reads back itself: the report's SHA-256 (a
report rewritten after pytest wrote it, by an `atexit` hook or a process left behind,
no longer matches), the session's exit status (a process that exits 0 although pytest
counted failures), the conftest files pytest loaded (each must be a file of the tree,
as committed) and the tripwires below. Code that runs inside pytest's process can in
principle lie about that process; the witness makes the generic ways to do so visible:

- `outcome-rewritten`: a test's call raised (not a skip or xfail) and its report says
  passed;
- `outcome-rewritten` too: a report's outcome changed between the hook that made it and
  the hooks that report it (the JUnit writer among them);
- `pytest-patched`: a function or class of pytest or pluggy, or a method of such a
  class, was replaced after this plugin was loaded;
- `plugin-registered`: a plugin other than a conftest was registered while the tests
  were collected or ran;
- `tests-unaccounted`: the session ended with status 0 and a collected test never ran.

Stdlib and pytest only; Python 3.7+ and pytest 5+ syntax (it runs in the project's
image, whatever that has). It never imports proofgate. Nothing here changes what a
test does or how pytest reports it.
"""

import hashlib
import json
import os
import sys
import types

import pytest

MARKER = "##[proofgate-witness] "
VERSION = 1
_WATCHED = ("_pytest", "pytest", "pluggy", "proofgate_witness")
_MAX_LISTED = 50


def _watched(module_name):
    name = str(module_name or "")
    return any(name == w or name.startswith(w + ".") for w in _WATCHED)


_METHODS = (types.FunctionType, classmethod, staticmethod, property)


def _snapshot():
    """Every function and class of the watched modules loaded now, and every method of
    those classes, by identity."""
    seen = {}
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or not _watched(name):
            continue
        for attr, value in list(vars(module).items()):
            if not _watched(getattr(value, "__module__", "")):
                continue
            if isinstance(value, types.FunctionType):
                seen[(name, attr)] = value
            elif isinstance(value, type):
                seen[(name, attr)] = value
                owner = f"{value.__module__}.{value.__qualname__}"
                for method, impl in list(vars(value).items()):
                    if isinstance(impl, _METHODS):
                        seen[(owner, method)] = impl
    return seen


def _blob_id(path):
    """The git blob id of a file's content (what proofgate compares with the tree)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id


class Witness:
    def __init__(self, config):
        self.config = config
        try:  # standard output as pytest started (capture is suspended here)
            self.fd = os.dup(1)
        except OSError:
            self.fd = None
        self.snapshot = _snapshot()
        pm = config.pluginmanager
        self.hookexec = getattr(pm, "_inner_hookexec", None)
        self.collecting = False
        self.tampered = []
        self.raised = {}  # nodeid -> the call raised (not a skip)
        self.ran = set()
        self.items = []
        self.conftests = {}
        self.late_plugins = []
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        self.reported = {}  # (nodeid, when) -> the outcome makereport returned
        self.emitted = False

    def _flag(self, kind, detail):
        if len(self.tampered) < _MAX_LISTED:
            self.tampered.append({"kind": kind, "detail": str(detail)[:300]})

    # --- hooks ------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_plugin_registered(self, plugin, manager):
        if not self.collecting:
            return
        path = getattr(plugin, "__file__", None)
        if isinstance(plugin, types.ModuleType) and path:
            if os.path.basename(path) in ("conftest.py", "conftest.pyc"):
                self.conftests[os.path.abspath(path)] = _blob_id(path)
                return
        self._flag("plugin-registered", getattr(plugin, "__name__", type(plugin).__name__))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        self.collecting = True
        # conftests loaded before collection (initial ones) count the same
        for plugin in list(self.config.pluginmanager.get_plugins()):
            path = getattr(plugin, "__file__", None)
            if isinstance(plugin, types.ModuleType) and path:
                if os.path.basename(path) == "conftest.py":
                    self.conftests[os.path.abspath(path)] = _blob_id(path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.items = [item.nodeid for item in items]

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        excinfo = outcome.excinfo
        if excinfo is not None and not _is_skip(excinfo[1]):
            self.raised[item.nodeid] = excinfo[0].__name__

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        self.ran.add(item.nodeid)
        self.reported[(item.nodeid, call.when)] = report.outcome
        if call.when == "call" and item.nodeid in self.raised:
            if report.passed and not hasattr(report, "wasxfail"):
                self._flag(
                    "outcome-rewritten",
                    f"{item.nodeid} raised {self.raised[item.nodeid]}, its report says passed",
                )

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        made = self.reported.get((report.nodeid, report.when))
        if made is not None and made != report.outcome:
            self._flag(
                "outcome-rewritten",
                f"{report.nodeid} {report.when}: made {made}, reported {report.outcome}",
            )
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                self.counts["passed"] += 1
            elif report.skipped:
                self.counts["skipped"] += 1
            elif report.when == "call":
                self.counts["failed"] += 1
            else:
                self.counts["error"] += 1
        elif report.when == "teardown" and report.failed:
            self.counts["error"] += 1

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        yield  # the JUnit report is written by now (junitxml's own sessionfinish)
        self._emit(session)

    # --- the line -----------------------------------------------------------------------

    def _checks(self, session):
        now = _snapshot()
        old = self.snapshot.items()
        changed = sorted({"{}.{}".format(*k) for k, v in old if now.get(k) is not v})
        for name in changed:
            self._flag("pytest-patched", name)
        pm = self.config.pluginmanager
        if getattr(pm, "_inner_hookexec", None) is not self.hookexec:
            self._flag("pytest-patched", "the plugin manager's hook caller")
        status = int(getattr(session, "exitstatus", 0) or 0)
        if status == 0 and not getattr(self.config, "workerinput", None):
            if not getattr(self.config.option, "collectonly", False):
                missing = [n for n in self.items if n not in self.ran]
                if missing and not _xdist(self.config):
                    self._flag("tests-unaccounted", ", ".join(missing[:5]))

    def _emit(self, session):
        if self.emitted:
            return
        self.emitted = True
        self._checks(session)
        xmlpath = getattr(self.config.option, "xmlpath", None)
        junit = None
        if xmlpath:
            path = os.path.abspath(os.path.normpath(os.path.expanduser(xmlpath)))
            digest = None
            try:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                pass
            junit = {"path": path, "sha256": digest}
        line = {
            "v": VERSION,
            "pid": os.getpid(),
            "exitstatus": int(getattr(session, "exitstatus", 0) or 0),
            "junit": junit,
            "counts": self.counts,
            "conftests": [[p, b] for p, b in sorted(self.conftests.items())],
            "tampered": self.tampered,
            "xdist": _xdist(self.config),
        }
        data = ("\n" + MARKER + json.dumps(line, sort_keys=True) + "\n").encode()
        if self.fd is None:
            return
        try:
            os.write(self.fd, data)
        except OSError:
            pass


def _is_skip(exc):
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"Skipped", "XFailed", "SkipTest"})


def _xdist(config):
    option = config.option
    return bool(getattr(option, "numprocesses", None)) or getattr(option, "dist", "no") not in (
        "no",
        None,
    )


def pytest_configure(config):
    if getattr(config, "workerinput", None) is not None:
        return  # an xdist worker: its standard output is the controller's channel
    config.pluginmanager.register(Witness(config), "proofgate-witness")


# --- SPEC §3.3: a shard runs only its share of the tests ----------------------------------
#
# proofgate writes `proofgate_shard.json` beside this file (its read-only volume) when the
# check is split over shards: {"index": I, "count": N, "assigned": {key: shard},
# "by_unit": [path...]}, paths relative to /workspace; a key is a file, or `file::Name` (a
# top-level test class or function) for a file in `by_unit`. Read at import, before any
# conftest. Items of other shards are deselected, so the configured test command is
# unchanged; a key the split does not list goes by its SHA-256 (gate.model.hashed_shard).


def _load_shard():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proofgate_shard.json")
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
        by_unit = frozenset(str(p) for p in data.get("by_unit") or ())
        return int(data["index"]), int(data["count"]), dict(data["assigned"]), by_unit
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


_SHARD = _load_shard()


def _shard_of(path, count, assigned):
    """`path`: a file, or `file::Name` for a unit of a file the split divides by unit."""
    if path in assigned:
        return int(assigned[path])
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def _unit(item):
    """The item's top-level test class or function in its module (no parametrize id)."""
    chain = item.listchain()
    for i, node in enumerate(chain):
        if isinstance(node, pytest.Module) and i + 1 < len(chain):
            return chain[i + 1].name.split("[", 1)[0]
    return None


def _tree_path(item):
    raw = str(getattr(item, "path", None) or getattr(item, "fspath", "") or "")
    path = os.path.normpath(raw) if raw else item.nodeid.split("::", 1)[0]
    prefix = "/workspace/"
    return path[len(prefix) :] if path.startswith(prefix) else path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    if _SHARD is None:
        return
    index, count, assigned, by_unit = _SHARD
    mine, others = [], []
    for item in items:
        path = _tree_path(item)
        unit = _unit(item) if path in by_unit else None
        shard = _shard_of(path if unit is None else path + "::" + unit, count, assigned)
        (mine if shard == index else others).append(item)
    if others:
        items[:] = mine
        config.hook.pytest_deselected(items=others)
