"""Rule compute_layer_outputs: ALP-KD Fig. 4's numbers for one task's students (names in `models`): their layers'
outputs beside the teacher's on the first two principal components, and each example's cosine distance to the
teacher's layer, as JSON and CSV (rule figure_layer_outputs draws the JSON)."""

import json
from pathlib import Path

from kdflow.analysis.layer_outputs import layer_outputs, layer_outputs_table
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.selection import selected_run_dir

with rule_job(snakemake):
    device = select_device(snakemake.params.device)
    params = snakemake.params
    spec = params.spec
    runs = {name: selected_run_dir(model["reference"], snakemake.input[f"{name}_selection"], model["runs_dir"])
            for name, model in params.models.items()}
    data = layer_outputs(runs, Path(snakemake.input.teacher).parent, snakemake.input.heads, snakemake.input.data,
                         spec["layers"], spec["examples"], "dev", spec["seed"], device,
                         resolve_precision(params.precision, device))
    Path(snakemake.output.json).write_text(json.dumps(data, indent=1) + "\n")
    layer_outputs_table(data).to_csv(snakemake.output.csv, index=False)
