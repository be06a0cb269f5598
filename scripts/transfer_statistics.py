"""Rule transfer_statistics: generated vs real sentences of an augmented transfer set, for the report."""

import json
from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.intermediates import read_json
from kdflow.core.job_setup import rule_job
from kdflow.core.tensor_files import load_tensors
from kdflow.transfer.augmentation import statistics_document, transfer_statistics
from kdflow.transfer.frames import transfer_frame

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    stats = transfer_statistics(
        task,
        transfer_frame(task, snakemake.input.transfer),
        load_tensors(snakemake.input.signals, ["logits"])["logits"].numpy(),
        read_json(snakemake.input.hygiene),
    )
    Path(snakemake.output.json).write_text(json.dumps(stats, indent=2) + "\n")
    statistics_document(stats).write(snakemake.output.markdown, snakemake.output.html, snakemake.output.csv)
