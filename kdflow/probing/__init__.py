"""Stage 7, SentEval probing (thesis §3.3, §6.1): the tasks' data, per-layer encodings and the probe."""
