"""Bytes to columnar events: the XSpace decoder (the hot path) and the older
memory_profile files."""
