"""Rule measure_inference: a named model's non-embedding parameters and CPU inference time (thesis Table 5.2), in
PyTorch and, on the same batches and threads, in ONNX Runtime (issue 55; None with the reason where it cannot run)."""

import json
import logging
from pathlib import Path

import torch

from kdflow.analysis.inference import measure
from kdflow.core.data import TaskData
from kdflow.core.job_setup import rule_job
from kdflow.distillation.named_models import load_model
from kdflow.export.onnx_inference import ONNXRUNTIME_MS, measure_onnxruntime
from kdflow.training.batching import batches, tokenize

with rule_job(snakemake):
    params = snakemake.params.model
    task = TaskData.load(snakemake.input.data)
    files = {"teacher_model": snakemake.input.teacher_model, "selection": snakemake.input.get("selection"),
             "runs_dir": params.get("runs_dir")}
    model = load_model(params["reference"], files, task.num_labels, params.get("pretrained"))
    dev = tokenize(task.split("dev"), model.tokenizer, 128, labelled=False)  # the thesis's 128-token limit
    inputs = list(batches(dev, snakemake.params.batch_size, task.meta["regression"]))
    logits = []
    result = measure(model.module, model.logits, inputs, threads=snakemake.threads, outputs=logits)
    result |= measure_onnxruntime(model.module, model.tokenizer, inputs, torch.cat(logits), result["threads"])
    if result[ONNXRUNTIME_MS] is None:
        logging.getLogger("kdflow").warning("no ONNX Runtime time: %s", result["onnxruntime_reason"])
    Path(snakemake.output[0]).write_text(json.dumps({**result, "device": "cpu", "task": task.meta["task"]}, indent=1))
