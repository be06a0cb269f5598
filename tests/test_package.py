"""The package mirrors the DAG, and each rule's code fingerprint is exactly the code its script runs.

Stages in the order data flows; a module imports only from its own stage and the stages before it, every import
of a kdflow module is at module level (none hidden in a function), and there are no cycles.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, rule_scripts

from kdflow.workflow import provenance
from kdflow.workflow.provenance import imported_modules, module_name, script_closure, script_fingerprint

STAGES = ("core", "workflow", "training", "teachers", "transfer", "students", "distillation", "probing", "analysis",
          "export", "reporting")
PACKAGE = REPO / "kdflow"
SCRIPTS = REPO / "scripts"


def modules() -> dict[str, object]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def stage_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # the top-level package: imports nothing
    return STAGES.index(parts[1])


def edges() -> dict[str, set[str]]:
    return {name: imported_modules(path, name) for name, path in modules().items()}


def test_every_module_belongs_to_a_stage():
    unknown = sorted(name for name in modules() if name != "kdflow" and name.split(".")[1] not in STAGES)
    assert unknown == []


def test_every_module_name_is_unique():
    """A module's name says what it holds without its package. The two registries keep theirs: each is its
    package's one registry, and renaming either would change the code fingerprint of every training job (so rerun
    every student of a user's results)."""
    names = [path.stem for path in PACKAGE.rglob("*.py") if path.stem != "__init__"]
    repeated = sorted({name for name in names if names.count(name) > 1} - {"registry"})
    assert repeated == []


def test_imports_go_only_to_the_same_or_an_earlier_stage():
    against = sorted(f"{a} -> {b}" for a, targets in edges().items() for b in targets if stage_of(b) > stage_of(a))
    assert against == []


def test_the_import_graph_has_no_cycle():
    graph, state, cycles = edges(), {}, []

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph[node]):
            target = target_module(target)
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def target_module(name: str) -> str:
    return name if name in modules() else name.rpartition(".")[0]


def test_kdflow_imports_are_at_module_level():
    hidden = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n.split(".")[0] == "kdflow" or (isinstance(node, ast.ImportFrom) and node.level) for n in names):
                    hidden.append(f"{name}:{node.lineno}")
    assert hidden == []


def test_the_student_registry_loads_no_model_familys_code():
    """Issue 16's lean jobs: a BiLSTM or CNN student's job imports the registry of every student, and transformers'
    BERT code (2 CPU-seconds of a 3-second import) loads only when a transformer student is built."""
    probe = ("import sys, kdflow.distillation.distill, kdflow.students.registry as registry; "
             "print(sorted(m for m in sys.modules if m.startswith('transformers.models.') "
             "and '.modeling_' in m and '.auto.' not in m)); "
             "print(sorted(registry.STUDENTS))")
    loaded, students = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                      check=True).stdout.splitlines()
    assert loaded == "[]" and "bert_k" in students


# Code fingerprints.


def closure(script: str) -> set[str]:
    return {path.relative_to(REPO).as_posix() for path in script_closure(SCRIPTS / script)}


def test_every_script_has_one_rule():
    """A rule names its script once, in ``**runs(...)``, which also makes the fingerprint of that script's code its
    ``code`` param (rules/templates.smk): the two cannot disagree (tests/test_workflow.py checks the jobs)."""
    scripts = rule_scripts()
    assert sorted(scripts.values()) == sorted(path.name for path in SCRIPTS.glob("*.py"))


@pytest.mark.parametrize(
    "script, registries",
    [("distill_student.py", ["students", "distillation/methods"]), ("compute_assistant_signals.py", ["students"]),
     ("encode_probing_tasks.py", ["students"]),
     ("compute_attention_maps.py", ["students", "distillation/methods"]),
     ("compute_layer_outputs.py", ["students", "distillation/methods"])],
)
def test_every_registered_method_and_student_is_in_the_code_of_the_jobs_using_the_registry(script, registries):
    registered = set()
    for folder in registries:  # the registry package, its registry module and every member its __init__ imports
        init = PACKAGE / folder / "__init__.py"
        members = imported_modules(init, module_name(init)) | {module_name(PACKAGE / folder / "registry.py")}
        registered |= {init.relative_to(REPO).as_posix()} | {f"{m.replace('.', '/')}.py" for m in members}
    assert len(registered) >= 4 and registered - closure(script) == set()


@pytest.mark.parametrize("script", ["compute_assistant_signals.py", "encode_probing_tasks.py", "probe_model.py",
                                    "measure_inference.py", "analyse_predictions.py", "classify_sentences.py"])
def test_jobs_that_only_load_students_do_not_run_the_methods(script):
    assert {path for path in closure(script) if path.startswith("kdflow/distillation/methods/")} == set()


@pytest.mark.parametrize("script", ["distill_student.py", "compute_assistant_signals.py", "train_pseudo_heads.py"])
def test_generator_and_multi_gpu_code_are_not_in_a_student_job(script):
    assert {"kdflow/transfer/generation.py", "kdflow/training/parallel.py"} & closure(script) == set()


@pytest.mark.parametrize("script", ["finetune_teacher.py", "evaluate_teacher.py", "train_pseudo_heads.py", "finetune_generator.py", "evaluate_generator.py",
                                    "sample_transfer_shard.py", "compute_teacher_signals.py", "distill_student.py",
                                    "encode_probing_tasks.py", "probe_model.py"])
def test_no_report_or_figure_code_in_a_training_job(script):
    assert {path for path in closure(script) if path.startswith("kdflow/reporting/")} == set()


def test_figure_jobs_hash_only_what_they_run():
    assert closure("figure_probing.py") == {"scripts/figure_probing.py", "kdflow/__init__.py", "kdflow/core/__init__.py",
                                            "kdflow/core/errors.py", "kdflow/core/intermediates.py",
                                            "kdflow/core/io.py", "kdflow/core/run_files.py",
                                            "kdflow/core/job_setup.py", "kdflow/probing/__init__.py", "kdflow/probing/senteval.py",
                                            "kdflow/reporting/__init__.py", "kdflow/reporting/figures/__init__.py",
                                            "kdflow/reporting/figures/style.py", "kdflow/reporting/figures/thesis.py"}


@pytest.mark.parametrize("script", ["figure_attention_maps.py", "figure_layer_outputs.py"])
def test_the_figures_of_recomputed_students_only_draw(script):
    """Issue 54: the analysis stage's rules (compute_attention_maps, compute_layer_outputs) recompute the students;
    the figure jobs read their JSON and draw, with no model, method or analysis code in what they run."""
    assert {path.split("/")[1] for path in closure(script) if path.count("/") > 1} == {"core", "reporting"}


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A scratch copy of the package and the scripts, and a function giving every script's fingerprint there now
    (code forms are cached per file version, fingerprints per script: those are cleared)."""
    copy = tmp_path / "repo"
    shutil.copytree(PACKAGE, copy / "kdflow", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SCRIPTS, copy / "scripts")
    monkeypatch.setattr(provenance, "PACKAGE_ROOT", copy / "kdflow")

    def fingerprints():
        script_fingerprint.cache_clear()
        return {script.name: script_fingerprint(script) for script in sorted((copy / "scripts").glob("*.py"))}

    yield copy, fingerprints
    script_fingerprint.cache_clear()


def test_editing_a_file_changes_exactly_the_fingerprints_that_run_it(package_copy):
    copy, fingerprints = package_copy
    before = fingerprints()
    for edited in ("students/recurrent.py", "distillation/methods/hidden_methods.py", "transfer/generation.py",
                   "reporting/figures/style.py"):
        with open(copy / "kdflow" / edited, "a") as file:
            file.write("EDITED = 1\n")
        after = fingerprints()
        changed = {name for name in before if before[name] != after[name]}
        users = {script.name for script in (copy / "scripts").glob("*.py")
                 if copy / "kdflow" / edited in script_closure(script)}
        assert changed == users and changed, edited
        before = after



STUDENT_JOBS = {("gated_cnn", "kd"), ("gated_cnn", "pkd"), ("bilstm", "kd"), ("bert_k", "universal_kd_ca")}


def test_a_student_jobs_fingerprint_follows_its_own_student_and_method_alone(package_copy):
    """Of the registries, a student job's code counts its student type's module and its method's module: editing
    PKD's module reruns PKD's students, editing the BiLSTM's module the BiLSTM's, a shared module (the losses) all."""
    copy, _ = package_copy
    script = copy / "scripts/distill_student.py"

    def fingerprints():
        provenance.job_fingerprint.cache_clear()
        return {(student, method): provenance.job_fingerprint(
            script, (("kdflow.students", student), ("kdflow.distillation.methods", method)))
            for student, method in STUDENT_JOBS}

    before = fingerprints()
    for edited, reruns in (("distillation/methods/hidden_methods.py", {("gated_cnn", "pkd")}),
                           ("students/recurrent.py", {("bilstm", "kd")}),
                           ("distillation/methods/logit_methods.py", {("gated_cnn", "kd"), ("bilstm", "kd")}),
                           ("training/losses.py", STUDENT_JOBS)):
        with open(copy / "kdflow" / edited, "a") as file:
            file.write("EDITED = 1\n")
        after = fingerprints()
        assert {job for job in STUDENT_JOBS if before[job] != after[job]} == reruns, edited
        before = after
    provenance.job_fingerprint.cache_clear()


def test_no_training_job_counts_the_workflows_modules():
    """The paths module and the workflow's planning code are edited for the DAG's sake: a student's or a pack's
    job does not count them (kdflow.workflow.results_paths says so), so that editing them retrains nothing."""
    for script in ("distill_student.py", "distill_pack.py"):
        files = provenance.job_closure(SCRIPTS / script, {"kdflow.students": "bilstm",
                                                          "kdflow.distillation.methods": "kd"})
        assert not [f for f in files if "kdflow/workflow/" in Path(f).as_posix()], script


def test_a_name_no_member_registers_is_a_clear_error():
    with pytest.raises(ValueError, match="'no_such_method' is registered by 0 modules"):
        provenance.job_closure(SCRIPTS / "distill_student.py", {"kdflow.distillation.methods": "no_such_method"})

def test_comments_docstrings_and_formatting_change_no_fingerprint(package_copy):
    """A file counts by its syntax tree without docstrings (provenance.code_form): a typo fixed in a docstring of
    core/io.py, which every script runs, reruns nothing; a changed constant reruns them all."""
    copy, fingerprints = package_copy
    before = fingerprints()
    io = copy / "kdflow/core/io.py"
    source = io.read_text()
    first_docstring = source.index('"""') + 3
    restyled = (source[:first_docstring] + "A reworded docstring. " + source[first_docstring:]).replace(
        "\n\n\n", "\n\n\n# a comment\n\n")
    io.write_text(restyled)
    assert fingerprints() == before
    io.write_text(restyled + "\nCONSTANT = 2\n")
    after = fingerprints()
    assert {name for name in before if before[name] != after[name]} == {
        script.name for script in (copy / "scripts").glob("*.py") if io in script_closure(script)}


def test_an_import_in_any_nested_block_is_in_the_closure(tmp_path):
    """Imports are found by walking statements only (not expressions); every kind of block that holds statements
    is searched, and an import written in a string is not one."""
    script = tmp_path / "script.py"
    script.write_text(
        "def f():\n    import kdflow.core.io\n"
        "try:\n    pass\nexcept ImportError:\n    from kdflow.core import errors\n"
        "else:\n    from kdflow.core import metrics\nfinally:\n    from kdflow.core.tasks import TASKS\n"
        "class C:\n    if True:\n        pass\n    else:\n        from kdflow.core import data\n"
        "match 1:\n    case 1:\n        with open(__file__):\n            from kdflow.core import hyperparameters\n"
        "text = 'from kdflow.core import precision'\n")
    assert imported_modules(script) == {"kdflow.core", "kdflow.core.io", "kdflow.core.errors", "kdflow.core.metrics",
                                        "kdflow.core.tasks", "kdflow.core.data", "kdflow.core.hyperparameters"}
