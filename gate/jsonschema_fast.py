"""jsonschema, imported without the optional format checkers it loads eagerly.

Where `rfc3987-syntax` is installed (it comes with some tools' extras), jsonschema's
import compiles about forty grammars for it: a second of every `proofgate` run, most of
the fixed cost of a proof. proofgate's schemas assert no `format`, so nothing is lost,
and a later import of that package elsewhere still works.
"""

from __future__ import annotations

import sys

if "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules:
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an ImportError
    try:
        import jsonschema  # noqa: F401
    finally:
        del sys.modules["rfc3987_syntax"]

from jsonschema import Draft202012Validator  # noqa: E402
from jsonschema.exceptions import ValidationError  # noqa: E402

__all__ = ["Draft202012Validator", "ValidationError"]
