"""`quietcore watch`: what the OS took from each job's CPUs, charged to the job (issue 60)."""
