"""The semantic skip reader (`gate.policy.skips`) on spellings an attacker's review found:
each skips or xfails an existing test, or ends the session, without a decorator or a
direct call of a skipper on the test itself. Honest neighbours must stay unflagged."""

from __future__ import annotations

import pytest

from gate.policy.skips import new_skips

OLD = b"import pytest\n\n\ndef test_a():\n    assert f()\n"


def _body(*lines: str, head: str = "import pytest\n\n\n") -> bytes:
    return (head + "def test_a(request):\n" + "".join(f"    {ln}\n" for ln in lines)).encode()


@pytest.mark.parametrize(
    ("new", "kind"),
    [
        (_body("request.applymarker(pytest.mark.xfail)", "assert f()"), "pytest.mark.xfail"),
        (_body("request.node.add_marker(pytest.mark.skip)", "assert f()"), "pytest.mark.skip"),
        (_body("s = pytest.skip", "s('later')"), "pytest.skip"),
        (_body("pytest.exit('done', returncode=0)", "assert f()"), "pytest.exit"),
        (
            b"import pytest\n\n\ndef _later():\n    pytest.skip('x')\n\n\n"
            b"def test_a():\n    _later()\n    assert f()\n",
            "pytest.skip",
        ),
        (
            b"import pytest\n\n\n@pytest.fixture(autouse=True)\ndef _off():\n"
            b"    pytest.skip('x')\n\n\ndef test_a():\n    assert f()\n",
            "pytest.skip",
        ),
    ],
    ids=["applymarker", "add-marker", "bound-locally", "session-exit", "helper", "autouse"],
)
def test_spelling_is_a_new_skip(new: bytes, kind: str) -> None:
    sites = new_skips(OLD, new)
    assert sites is not None
    assert kind in {s.kind for s in sites}


@pytest.mark.parametrize(
    "new",
    [
        OLD + b"\n\ndef test_new():\n    pytest.skip('not yet')\n",
        OLD + b"\n\nclass TestNew:\n    def _h(self):\n        pytest.skip('x')\n",
        OLD + b"\n\n@pytest.mark.parametrize('x', [1])\ndef test_new(x):\n    assert x\n",
    ],
    ids=["new-test", "helper-of-a-new-test-class", "parametrize"],
)
def test_skips_of_new_tests_are_not_new_skips(new: bytes) -> None:
    assert new_skips(OLD, new) == []
