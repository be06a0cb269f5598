"""Small students sharing a GPU (issue 34, kdflow.workflow.gpu_packs): which jobs a pack takes, what it asks SLURM
for and runs, and how the cost plan charges them. The packs on a real cluster: tests/test_slurm.py."""

import shlex

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_plan import toy_config, toy_jobs

from kdflow.core.errors import UserError
from kdflow.reporting.calibration import progress
from kdflow.reporting.plan_pages import plan_jobs
from kdflow.workflow import cost_plan
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import validate_config
from kdflow.workflow.gpu_packs import pack_resources, packs, sbatch_command, sharing

CONFIG = {"students": {"lstm": {"type": "bilstm"}, "cnn": {"type": "gated_cnn"}, "bert": {"type": "bert_k"}},
          "gpu_sharing": {"bilstm": 2, "gated_cnn": 1}}


def signals(task):
    """A toy signals file per task (the workflow's has a teacher and a transfer set too)."""
    return f"{paths.RESULTS}/signals/{task}.safetensors"


def student_job(student, seed, experiment="table5", task="sst2", threads=2, mem_mb=1000, runtime=30):
    out = paths.STUDENT_RUN_DIR.format(experiment=experiment, task=task, student=student, method="kd", point="default",
                                       seed=seed)
    return {"rule": "distill_student", "threads": threads,
            "resources": {"mem_mb": mem_mb, "runtime": runtime, "gpu": 1},
            "wildcards": {"experiment": experiment, "task": task, "student": student, "method": "kd",
                          "point": "default", "seed": str(seed)},
            "input": [signals(task)],
            "output": [f"{out}/metrics.json", f"{out}/model.safetensors"]}


def test_only_families_with_k_above_one_share_and_an_unknown_family_is_named():
    assert sharing(CONFIG) == {"lstm": 2}
    with pytest.raises(UserError, match="gpu_sharing names no student family: bilstmm"):
        sharing({**CONFIG, "gpu_sharing": {"bilstmm": 2}})


def test_a_pack_takes_k_waiting_ready_jobs_of_one_experiment_task_and_student():
    done, blocked = student_job("lstm", 3), student_job("lstm", 4, task="rte")
    jobs = [student_job("lstm", seed) for seed in (0, 1, 2)] + [done, blocked, student_job("lstm", 5, task="mrpc"),
                                                                 student_job("cnn", 0), student_job("bert", 0)]
    jobs.append({**student_job("lstm", 9), "rule": "probe_model"})  # another rule: never packed
    there = {*done["output"], signals("sst2"), signals("mrpc")}
    found = packs(jobs, CONFIG, exists=there.__contains__)
    seeds = [[(job["wildcards"]["task"], job["wildcards"]["seed"]) for job in pack] for pack in found]
    # done: its outputs exist; blocked: its input does not; cnn: K = 1; bert: no sharing
    assert seeds == [[("mrpc", "5")], [("sst2", "0"), ("sst2", "1")], [("sst2", "2")]]


def test_a_pack_asks_for_one_gpu_and_its_jobs_cpus_memory_and_runtimes_and_runs_them_at_once():
    pack = [student_job("lstm", 0, threads=2, mem_mb=1000, runtime=30), student_job("lstm", 1, threads=3, mem_mb=500,
                                                                                  runtime=20)]
    assert pack_resources(pack) == {"cpus": 5, "mem_mb": 1500, "runtime": 50}
    profile = {"default-resources": {"slurm_account": "ml", "slurm_partition": "cpu"},
               "set-resources": {"distill_student": {"slurm_partition": "gpu", "gpu_model": "a100"}}}
    command = sbatch_command(pack, profile, ["extra.yaml"])
    assert command[:2] == ["sbatch", "--parsable"] and command[-2] == "--wrap"
    for option in ["--gpus=a100:1", "--cpus-per-task=5", "--mem=1500M", "--time=50", "--account=ml", "--partition=gpu"]:
        assert option in command
    inner = shlex.split(command[-1])
    assert inner[1:] == ["-m", "snakemake", "--cores", "5", "--resources", "gpu=2", "--allowed-rules",
                         "distill_student", "--configfile", "extra.yaml", "--", *pack[0]["output"], *pack[1]["output"]]


@pytest.fixture(scope="module")
def shared_plan():
    """The toy config with a BiLSTM student beside its BERT one, BiLSTMs four to a GPU: (config, its planned jobs)."""
    config = toy_config()
    config["students"]["l"] = {"type": "bilstm", "layers": 1, "hidden_size": 32}
    config["experiments"]["e"]["students"] = ["s", "l"]
    config["gpu_sharing"] = {"bilstm": 4}
    validate_config(config, REPO / "schemas/config.schema.yaml")
    return config, toy_jobs(config)


def test_students_of_a_family_that_shares_a_gpu_are_charged_a_kth_of_their_gpu_time(shared_plan):
    config, planned = shared_plan
    throughput, startup = cost_plan.read_throughput(), cost_plan.read_startup()
    jobs = cost_plan.estimate(planned, throughput, startup, ("H100", "bf16"))
    students = jobs[jobs.rule == "distill_student"]
    lstm = students.family == "lstm"
    assert lstm.sum() == 2 and (~lstm).sum() == 2
    assert (students.charged_seconds[lstm] == students.seconds[lstm] / 4).all()
    assert (students.charged_seconds[~lstm] == students.seconds[~lstm]).all()
    table = cost_plan.plan_table(jobs, cost_plan.section_order(config)).set_index(["section", "rule"])
    assert table.loc[("e", "distill_student"), "hours"] == pytest.approx(students.charged_seconds.sum() / 3600)
    # on the CPU nothing is shared
    on_cpu = cost_plan.estimate(planned, throughput, startup, ("cpu", "fp32"))
    assert (on_cpu.charged_seconds == on_cpu.seconds).all()


def test_a_measured_speedup_of_k_jobs_sharing_a_gpu_charges_each_one_over_it(shared_plan, tmp_path):
    """Four BiLSTMs that together train 2.5 times as fast as one (reference/gpu_sharing.csv) are charged 1/2.5 of
    their GPU time each, not a quarter; a speedup measured at another K leaves the K-th."""
    config, _ = shared_plan
    table = tmp_path / "gpu_sharing.csv"
    pd.DataFrame({"student_type": ["bilstm", "bilstm"], "k": [2, 4], "speedup": [1.8, 2.5], "device": "H200",
                  "source": "test"}).to_csv(table, index=False)
    speedups = cost_plan.read_sharing(table)
    assert speedups == {("bilstm", 2): 1.8, ("bilstm", 4): 2.5} and cost_plan.read_sharing(tmp_path / "none") == {}
    shares = {k: toy_jobs(config | {"gpu_sharing": {"bilstm": k}}, speedups).groupby("family").gpu_share.unique()
              for k in (4, 8)}
    assert list(shares[4]["lstm"]) == [pytest.approx(1 / 2.5)] and list(shares[8]["lstm"]) == [1 / 8]
    assert list(shares[4]["transformer"]) == [1.0]


def test_the_calibrated_plan_charges_them_as_the_plan_does(shared_plan, tmp_path):
    """results/plan_jobs.csv, which the calibrated plan reads, keeps each job's share: before any job ran, its GPU-hours
    left are the plan's."""
    _, planned = shared_plan
    jobs = cost_plan.estimate(planned, cost_plan.read_throughput(), cost_plan.read_startup(), ("H100", "bf16"))
    plan_jobs(jobs).to_csv(tmp_path / "plan_jobs.csv", index=False)
    read = pd.read_csv(tmp_path / "plan_jobs.csv", keep_default_na=False)
    per_job = read.assign(measured_seconds=np.nan, calibrated_seconds=read.seconds)
    left = progress(per_job, {"all jobs": np.ones(len(read), dtype=bool)}, np.empty((0, 1, 2)))
    on_gpu = jobs.device != "cpu"
    assert left.gpu_hours_left[0] == pytest.approx(jobs.charged_seconds[on_gpu].sum() / 3600)
    assert left.gpu_hours_left[0] < jobs.seconds[on_gpu].sum() / 3600
