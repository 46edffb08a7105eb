"""quietcore simulate: what a node's noise costs a synchronised job at scale."""
