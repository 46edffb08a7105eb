"""Typed runs: what a probe returns, decoded once, carried from the
measurement to the store, the terminal, the report and the exports."""
