"""`quietcore tune`: plan, apply, verify and revert the shielding of CPUs."""
