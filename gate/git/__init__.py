"""Git adapter (pygit2): resolve, capture the patch, re-apply privately, stream trees."""
