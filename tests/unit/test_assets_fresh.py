"""STYLE §7: the committed test assets are exactly what `make assets` generates today."""

from __future__ import annotations

import pytest

from tests.assets import make


def test_committed_assets_match_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    generated: dict[str, bytes] = {}
    monkeypatch.setattr(make, "write", lambda rel, data: generated.__setitem__(rel, data))
    make.main()
    assert generated, "the generator wrote nothing"
    stale = [rel for rel, data in generated.items() if (make.ASSETS / rel).read_bytes() != data]
    assert not stale, f"stale test assets (run `make assets`): {stale}"
