"""The Python side of the native core: build arguments, run, parse envelopes."""
