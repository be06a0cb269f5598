"""Rule compute_attention_maps: one student layer's attention over the teacher's layers for each of a figure's
students (names in `models`), on the same random dev examples, as JSON (Universal-KD Fig. 3, ALP-KD Fig. 3; rule
attention_maps draws it)."""

import json
from pathlib import Path

from kdflow.analysis.attention_maps import attention_weights
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.selection import selected_run_dir

with rule_job(snakemake):
    params = snakemake.params
    spec = params.spec
    device = select_device(params.device)
    precision = resolve_precision(params.precision, device)
    records = []
    for name, model in params.models.items():
        run_dir = selected_run_dir(model["reference"], snakemake.input[f"{name}_selection"], model["runs_dir"])
        record = attention_weights(run_dir, Path(snakemake.input.teacher).parent, snakemake.input.heads,
                                   snakemake.input.data, spec["examples"], spec["student_layer"], "dev", spec["seed"],
                                   device, precision)
        records.append({"model": name, **record})
    Path(snakemake.output[0]).write_text(json.dumps(records, indent=1) + "\n")
