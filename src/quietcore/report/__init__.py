"""Presenting stored results: text tables, exports. Never measures."""
