"""Small utilities with no knowledge of the proof."""
