"""quietcore in the fleet: a node's reference noise, the health check's
verdict against it, Slurm's drain and resume, and the metrics node_exporter's
textfile collector publishes. The engines are the site's own (Slurm,
node_exporter, Prometheus, systemd); this package only talks to them."""
