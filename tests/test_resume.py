"""A training job killed mid-way (SIGKILL, as at a time limit or a preemption) resumes from its checkpoint
when the workflow is rerun, and ends with the same model and training record as an uninterrupted run."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml
from conftest import DEMO, copy_repo, snakemake, trained_outcome

from kdflow.workflow import results_paths as paths

MODEL = paths.TEACHER_MODEL.format(teacher="tiny_bert", task="sst2")
CHECKPOINT = "checkpoints/finetune_teacher/tiny_bert/sst2.ckpt"
LOG = "logs/finetune_teacher/tiny_bert/sst2.log"


@pytest.mark.slow
def test_a_killed_teacher_job_resumes_from_its_checkpoint_with_the_same_result(tmp_path):
    workdir = copy_repo(tmp_path / "kdflow")
    config_path = workdir / "demo/config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["teacher_defaults"]["epochs"] = 6  # long enough to be killed mid-way (15 steps per epoch)
    config["checkpoints"] = {"every_steps": 10, "every_minutes": None}  # first: mid-epoch 1
    config_path.write_text(yaml.safe_dump(config))

    job = subprocess.Popen([sys.executable, "-m", "snakemake", *DEMO, "--cores", "1", MODEL],
                           cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not (workdir / CHECKPOINT).exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(job.pid, signal.SIGKILL)  # Snakemake and the job's script, without a chance to clean up
    job.wait()
    assert (workdir / CHECKPOINT).exists(), "no checkpoint was written before the job ended"
    assert not (workdir / MODEL / "training.json").exists(), "the job finished before it could be killed"

    snakemake(*DEMO, "--unlock", cwd=workdir)
    snakemake(*DEMO, "--cores", "1", "--rerun-incomplete", MODEL, cwd=workdir)
    resumed = re.search(r"resuming run train from its checkpoint: epoch (\d+), batch (\d+) \(step (\d+)\)",
                        (workdir / LOG).read_text())
    assert resumed and int(resumed[3]) >= 10, "the rerun started from scratch"
    assert not (workdir / CHECKPOINT).exists(), "a finished job's checkpoint is removed"
    after_resume = trained_outcome(workdir / MODEL)

    snakemake(*DEMO, "--cores", "1", MODEL, "--forcerun", "finetune_teacher", cwd=workdir)
    assert "resuming" not in (workdir / LOG).read_text()
    # best epoch, history (dev scores, losses) and the weights' bytes
    assert trained_outcome(workdir / MODEL) == after_resume
