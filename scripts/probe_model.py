"""Rule probe_model: the probing grid on every layer of one model's encodings of one probing task."""

import json
from pathlib import Path

from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.probing.probe import ProbeSettings, probe_encodings
from kdflow.probing.senteval import read_probing_file

with rule_job(snakemake):
    device = select_device(snakemake.params.device)
    settings = ProbeSettings(**{key: tuple(value) if isinstance(value, list) else value
                                for key, value in snakemake.params.probe.items()}, device=str(device),
                             precision=resolve_precision(snakemake.params.precision, device).name)
    result = probe_encodings(snakemake.input.encodings, snakemake.wildcards.probing_task,
                             read_probing_file(snakemake.input.probing), settings)
    Path(snakemake.output[0]).write_text(json.dumps(result, indent=1))
