"""Rule encode_probing_tasks: every layer's encodings of every probing task's sentences by one model."""

import json
import logging

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.named_models import load_model
from kdflow.probing.encodings import write_encodings
from kdflow.probing.senteval import read_probing_file

with rule_job(snakemake):
    params, settings = snakemake.params.model, snakemake.params.settings
    files = {key: snakemake.input.get(key) for key in ("data", "teacher_model", "selection", "transfer")}
    num_labels = TaskData.load(snakemake.input.data).num_labels if "data" in snakemake.input.keys() else 2
    model = load_model(params["reference"], {**files, "runs_dir": params.get("runs_dir")}, num_labels,
                       params.get("pretrained"), params.get("embeddings"))
    device = select_device(snakemake.params.device)
    precision = resolve_precision(snakemake.params.precision, device)
    for probing_file, output in zip(snakemake.input.probing, snakemake.output):
        summary = write_encodings(model, read_probing_file(probing_file), output, settings["pooling"],
                                  settings["encode_batch_size"], settings["max_seq_length"], device, precision)
        logging.getLogger("kdflow").info("%s: %s", output, json.dumps(summary))
