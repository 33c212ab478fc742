"""The OpenAPI description the stand-in validates against, with the upstream quirks fixed.

`openapi-subset.json` is GitHub's own description of the 14 operations we call, copied
unchanged (see OPENAPI-README.md). Its README lists three upstream quirks; they are handled
here, in the harness, and nowhere else:

1. `checks/create` carries `discriminator: {propertyName: status}` without a mapping next
   to a plain `oneOf`; a strict validator tries to resolve `#/components/schemas/<status>`
   and fails on valid bodies. We drop that one `discriminator`; the `oneOf` still says that
   a `completed` status needs a `conclusion`.
2. OAS 3.0 `nullable: true` next to an `enum` that does not list null (e.g.
   `check-run.conclusion`): GitHub returns null for runs in progress. Where a schema is
   nullable and has an enum, null is added to the enum, which is what `nullable` means.
3. Several official examples do not validate against their own schemas. The stand-in
   builds its responses from its own state and never asserts that an example validates.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from openapi_core import OpenAPI

SPEC_FILE = Path(__file__).with_name("openapi-subset.json")

JsonObj = dict[str, object]


def _raw() -> JsonObj:
    data = json.loads(SPEC_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _allow_null_in_nullable_enums(node: object) -> int:
    """Quirk 2. Returns how many schemas were touched (so a test can pin it)."""
    touched = 0
    if isinstance(node, dict):
        enum = node.get("enum")
        if node.get("nullable") is True and isinstance(enum, list) and None not in enum:
            enum.append(None)
            touched += 1
        for value in node.values():
            touched += _allow_null_in_nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            touched += _allow_null_in_nullable_enums(value)
    return touched


def _drop_create_discriminator(doc: JsonObj) -> None:
    """Quirk 1, on exactly one schema."""
    paths = doc["paths"]
    assert isinstance(paths, dict)
    op = paths["/repos/{owner}/{repo}/check-runs"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert schema["discriminator"] == {"propertyName": "status"}, "upstream changed: review"
    del schema["discriminator"]


def harness_document() -> JsonObj:
    """The description with the two schema quirks fixed (a fresh copy)."""
    doc = copy.deepcopy(_raw())
    _drop_create_discriminator(doc)
    _allow_null_in_nullable_enums(doc)
    return doc


@functools.cache
def harness_document_cached() -> JsonObj:
    return harness_document()


@functools.cache
def openapi() -> OpenAPI:
    return OpenAPI.from_dict(harness_document_cached())


def schema(name: str) -> JsonObj:
    components = harness_document_cached()["components"]
    assert isinstance(components, dict)
    found = components["schemas"][name]
    assert isinstance(found, dict)
    return found


def example(name: str) -> object:
    """A deep copy of an official example's value (a starting point only: quirk 3)."""
    components = harness_document_cached()["components"]
    assert isinstance(components, dict)
    value: object = components["examples"][name]["value"]
    return copy.deepcopy(value)


def example_object(name: str) -> JsonObj:
    value = example(name)
    assert isinstance(value, dict)
    return value
