"""Rule measure_inference: a named model's non-embedding parameters and CPU inference time (thesis Table 5.2)."""

import json
from pathlib import Path

from kdflow.analysis.inference import measure
from kdflow.core.data import TaskData
from kdflow.core.runtime import rule_job
from kdflow.distillation.named_models import load_model
from kdflow.training.batching import batches, tokenize

with rule_job(snakemake):
    params = snakemake.params.model
    task = TaskData.load(snakemake.input.data)
    files = {"teacher_model": snakemake.input.teacher_model, "selection": snakemake.input.get("selection"),
             "runs_dir": params.get("runs_dir")}
    model = load_model(params["reference"], files, task.num_labels, params.get("pretrained"))
    dev = tokenize(task.split("dev"), model.tokenizer, 128, labelled=False)  # the thesis's 128-token limit
    inputs = list(batches(dev, snakemake.params.batch_size, task.meta["regression"]))
    result = measure(model.module, model.logits, inputs, threads=snakemake.threads)
    Path(snakemake.output[0]).write_text(json.dumps({**result, "device": "cpu", "task": task.meta["task"]}, indent=1))
