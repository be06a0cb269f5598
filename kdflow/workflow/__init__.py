"""Stage 1, the workflow side: config resolution into job settings and code fingerprints. Torch-free: the Snakefile
imports it while planning."""
