"""The run-time levers' names, in the order they are applied (the reasons
are in experiments.levers). Kept apart from the registry, which imports every
lever, so that the journal can lock them all without importing them."""

NAMES = ("thp", "thp_defrag", "governor", "irq_affinity", "shield", "preempt")
