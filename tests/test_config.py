"""Config resolution and code fingerprints (what makes reruns precise)."""

import yaml

from conftest import REPO
from kdflow.config import pseudo_head_settings, teacher_jobs, teacher_settings
from kdflow.provenance import code_fingerprint, module_closure


def full_config():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_teacher_settings_layer_defaults_teacher_and_task():
    config = full_config()
    sara = teacher_settings(config, "bert_large", "sara")
    cola = teacher_settings(config, "bert_large", "cola")
    assert sara["spec"] == {"model": "bert-large-uncased"}
    # thesis Table 4.1: 5e-5, batch 36, 3 epochs, 10 on Sara; the rest from teacher_defaults
    assert (sara["hyperparameters"]["learning_rate"], sara["hyperparameters"]["batch_size"]) == (5e-5, 36)
    assert sara["hyperparameters"]["epochs"] == 10 and cola["hyperparameters"]["epochs"] == 3
    assert cola["hyperparameters"]["warmup_ratio"] == 0.1
    assert teacher_settings(config, "bert_base", "rte")["hyperparameters"]["learning_rate"] == 2e-5


def test_teacher_jobs_and_pseudo_head_settings():
    config = full_config()
    jobs = teacher_jobs(config)
    assert len(jobs) == 19 and ("bert_large", "sara") in jobs and ("bert_base", "sara") not in jobs
    assert pseudo_head_settings(config, "bert_base")["pooling"] == "cls"


def test_code_fingerprint_follows_imports():
    closure = {path.name for path in module_closure("kdflow.pseudo_heads")}
    # pseudo_heads -> training, batching, data, metrics, runtime, tasks; tables is not imported
    assert {"pseudo_heads.py", "training.py", "batching.py", "data.py", "metrics.py", "tasks.py"} <= closure
    assert "tables.py" not in closure and "teacher.py" not in closure
    assert code_fingerprint("kdflow.data") != code_fingerprint("kdflow.teacher")
    assert len(code_fingerprint("kdflow.tables")) == 16


def test_reordering_the_config_changes_no_job_settings():
    config = full_config()
    reordered = yaml.safe_load(yaml.safe_dump(config, sort_keys=True))
    reordered["teacher_defaults"] = dict(reversed(list(config["teacher_defaults"].items())))
    assert repr(teacher_settings(config, "bert_base", "cola")) == repr(teacher_settings(reordered, "bert_base", "cola"))
    assert repr(pseudo_head_settings(config, "bert_base")) == repr(pseudo_head_settings(reordered, "bert_base"))
