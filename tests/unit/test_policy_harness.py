"""`harness-tampering`: non-test code that introspects or patches its harness (issue 27)."""

from __future__ import annotations

import pytest

from gate.model import Decision, PolicySpec
from gate.policy import evaluate
from gate.policy.harness import harness_sites, new_harness_sites
from tests.unit.test_policy import chg

# (id, source, a kind the rule must report)
TAMPERING = [
    ("unittest-assert-noop", "import unittest\nunittest.TestCase.assertEqual = lambda *a: None\n",
     "replaces unittest.TestCase.assertEqual"),
    ("aliased-class", "import unittest as u\nTC = u.TestCase\nTC.assertEqual = print\n",
     "replaces unittest.TestCase.assertEqual"),
    ("setattr-concatenated", "from unittest import TestCase as T\n"
     "setattr(T, 'assert' + 'Equal', print)\n", "replaces unittest.TestCase.assertEqual"),
    ("runtest-patched", "import _pytest.python\n_pytest.python.Function.runtest = None\n",
     "replaces _pytest.python.Function.runtest"),
    ("dunder-import", "m = __import__('_py' + 'test.python', fromlist=['x'])\n",
     "uses _pytest.python"),
    ("import-module", "import importlib\nm = importlib.import_module('plug' 'gy')\n"
     "m.PluginManager._hookexec = 1\n", "replaces pluggy.PluginManager._hookexec"),
    ("settrace", "import sys\nsys.settrace(lambda *a: None)\n", "uses sys.settrace"),
    ("getattr-settrace", "import sys\ngetattr(sys, f'set{\"\"}' 'trace')(None)\n",
     "uses sys.settrace"),
    ("threading-settrace", "import threading as t\nt.settrace(print)\n",
     "uses threading.settrace"),
    ("frame-f-trace", "import sys\nsys._getframe(1).f_trace = print\n", "replaces .f_trace"),
    ("meta-path", "import sys\nsys.meta_path.insert(0, object())\n", "uses sys.meta_path"),
    ("path-hooks", "from sys import path_hooks\npath_hooks.append(len)\n", "uses sys.path_hooks"),
    ("gc-objects", "import gc\nfor o in gc.get_objects():\n    pass\n", "uses gc.get_objects"),
    ("gc-referrers", "import gc as g\ng.get_referrers(1)\n", "uses gc.get_referrers"),
    ("pytest-in-modules", "import sys\nok = 'pytest' in sys.modules\n",
     "asks whether a test harness runs it (sys.modules)"),
    ("modules-get", "import sys\nok = sys.modules.get('_pytest')\n",
     "asks whether a test harness runs it (sys.modules)"),
    ("argv", "import sys\nif 'pytest' in sys.argv[0]:\n    pass\n",
     "asks whether a test harness runs it (sys.argv)"),
    ("pytest-env", "import os\nif os.environ.get('PYTEST_CURRENT_TEST'):\n    pass\n",
     "reads PYTEST_CURRENT_TEST"),
    ("atexit-os-exit", "import atexit, os\natexit.register(lambda: os._exit(0))\n",
     "uses os._exit in a module that registers atexit hooks"),
    ("witness-method", "import proofgate_witness as w\nw.Witness._emit = None\n",
     "replaces proofgate_witness.Witness._emit"),
    ("os-write-wrapped", "import os\n_w = os.write\nos.write = lambda fd, b: _w(fd, b)\n",
     "replaces os.write"),
    ("mock-patch-internals", "from unittest import mock\n"
     "mock.patch('_pytest.runner.call_and_report').start()\n",
     "replaces _pytest.runner.call_and_report"),
    ("patch-object", "import unittest\nfrom unittest import mock\n"
     "mock.patch.object(unittest.TestCase, 'assertTrue').start()\n",
     "replaces unittest.TestCase.assertTrue"),
    ("code-swapped", "def f():\n    pass\nf.__code__ = (lambda: 1).__code__\n",
     "replaces .__code__"),
    ("globals-of-a-hook", "import pytest\nf = pytest.main\nf.__globals__['_write'] = print\n",
     "replaces .__globals__"),
    ("vars-subscript", "import unittest\nvars(unittest.TestCase)['run'] = None\n",
     "replaces unittest.TestCase.run"),
    ("private-unittest", "import unittest\nunittest.TestCase._callTestMethod\n",
     "uses unittest.TestCase._callTestMethod"),
]  # fmt: skip

HONEST = [
    ("unittest-mock", "from unittest import mock\nm = mock.MagicMock()\n"
     "with mock.patch('mypkg.clock.now'):\n    pass\n"),
    ("pytest-fixture", "import pytest\n\n\n@pytest.fixture\ndef f():\n"
     "    '''Unlike sys.settrace, gc.get_objects or f_trace.'''\n    return 1\n"),
    ("stdout-swapped", "import sys, io\nsys.stdout = io.StringIO()\n"),
    ("testcase-helper", "import unittest\n\n\nclass Base(unittest.TestCase):\n"
     "    def assertClose(self, a, b):\n        self.assertEqual(round(a), round(b))\n"),
    ("environ", "import os\nos.environ['MYPKG_DEBUG'] = '1'\n"),
    ("getframe", "import sys\nname = sys._getframe(1).f_code.co_name\n"),
    ("os-exit-in-child", "import os\nif os.fork() == 0:\n    os._exit(0)\n"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "kind"), [c[1:] for c in TAMPERING], ids=[c[0] for c in TAMPERING]
)
def test_tampering_is_a_site(source: str, kind: str) -> None:
    sites = harness_sites(source.encode())
    assert sites is not None
    assert kind in {s.kind for s in sites}


@pytest.mark.parametrize("source", [c[1] for c in HONEST], ids=[c[0] for c in HONEST])
def test_honest_code_is_no_site(source: str) -> None:
    assert harness_sites(source.encode()) == []


def test_only_added_lines_and_only_more_than_the_base() -> None:
    old = b"import sys\n\n\ndef debug():\n    sys.settrace(print)\n"
    new = b"import sys\n\n\ndef debug():\n    sys.settrace(print)  # reformatted\n"
    assert new_harness_sites(new, frozenset({5}), old) == []
    twice = new + b"\n\ndef again():\n    sys.settrace(print)\n"
    got = new_harness_sites(twice, frozenset({7, 8, 9}), old)
    assert [(s.kind, s.line) for s in got or []] == [("uses sys.settrace", 9)]
    # a new file: every site on its lines
    got = new_harness_sites(new, frozenset(range(1, 6)), None)
    assert [s.kind for s in got or []] == ["uses sys.settrace"]


PATCHED = "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"


def _judge(path: str, source: str, base: str | None = None) -> tuple[Decision, list[str]]:
    lines = source.splitlines()
    c = chg(path, "M" if base is not None else "A", added=lines)
    if base is not None:
        c = chg(path, "M", deleted=base.splitlines(), added=lines)
    r = evaluate(
        [c.entry],
        c.patch,
        PolicySpec(),
        tree_files={path.encode(): source.encode()},
        base_files={path.encode(): base.encode()} if base is not None else {},
    )
    return r.decision, [f.message for f in r.findings if f.rule == "harness-tampering"]


def test_package_init_patching_unittest_is_held() -> None:
    decision, messages = _judge("src/calc/__init__.py", PATCHED)
    assert decision is Decision.HOLD
    assert messages == ["non-test code replaces unittest.TestCase.assertEqual"]


def test_test_files_are_not_judged_by_this_rule() -> None:
    _, messages = _judge("tests/test_calc.py", PATCHED)
    assert messages == []
    _, messages = _judge("conftest.py", PATCHED)
    assert messages == []


def test_a_file_that_already_did_it_is_not_new() -> None:
    _, messages = _judge("src/plug/core.py", PATCHED + "x = 1\n", base=PATCHED)
    assert messages == []


def test_without_the_tree_the_added_lines_are_read() -> None:
    c = chg("calc.py", "A", added=["import sys", "sys.settrace(print)"])
    r = evaluate([c.entry], c.patch, PolicySpec())
    assert [f.message for f in r.findings if f.rule == "harness-tampering"] == [
        "non-test code mentions its test harness (settrace)"
    ]
