"""The attack corpus: attacker pull requests as data, and honest changes that must pass."""
