"""Experiments: cells of factor values, each run several times in a seeded
interleaved order after warm-ups, levers set through the journal, every run
stored, and the cells compared with real statistics."""
