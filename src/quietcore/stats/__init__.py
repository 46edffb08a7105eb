"""Statistics as small pure functions that raise ValueError on bad input."""
