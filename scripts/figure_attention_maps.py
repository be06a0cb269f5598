"""Rule figure_attention_maps: Universal-KD Fig. 3 or ALP-KD Fig. 3 as one figure, drawn from the attention records
rule compute_attention_maps wrote (one per student of the figure)."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.universal_kd import attention_figure

with rule_job(snakemake):
    spec = snakemake.params.spec
    records = json.loads(Path(snakemake.input[0]).read_text())
    title = f"Attention over the teacher's layers ({spec['task']}, {snakemake.wildcards.figure})"
    attention_figure(records, snakemake.output[0], title, spec["gold_distance"])
