"""`gate.util.lazyre.lazy`: a pattern compiled at first use behaves as `re.compile`'s."""

from __future__ import annotations

import re

import pytest

from gate.util.lazyre import lazy


def test_a_lazy_pattern_matches_as_the_compiled_one() -> None:
    text = b"ghp_" + b"a" * 36 + b" and AKIA" + b"B" * 16
    for source in (rb"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b", rb"(AKIA)([0-9A-Z]{16})"):
        eager, late = re.compile(source), lazy(source)
        assert late.search(text).group(0) == eager.search(text).group(0)  # type: ignore[union-attr]
        assert late.findall(text) == eager.findall(text)
        assert [m.span() for m in late.finditer(text)] == [m.span() for m in eager.finditer(text)]
        assert late.sub(b"x", text) == eager.sub(b"x", text)
        assert late.pattern == source
    assert lazy(r"^a", re.M).findall("a\nb\na") == ["a", "a"]


def test_nothing_is_compiled_before_the_first_use() -> None:
    broken = lazy("(unclosed")  # re.compile would raise here
    with pytest.raises(re.error):
        broken.match("x")
