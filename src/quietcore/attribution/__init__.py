"""Where the lost time went: counters read around a run, and tracers."""
