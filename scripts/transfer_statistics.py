"""Rule transfer_statistics: generated vs real sentences of an augmented transfer set, for the report."""

import json
from pathlib import Path

from safetensors.torch import load_file

from kdflow.core.data import TaskData
from kdflow.core.runtime import rule_job
from kdflow.transfer.augmentation import statistics_document, transfer_statistics
from kdflow.transfer.frames import transfer_frame

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    stats = transfer_statistics(
        task,
        transfer_frame(task, snakemake.input.transfer),
        load_file(snakemake.input.signals)["logits"].numpy(),
        json.loads(Path(snakemake.input.hygiene).read_text()),
    )
    Path(snakemake.output.json).write_text(json.dumps(stats, indent=2) + "\n")
    statistics_document(stats).write(snakemake.output.markdown, snakemake.output.html)
