"""jsonschema, imported without the optional format checkers it loads eagerly.

jsonschema's import tries every optional package that checks a `format` (URIs, dates,
durations, colours, JSON pointers, ...) and imports each one it finds: where
`rfc3987-syntax` is installed it compiles about forty grammars (a second of every
`proofgate` run), and the others (`isoduration` with `arrow`, `rfc3986-validator`,
`webcolors`, ...) cost about 0.2 s more. proofgate's schemas assert no `format`, so
nothing is lost; the packages are hidden only during this import, so a later import of
any of them elsewhere still works.
"""

from __future__ import annotations

import sys

# The optional imports of jsonschema/_format.py (each behind `suppress(ImportError)`).
_FORMAT_PACKAGES = (
    "fqdn",
    "idna",
    "isoduration",
    "jsonpointer",
    "rfc3339_validator",
    "rfc3986_validator",
    "rfc3987",
    "rfc3987_syntax",
    "uri_template",
    "webcolors",
)

if "jsonschema" not in sys.modules:
    hidden = [name for name in _FORMAT_PACKAGES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError
    try:
        import jsonschema  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]

from jsonschema import Draft202012Validator  # noqa: E402
from jsonschema.exceptions import ValidationError  # noqa: E402

__all__ = ["Draft202012Validator", "ValidationError"]
