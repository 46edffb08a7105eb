"""Levers: knobs of the node that quietcore reads and, at run time, changes
through the journal so that every change is undone."""
