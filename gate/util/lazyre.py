"""Regular expressions compiled at their first use, not at import.

A module-level `re.compile` runs in every process that imports the module, whether or
not anything is matched: the policy's rules compile about sixty patterns, most of which
only a patch touching test files, manifests or workflows ever uses. `lazy(pattern)`
compiles on the first attribute access and then keeps the compiled pattern's methods
on the object itself, so later calls cost what they cost on a `re.Pattern`.
"""

from __future__ import annotations

import re
from typing import AnyStr, cast

__all__ = ["lazy"]

_DELEGATED = (
    "match",
    "search",
    "fullmatch",
    "finditer",
    "findall",
    "sub",
    "subn",
    "split",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _LazyPattern:
    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._source = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> object:
        # Only reached while the name is not yet an attribute: compile once, then the
        # methods are found on the instance without this hook.
        compiled = re.compile(self._source, self._flags)
        for attr in _DELEGATED:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(pattern, flags)`, compiled when first used."""
    return cast("re.Pattern[AnyStr]", _LazyPattern(pattern, flags))
