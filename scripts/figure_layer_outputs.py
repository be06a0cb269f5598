"""Rule figure_layer_outputs: ALP-KD Fig. 4 as one figure, drawn from the layer outputs rule compute_layer_outputs
wrote (students' and teacher's principal components, students' cosine distances to the teacher's layer)."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.alp_kd import layer_outputs_figure

with rule_job(snakemake):
    layer_outputs_figure(json.loads(Path(snakemake.input[0]).read_text()), snakemake.output[0])
