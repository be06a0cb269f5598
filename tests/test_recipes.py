"""The recipes of docs/development.md ("Adding a method, a student, a paper table or a figure"), followed in a
scratch copy of the repository exactly as the page writes them: its code blocks are appended to the files they
name and its config blocks merged into the demo's config. Each recipe must then be enough: the docs' lists match
the registries again, the workflow plans the new jobs, the new method or student computes, and no other file had
to change."""

import filecmp
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from safetensors import safe_open
from conftest import DEMO, REPO, copy_repo, planned_jobs, snakemake
from markdown_it import MarkdownIt

from kdflow.core.data import TaskData
from kdflow.export.onnx_export import onnx_available
from kdflow.workflow import results_paths as paths

PAGE = REPO / "docs" / "development.md"
SECTION = "## Adding a method, a student, a paper table or a figure"
DEMO_CONFIG = "demo/config.yaml"
METHODS_PAGE = "docs/students-and-methods.md"


def recipes() -> dict[str, list[tuple[str, str]]]:
    """Recipe (the bold words that open it: "A distillation method", ...) -> its code blocks, each (where, code):
    where is the first line's comment, a file (`kdflow/...py`) or a config section (`config: students`)."""
    text = PAGE.read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    found, current = {}, None
    for token in MarkdownIt().parse(section):
        if token.type == "inline" and (opening := re.match(r"\*\*(A [\w ]+?)[:*]", token.content)):
            current = found.setdefault(opening[1], [])
        elif token.type == "fence" and current is not None:
            first, _, code = token.content.partition("\n")
            current.append((first.removeprefix("# ").strip(), code))
    return found


def follow(workdir: Path, blocks: list[tuple[str, str]]) -> None:
    """Apply each block where its first line says: ``config`` or ``config: <section>`` merges it into the demo
    config (at its top or into that section), ``<file>.yaml: <section>`` into that section of a YAML file; any other
    file gets the block appended, or is created from it where it does not exist."""
    for where, code in blocks:
        name, _, section = where.partition(": ")
        if name == "config" or name.endswith(".yaml"):
            path = workdir / (DEMO_CONFIG if name == "config" else name)
            document = yaml.safe_load(path.read_text())
            merged = document
            for key in filter(None, section.split(".")):
                merged = merged[key]
            merged.update(yaml.safe_load(code))
            path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
        else:
            path = workdir / where
            path.write_text(path.read_text() + "\n\n" + code if path.exists() else code)


def list_in_docs(workdir: Path, name: str, kind: str) -> None:
    """The recipe's doc lines: the name in docs/students-and-methods.md's list and, for a method, README's count."""
    page = workdir / METHODS_PAGE
    text = page.read_text()
    if kind == "method":
        text = text.replace(", dih`;", f", dih, {name}`;", 1)
        readme = workdir / "README.md"
        count = int(re.search(r"(\d+) distillation methods", readme.read_text())[1])
        readme.write_text(readme.read_text().replace(f"{count} distillation methods",
                                                     f"{count + 1} distillation methods"))
    else:
        text = text.replace("`bilstm` and `gated_cnn`", f"`bilstm`, `{name}` and `gated_cnn`", 1)
    page.write_text(text)


def repository_files() -> list[str]:
    """The repository's files: tracked, or new and not ignored."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    return subprocess.run(listed, cwd=REPO, capture_output=True, text=True, check=True).stdout.split()


def changed_files(workdir: Path) -> set[str]:
    """The repository's files that differ in the copy."""
    return {name for name in repository_files() if (REPO / name).is_file() and (workdir / name).is_file()
            and not filecmp.cmp(REPO / name, workdir / name, shallow=False)}


def new_files(workdir: Path, *folders: str) -> set[str]:
    """The copy's files in ``folders`` that the repository does not have."""
    known = set(repository_files())
    return {str(path.relative_to(workdir)) for folder in folders for path in (workdir / folder).rglob("*")
            if path.is_file() and str(path.relative_to(workdir)) not in known and "__pycache__" not in path.parts}


def python_in(workdir: Path, code: str) -> str:
    """Run ``code`` in the copy's own kdflow (its directory first on the path), return its output."""
    result = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True,
                            env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def docs_match_the_registries(workdir: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "tests/test_docs.py", "-k", "registered"], cwd=workdir, capture_output=True, text=True,
                            env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin", "HOME": str(workdir)})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def scratch(tmp_path):
    return copy_repo(tmp_path / "kdflow")


def test_the_page_has_a_recipe_with_blocks_for_each_kind():
    found = recipes()
    assert list(found) == ["A distillation method", "A method that needs a new teacher signal", "A student",
                           "A paper table", "A figure"]
    assert all(found.values())


@pytest.mark.slow
def test_a_new_method_is_one_code_file_a_config_entry_and_two_doc_lines(scratch):
    follow(scratch, recipes()["A distillation method"])
    list_in_docs(scratch, "recipe_kd", "method")
    assert changed_files(scratch) == {"kdflow/distillation/methods/logit_methods.py", DEMO_CONFIG, METHODS_PAGE,
                                      "README.md"}
    docs_match_the_registries(scratch)
    planned = planned_jobs(*DEMO, paths.SELECTION.format(experiment="recipe"), cwd=scratch)
    assert (planned["distill_student"], planned["select_students"]) == (1, 1)
    # the method computes its terms, and its gradient reaches the student's logits
    output = python_in(scratch, """
import torch
from kdflow.distillation.methods.registry import Shapes, build_method
from kdflow.students.registry import StudentOutput
from kdflow.transfer.signals import TeacherSignals
method = build_method("recipe_kd", Shapes((4, 4), 2, 4, 2, False))
logits = torch.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
teacher = TeacherSignals(logits=torch.tensor([[0.0, 0.0], [0.0, 0.0]]))
terms = method(StudentOutput(logits, [torch.zeros(2, 4)] * 2), teacher, torch.tensor([0, 1]))
terms["loss"].backward()
print(round(terms["kd"].item(), 6), logits.grad.abs().sum().item() > 0)
""")
    assert output.split() == ["1.25", "True"]  # 0.5 * mean over examples of (1 + 4) = 1.25


@pytest.mark.slow
def test_a_method_with_a_new_teacher_signal_is_two_code_files_a_config_entry_and_two_doc_lines(scratch):
    follow(scratch, recipes()["A method that needs a new teacher signal"])
    list_in_docs(scratch, "recipe_mean", "method")
    assert changed_files(scratch) == {"kdflow/transfer/signals.py", "kdflow/distillation/methods/hidden_methods.py",
                                      DEMO_CONFIG, METHODS_PAGE, "README.md"}
    docs_match_the_registries(scratch)
    # the plan asks the teacher's signals for it, and the student trains from the file they are stored in
    signals = paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train")
    selection = paths.SELECTION.format(experiment="recipe_signal")
    planned = planned_jobs(*DEMO, selection, cwd=scratch)
    assert (planned["compute_teacher_signals"], planned["distill_student"]) == (1, 1)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the copy's kdflow
    snakemake(*DEMO, "--cores", "2", selection, cwd=scratch, env=environment)
    with safe_open(scratch / signals, "pt") as stored:
        assert {"mean_tokens", "logits", "head_logits"} <= set(stored.keys())
        width = stored.get_slice("mean_tokens").get_shape()[1]
    assert width == 64  # tiny_bert's width: the signal has the shape it registered
    assert "recipe_mean" in (scratch / selection).read_text()  # its student trained, and was selected


LOADED_WITHOUT_KDFLOW = """
import json, sys
sys.modules["kdflow"] = None  # kdflow cannot be imported: the folder's own code builds the model
from transformers import pipeline
classify = pipeline("text-classification", model=sys.argv[1], trust_remote_code=True)
print(json.dumps({"label": classify("a gripping, funny film")[0]["label"],
                  "kdflow": any(name.startswith("kdflow.") for name in sys.modules)}))
"""


@pytest.mark.slow
def test_a_new_student_architecture_is_three_code_files_config_entries_and_a_doc_line_and_exports(scratch):
    follow(scratch, recipes()["A student"])
    list_in_docs(scratch, "recipe_ffn", "student")
    assert changed_files(scratch) == {"kdflow/students/layers.py", "kdflow/students/convolutional.py",
                                      "kdflow/workflow/model_sizes.py", DEMO_CONFIG, METHODS_PAGE}
    docs_match_the_registries(scratch)
    assert planned_jobs(*DEMO, paths.SELECTION.format(experiment="recipe_student"), cwd=scratch)["distill_student"] == 1
    # the plan prices it, and the student builds and forwards a batch
    output = python_in(scratch, """
import torch
from kdflow.students.registry import StudentContext, build_student
from kdflow.workflow import model_sizes
from kdflow.workflow.catalog_cache import load_catalog
print(model_sizes.student_model({"type": "recipe_ffn"}, model_sizes.transformer(2, 32, 64), load_catalog())["layers"])
class Vocabulary:
    pad_token_id = 0
    def __len__(self):
        return 50
student = build_student({"type": "recipe_ffn"}, StudentContext(2, Vocabulary()))
batch = {"input_ids": torch.tensor([[1, 2, 3]]), "attention_mask": torch.ones(1, 3, dtype=torch.long)}
print(tuple(student(batch).logits.shape))
""")
    assert output.split("\n")[:2] == ["2", "(1, 2)"]
    # trained, selected and exported by path: the export checks the folder against kdflow on every dev example
    # before writing it, and the folder loads and classifies with its own copy of the layers, without kdflow
    folder = scratch / paths.EXPORT.format(experiment="recipe_student", task="sst2", student="recipe_ffn", method="kd")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the copy's kdflow
    snakemake(*DEMO, "--cores", "2", str(folder.relative_to(scratch)), cwd=scratch, env=environment)
    record = json.loads((folder / "kdflow.json").read_text())
    assert record["trust_remote_code"] and record["agreement"]["kdflow_student"]["prediction_disagreements"] == 0
    assert "recipe_feed_forward" in (folder / "layers.py").read_text()
    assert json.loads((folder / "config.json").read_text())["layers"][0] == {"kind": "recipe_feed_forward",
                                                                             "width": 64}
    if onnx_available():  # traced as it is: no traceable form was written for the new layer
        assert (folder / "model.onnx").exists() and record["onnx"]["dev"]["prediction_disagreements"] == 0
    loaded = subprocess.run([sys.executable, "-c", LOADED_WITHOUT_KDFLOW, str(folder)], cwd=scratch.parent,
                            capture_output=True, text=True, env={**environment, "HF_MODULES_CACHE": str(scratch.parent
                                                                                                 / "modules")})
    assert loaded.returncode == 0, loaded.stderr
    result = json.loads(loaded.stdout.splitlines()[-1])
    assert result["label"] in record["labels"] and not result["kdflow"]


@pytest.mark.slow
def test_a_new_paper_table_of_reported_numbers_is_a_config_entry(scratch):
    follow(scratch, recipes()["A paper table"])
    assert changed_files(scratch) == {DEMO_CONFIG}
    planned = planned_jobs(*DEMO, cwd=scratch)
    assert planned["paper_table"] == 1 + len(yaml.safe_load((REPO / DEMO_CONFIG).read_text())["paper_tables"]["tables"])


@pytest.mark.slow
def test_a_new_figure_is_planned_for_its_config_section_and_drawn(scratch):
    follow(scratch, recipes()["A figure"])
    python_in(scratch, "from kdflow.workflow.config_reference import PAGE, reference_page\n"
                       "from kdflow.workflow.config_files import SCHEMA, load_config_file\n"
                       "PAGE.write_text(reference_page(load_config_file(SCHEMA)))")
    assert changed_files(scratch) == {"kdflow/workflow/results_paths.py", "kdflow/reporting/figures/thesis.py",
                                      "rules/reporting_figures.smk", "kdflow/workflow/targets.py",
                                      "schemas/config.schema.yaml", "docs/config-reference.md", DEMO_CONFIG}
    assert new_files(scratch, "scripts", "report") == {"scripts/figure_sentence_lengths.py",
                                                       "report/figure_sentence_lengths.rst"}
    figure, data_file = python_in(scratch, "from kdflow.workflow import results_paths as paths\n"
                                           "print(paths.SENTENCE_LENGTHS_PNG.format(task='sst2'))\n"
                                           "print(paths.SENTENCE_LENGTHS_CSV.format(task='sst2'))").split()
    # the default target asks for it (one job, the task's entry), and it is drawn from the prepared task
    assert planned_jobs(*DEMO, cwd=scratch)["figure_sentence_lengths"] == 1
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the copy's kdflow
    snakemake(*DEMO, "--cores", "1", figure, cwd=scratch, env=environment)
    data = pd.read_csv(scratch / data_file)
    prepared = TaskData.load(scratch / paths.DATA.format(task="sst2")).split("dev")
    dev = data[data["split"] == "dev"]["words"]
    assert len(dev) == len(prepared) and dev.iloc[0] == len(prepared["text_a"].iloc[0].split())
    assert (scratch / figure).read_bytes().startswith(b"\x89PNG")
