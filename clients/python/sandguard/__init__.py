"""sandguard's Python client: the standard library only."""
