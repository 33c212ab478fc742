# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""The witness's share of a sharded proof (SPEC §3.3; a part of the witness package,
see `plugin.py`). Imports nothing of proofgate."""

import fnmatch
import hashlib
import json
import os

import pytest

_getattr = getattr
_int = int
_loads = json.loads
_WORKSPACE = "/workspace/"

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
            data = _loads(f.read().decode("utf-8"))
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


# An empty share (SPEC §3.3): every test pytest would collect is another shard's (their
# files are not collected here, their other tests deselected: a file moved or renamed
# into another shard's keys, more shards than files, zero recorded durations). pytest
# would end with status 5 (no tests collected), which the one-job proof never sees; the
# session ends 0 instead, with a JUnit report of no test, and the aggregate judges the
# union. A session that collected nothing at all keeps its 5: the one-job proof of the
# same tree has it too.
_EMPTY_SHARE = []  # holds True once this shard's share turned out empty
_IGNORED = []  # files of the tree whose every test is another shard's: never collected


def _another_shards_file(path, config):
    """True for a test module of the tree (a file of the split, or one pytest's
    `python_files` select) whose every test is another shard's: pytest does not collect
    it at all (its tests would only be deselected), so a shard pays for collecting its own
    share. Never a directory, a package's `__init__.py`, a `conftest.py` (what they set
    up is every shard's), another module (a doctest's goes by deselection), nor a file the
    split divides by unit. None otherwise, so pytest's own rules (`--ignore`,
    `collect_ignore`) decide."""
    if _SHARD is None:
        return None
    index, count, assigned, by_unit = _SHARD
    raw = os.path.normpath(str(path))
    if not raw.startswith(_WORKSPACE) or not raw.endswith(".py") or not os.path.isfile(raw):
        return None
    rel = raw[len(_WORKSPACE) :]
    name = os.path.basename(rel)
    if name in ("__init__.py", "conftest.py") or rel in by_unit:
        return None
    if rel not in assigned:
        try:
            patterns = [str(p) for p in config.getini("python_files") or ()]
        except (ValueError, TypeError):
            return None
        # as pytest matches them (and proofgate's split, gate/proof/shard.py `collected`):
        # a pattern without `/` the file's name, one with `/` the end of its path
        if not any(
            fnmatch.fnmatchcase(name, p) if "/" not in p else fnmatch.fnmatchcase(raw, "*/" + p)
            for p in patterns
        ):
            return None
    if _shard_of(rel, count, assigned) == index:
        return None
    _IGNORED.append(rel)
    return True


if int(pytest.__version__.split(".", 1)[0]) >= 7:

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(collection_path, config):
        return _another_shards_file(collection_path, config)

else:

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(path, config):
        return _another_shards_file(path, config)


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
    if (others or _IGNORED) and not mine:
        _EMPTY_SHARE.append(True)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if _SHARD is None:  # a one-job run's "no tests collected" is never rewritten
        return
    if _EMPTY_SHARE and _int(_getattr(session, "exitstatus", 0) or 0) == 5:
        session.exitstatus = 0
