"""The proof pipeline (SPEC §1-§3): prove() and the stages it sequences."""
