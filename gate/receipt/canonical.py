"""The one serialization that gets hashed and signed, and the strict parser for reading
signed JSON back (no duplicate keys, no NaN, UTF-8 only)."""

from __future__ import annotations

import json

from gate.receipt.errors import ReceiptError
from gate.util.canonical import canonical_json

__all__ = ["canonical_json", "parse_json"]


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    d: dict[str, object] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_json(data: bytes, *, what: str) -> object:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity; a ReceiptError otherwise.

    Raises:
        ReceiptError: `data` is not such JSON.
    """
    try:
        text = data.decode("utf-8")
        return json.loads(
            text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except UnicodeDecodeError as e:
        raise ReceiptError(f"{what} is not UTF-8 text") from e
    except ValueError as e:  # JSONDecodeError, duplicate keys, too many integer digits
        raise ReceiptError(f"{what} is not valid JSON: {str(e).splitlines()[0]}") from e
    except RecursionError as e:
        raise ReceiptError(f"{what} is nested too deeply") from e
