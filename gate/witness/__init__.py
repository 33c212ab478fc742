"""The witness: the pytest plugin copied into containers (`plugin`), its host side
(`host`: the volume, the report lines) and its judgement (`judge`)."""
