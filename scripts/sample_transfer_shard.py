"""Rule sample_transfer_shard: one seeded shard of generated sentences."""

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.training.checkpoint import job_checkpoint
from kdflow.transfer.generation import SamplingSettings
from kdflow.transfer.sampling import sample_shard

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    sampling = snakemake.params.sampling
    device = select_device(snakemake.params.device)
    sample_shard(
        TaskData.load(snakemake.input.data),
        snakemake.input.generator,
        int(snakemake.wildcards.shard),
        sampling["shards"],
        sampling["sentences"],
        sampling["seed"],
        sampling["prefix"],
        SamplingSettings(**{k: sampling[k] for k in ("max_length", "temperature", "top_k", "top_p", "batch_size")}),
        device,
        snakemake.output[0],
        sampling["dtype"],
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
    )
    checkpoint.remove()
