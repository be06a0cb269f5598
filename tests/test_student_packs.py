"""Students trained in packs as jobs of the DAG (issue 66, kdflow.workflow.student_packs): which runs share a pack,
and the demo's packed students trained by one pack job each and written where a student alone writes its files."""

import json

import pytest
import yaml
from conftest import REPO, copy_repo, job_stats, planned_jobs, snakemake

from kdflow.core.errors import UserError
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import validate_config
from kdflow.workflow.student_packs import distill_inputs, pack_of, student_packs


def demo_config(**packs):
    """The demo's config with ``student_packs``, Universal-KD Table 5's students over two learning rates and two
    seeds (4 runs of each student), as the workflow sees it."""
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    config["student_packs"] = packs
    table5 = config["experiments"]["universal_kd_table5"]
    table5["grid"], table5["seeds"] = {"learning_rate": [1.0e-3, 2.0e-3]}, [0, 1]
    validate_config(config, REPO / "schemas/config.schema.yaml")
    return config


def members(config, student):
    return {key[4]: [(m["point"], m["seed"]) for m in found] for key, found in student_packs(config).items()
            if key[:4] == ("universal_kd_table5", "sst2", student, "universal_kd_ca")}


def test_runs_that_differ_in_seed_and_learning_rate_alone_share_a_pack_of_at_most_k():
    config = demo_config(gated_cnn=3)
    assert members(config, "gated_cnn") == {0: [("lr0.001", 0), ("lr0.001", 1), ("lr0.002", 0)]}  # the 4th alone
    assert members(config, "bilstm") == {}  # its type asks for no packs
    packed = pack_of(config, "universal_kd_table5", "sst2", "gated_cnn", "universal_kd_ca", "lr0.002", 0)
    assert packed == paths.STUDENT_PACK_DIR.format(experiment="universal_kd_table5", task="sst2", student="gated_cnn",
                                                   method="universal_kd_ca", pack=0)
    assert distill_inputs(config, "universal_kd_table5", "sst2", "gated_cnn", "universal_kd_ca", "lr0.002", 0)[
        "pack"] == packed
    assert "pack" not in distill_inputs(config, "universal_kd_table5", "sst2", "gated_cnn", "universal_kd_ca",
                                        "lr0.002", 1)


def test_runs_that_train_differently_are_not_packed_together():
    config = demo_config(gated_cnn=4)
    config["experiments"]["universal_kd_table5"]["grid"]["batch_size"] = [8, 16]  # two shapes of step
    found = members(config, "gated_cnn")
    assert sorted(map(len, found.values())) == [4, 4]
    for pack in found.values():
        assert len({point.split("_")[0] for point, _ in pack}) == 1  # one batch size a pack (bs8_..., bs16_...)
    takd = demo_config(hf=4)  # tiny_roberta
    takd["experiments"]["universal_kd_table4"]["seeds"] = [0, 1]
    assert [key[3] for key in student_packs(takd)] == ["dih", "annealing_kd", "universal_kd_cg",
                                                       "universal_kd_att_on_losses"]  # TAKD: its own assistant's


def test_a_pack_size_for_a_student_type_the_config_has_not_is_refused():
    with pytest.raises(UserError, match="student_packs names no student type of the config: gated_cn "):
        student_packs(demo_config(gated_cn=2))


@pytest.mark.slow
def test_the_demos_packed_students_train_in_one_job_a_pack_and_a_change_reruns_that_pack_alone(tmp_path):
    """Universal-KD Table 5 of the demo with packs of 4: each student's four runs train in one pack job, and each
    run's files are where a student alone writes them (links to the pack's); then a change to the Gated CNN
    students' settings plans that pack again and not the BiLSTM's."""
    workdir = copy_repo(tmp_path / "kdflow")
    config = demo_config(gated_cnn=4, bilstm=4)
    (workdir / "packs.yaml").write_text(yaml.safe_dump(config))
    runs = [paths.STUDENT_METRICS.format(experiment="universal_kd_table5", task="sst2", student=student,
                                         method="universal_kd_ca", point=point, seed=seed)
            for student in ("bilstm", "gated_cnn") for point in ("lr0.001", "lr0.002") for seed in (0, 1)]
    args = ("--configfile", "packs.yaml", "--replace-workflow-config")
    ran = job_stats(snakemake(*args, "--cores", "2", *runs, cwd=workdir).stdout)
    assert (ran["distill_pack"], ran["distill_student"]) == (2, 8)
    for run in runs:
        metrics = json.loads((workdir / run).read_text())
        point, seed = run.split("/")[-3], int(run.split("/")[-2].removeprefix("seed"))
        assert metrics["hyperparameters"]["seed"] == seed
        assert metrics["hyperparameters"]["learning_rate"] == {"lr0.001": 1.0e-3, "lr0.002": 2.0e-3}[point]
        assert metrics["scores"]["dev"] and metrics["history"]
        pack = workdir / paths.STUDENT_PACK_DIR.format(experiment="universal_kd_table5", task="sst2",
                                                       student=run.split("/")[4], method="universal_kd_ca", pack=0)
        for name in ("metrics.json", "model.safetensors", "predictions.parquet", "curves.parquet"):
            assert (workdir / run).with_name(name).stat().st_ino == (pack / point / f"seed{seed}" / name).stat().st_ino
    assert planned_jobs(*args, *runs, cwd=workdir) == {}

    config["students"]["gated_cnn"]["hidden_size"] = 48
    (workdir / "packs.yaml").write_text(yaml.safe_dump(config))
    assert planned_jobs(*args, *runs, cwd=workdir) == {"distill_pack": 1, "distill_student": 4}


def test_runs_that_differ_in_a_loss_weight_share_a_pack_where_they_weigh_the_same_terms():
    """Universal-KD's beta (gamma its complement) moves the weights alone, except at 0, where the KD term drops."""
    config = demo_config(gated_cnn=8)
    config["experiments"]["universal_kd_table5"]["grid"] = {"beta": [0.0, 0.5, 0.7]}
    found = sorted(sorted({point for point, _ in pack}) for pack in members(config, "gated_cnn").values())
    assert found == [["beta0"], ["beta0.5", "beta0.7"]]
    assert sorted(map(len, members(config, "gated_cnn").values())) == [2, 4]  # two seeds each
