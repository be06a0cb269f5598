"""Where the workflow writes: every path under ``results/``, one named template each, in Snakemake's wildcard syntax
(``{task}``, ``{teacher}``, ...), each composed from the directory it lies in. The rules declare their outputs and
inputs with these names (rules/common.smk imports the module as ``paths``); Python fills them with ``.format(...)``.
Moving an output is an edit here (tests/test_results_paths.py finds any ``results/`` path spelled elsewhere).

The files inside a run's folder are named in kdflow.core.run_files, its one import (torch-free: Snakemake reads
this module while it plans). The training stages (training to analysis) do not import this module: their modules
are in the code fingerprints of the training jobs (kdflow.workflow.provenance), and they are given their paths by
the rules.
"""

from __future__ import annotations

from pathlib import Path

from kdflow.core import run_files

RESULTS = "results"  # kdflow.core.intermediates.RESULTS too: the core stage checks its own files under it

# Stage data
DATA = f"{RESULTS}/data/{{task}}"  # a task's prepared splits ({split}.parquet) and its meta.json (run_files.DATA_META)

# Stage teachers: fine-tuned teachers and their pseudo-heads (a classifier per layer)
TEACHER_DIR = f"{RESULTS}/teachers/{{teacher}}/{{task}}"
TEACHER_MODEL = f"{TEACHER_DIR}/model"  # the best dev epoch's model, with its training record
TEACHER_PREDICTIONS = f"{TEACHER_DIR}/{run_files.PREDICTIONS}"  # dev logits and test predictions
TEACHER_METRICS = f"{TEACHER_DIR}/{run_files.METRICS}"
TEACHER_CURVES = f"{TEACHER_DIR}/{run_files.CURVES}"  # learning curves
PSEUDO_HEADS_DIR = f"{RESULTS}/pseudo_heads/{{teacher}}/{{task}}"
PSEUDO_HEADS = f"{PSEUDO_HEADS_DIR}/{run_files.PSEUDO_HEADS}"
PSEUDO_HEADS_PREDICTIONS = f"{PSEUDO_HEADS_DIR}/{run_files.PSEUDO_HEADS_PREDICTIONS}"
PSEUDO_HEADS_METRICS = f"{PSEUDO_HEADS_DIR}/{run_files.METRICS}"
PSEUDO_HEADS_CURVES = f"{PSEUDO_HEADS_DIR}/{run_files.CURVES}"

# Stage transfer: the generator, the transfer sets and the teachers' signals on them
GENERATOR_DIR = f"{RESULTS}/generators/{{task}}"
GENERATOR_MODEL = f"{GENERATOR_DIR}/model"
GENERATOR_METRICS = f"{GENERATOR_DIR}/{run_files.METRICS}"
GENERATOR_CURVES = f"{GENERATOR_DIR}/{run_files.CURVES}"
TRANSFER_DIR = f"{RESULTS}/transfer/{{task}}"
TRANSFER_SHARD = f"{TRANSFER_DIR}/shards/{{shard}}.parquet"  # generated sentences, one sampling seed
TRANSFER_SET = f"{TRANSFER_DIR}/{{transfer}}.parquet"  # train plus the set's sources, after hygiene
TRANSFER_HYGIENE = f"{TRANSFER_DIR}/{{transfer}}.hygiene.json"  # what hygiene dropped, per source
TRANSFER_STATISTICS_JSON = f"{TRANSFER_DIR}/statistics/{{teacher}}.json"  # generated vs real sentences
TRANSFER_STATISTICS_CSV = f"{TRANSFER_DIR}/statistics/{{teacher}}.csv"
TRANSFER_STATISTICS_MD = f"{TRANSFER_DIR}/statistics/{{teacher}}.md"
SIGNALS = f"{RESULTS}/signals/{{teacher}}/{{task}}/{{transfer}}.safetensors"  # the teacher's outputs students learn

# Stage distillation: one directory per student run, and each experiment's dev selection
STUDENTS = f"{RESULTS}/students"
# {method}: the experiment's entry under `methods` (a registered method's name, or its own: pkd_6 for pkd, mapping [6])
STUDENT_METHOD_DIR = f"{STUDENTS}/{{experiment}}/{{task}}/{{student}}/{{method}}"  # what a named model selects among
STUDENT_RUN_DIR = f"{STUDENT_METHOD_DIR}/{{point}}/seed{{seed}}"  # one grid point and seed
RUN_KEYS = ("task", "student", "method", "point", "seed")  # what names a run's folder below its experiment's
STUDENT_METRICS = f"{STUDENT_RUN_DIR}/{run_files.METRICS}"
STUDENT_MODEL = f"{STUDENT_RUN_DIR}/{run_files.STUDENT_WEIGHTS}"
STUDENT_PREDICTIONS = f"{STUDENT_RUN_DIR}/{run_files.PREDICTIONS}"
STUDENT_CURVES = f"{STUDENT_RUN_DIR}/{run_files.CURVES}"
# a pack of student runs trained as one (kdflow.workflow.student_packs): each member's files in its folder there, named
# as its run's folder is in its method's (<point>/seed<seed>)
STUDENT_PACK_DIR = f"{RESULTS}/student_packs/{{experiment}}/{{task}}/{{student}}/{{method}}/pack{{pack}}"
ASSISTANT_SIGNALS = f"{STUDENT_RUN_DIR}/{run_files.ASSISTANT_SIGNALS}"  # TAKD: an assistant's logits, for its student
SELECTION = f"{RESULTS}/selection/{{experiment}}.json"  # the grid point selected on dev, with the whole grid

# Stage probing
PROBING_ENCODINGS = f"{RESULTS}/probing/encodings/{{model}}/{{probing_task}}.safetensors"  # every layer's vectors
PROBING_SCORES = f"{RESULTS}/probing/scores/{{model}}/{{probing_task}}.json"

# Stage analysis
ANALYSIS_JSON = f"{RESULTS}/analysis/{{task}}.json"  # the prediction analysis of a task's teacher and students
ANALYSIS_CSV = f"{RESULTS}/analysis/{{task}}.csv"
ANALYSIS_MD = f"{RESULTS}/analysis/{{task}}.md"
ATTENTION_JSON = f"{RESULTS}/analysis/attention/{{figure}}.json"  # a student layer's attention over teacher layers
LAYER_OUTPUTS_JSON = f"{RESULTS}/analysis/layer_outputs/{{task}}.json"  # ALP-KD Fig. 4: principal components, distances
LAYER_OUTPUTS_CSV = f"{RESULTS}/analysis/layer_outputs/{{task}}.csv"  # the same, one row per panel, model and example
SENTENCE_PROBES_CSV = f"{RESULTS}/sentence_probes/{{task}}.csv"  # the models' predictions on listed sentences
SENTENCE_PROBES_MD = f"{RESULTS}/sentence_probes/{{task}}.md"
INFERENCE = f"{RESULTS}/inference/{{model}}.json"  # a model's size and CPU speed

# Stage export
EXPORT = f"{RESULTS}/export/{{experiment}}/{{task}}/{{student}}/{{method}}"  # a selected student, for transformers
# its model card, as the report shows it
EXPORT_CARD = f"{RESULTS}/model_cards/{{experiment}}/{{task}}/{{student}}/{{method}}.md"

# Stage reporting: tables, figures and the report's pages
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
PAGES = f"{RESULTS}/report"  # the report's HTML pages
GLUE_SUBMISSION = f"{RESULTS}/glue_submission/{{experiment}}"  # the GLUE test server's files
EXPERIMENT_TABLE_CSV = f"{TABLES}/experiments/{{experiment}}.csv"  # the selected students
EXPERIMENT_GRID_CSV = f"{TABLES}/experiments/{{experiment}}_grid.csv"  # every grid point and seed
EXPERIMENT_TABLE_MD = f"{TABLES}/experiments/{{experiment}}.md"
EXPERIMENT_CURVES_CSV = f"{FIGURES}/experiments/{{experiment}}_curves.csv"
EXPERIMENT_CURVES_PNG = f"{FIGURES}/experiments/{{experiment}}_curves.png"
TEACHER_TABLE_CSV = f"{TABLES}/teachers.csv"  # the teachers and their pseudo-heads
TEACHER_TABLE_MD = f"{TABLES}/teachers.md"
CLAIMS_TABLE_CSV = f"{TABLES}/claims.csv"  # the papers' claims tested on real data
CLAIMS_TABLE_MD = f"{TABLES}/claims.md"
STATUS_CSV = f"{TABLES}/status.csv"  # the works' tables and figures, and what this run has of each
STATUS_MD = f"{TABLES}/status.md"
LEDGER_CSV = f"{TABLES}/ledger.csv"  # the deviations from the papers' protocols
LEDGER_MD = f"{TABLES}/ledger.md"
RUN_DEVIATIONS = f"{TABLES}/deviations/{{result}}.json"  # a paper result's ledger entries as they hold for this run
PAPER_TABLES = f"{TABLES}/papers"  # the papers' tables with kdflow's numbers beside them
PAPER_TABLE_CSV = f"{PAPER_TABLES}/{{paper_table}}.csv"
PAPER_TABLE_MD = f"{PAPER_TABLES}/{{paper_table}}.md"
PAPER_TABLE_TEX = f"{PAPER_TABLES}/{{paper_table}}.tex"
RUNTIME_TABLE_CSV = f"{TABLES}/runtimes.csv"  # thesis Table 4.5
RUNTIME_TABLE_MD = f"{TABLES}/runtimes.md"
RUNTIME_TABLE_TEX = f"{TABLES}/runtimes.tex"
PROBING_TABLE_CSV = f"{TABLES}/probing.csv"  # every probed model, task and layer
PROBING_TABLE_MD = f"{TABLES}/probing.md"
PROBING_THESIS_CSV = f"{TABLES}/probing_thesis.csv"  # the thesis's probing scores beside kdflow's
PROBING_THESIS_MD = f"{TABLES}/probing_thesis.md"
THESIS_TABLE51_CSV = f"{TABLES}/thesis_table51.csv"
THESIS_TABLE51_MD = f"{TABLES}/thesis_table51.md"
PLAN_MEASURED_CSV = f"{TABLES}/plan_measured.csv"  # the cost plan against the hours the jobs took
PLAN_MEASURED_MD = f"{TABLES}/plan_measured.md"
TEACHER_CURVES_CSV = f"{FIGURES}/teacher_curves_{{teacher}}.csv"  # thesis Fig. 4.2
TEACHER_CURVES_PNG = f"{FIGURES}/teacher_curves_{{teacher}}.png"
CLASS_DISTRIBUTION_CSV = f"{FIGURES}/class_distribution.csv"  # thesis Fig. A.1
CLASS_DISTRIBUTION_PNG = f"{FIGURES}/class_distribution.png"
PSEUDO_HEADS_PNG = f"{FIGURES}/pseudo_heads.png"  # Universal-KD Fig. 3 (left)
CONFIDENCE_CORRELATION_PNG = f"{FIGURES}/confidence_correlation_{{task}}.png"  # thesis Fig. 6.5
MISTAKE_OVERLAP_PNG = f"{FIGURES}/mistake_overlap_{{task}}.png"  # thesis Fig. C.2
AVERAGE_CONFIDENCE_PNG = f"{FIGURES}/average_confidence_{{task}}.png"  # thesis Fig. 6.6
AVERAGE_CONFIDENCE_CSV = f"{FIGURES}/average_confidence_{{task}}.csv"
ATTENTION_PNG = f"{FIGURES}/attention_{{figure}}.png"  # Universal-KD Fig. 3, ALP-KD Fig. 3 (from ATTENTION_JSON)
LAYER_OUTPUTS_PNG = f"{FIGURES}/layer_outputs_{{task}}.png"  # ALP-KD Fig. 4 (from LAYER_OUTPUTS_JSON)
PROBING_PNG = f"{FIGURES}/probing.png"  # thesis Fig. 6.1-6.2 by layer index
PROBING_DEPTH_PNG = f"{FIGURES}/probing_relative_depth.png"  # and by relative depth
PROBING_THESIS_PNG = f"{FIGURES}/probing_thesis_{{figure}}.png"  # figure: 6_1, 6_2, 6_3, C_1 (thesis numbering)
THESIS_FIGURE_PNG = f"{FIGURES}/thesis_{{figure}}.png"  # the exploration's figures (thesis Figs. B.1-B.12)
THESIS_FIGURE_CSV = f"{FIGURES}/thesis_{{figure}}.csv"
TRANSFER_STATISTICS_PAGE = f"{PAGES}/transfer_{{task}}_{{teacher}}.html"
ANALYSIS_PAGE = f"{PAGES}/analysis_{{task}}.html"
SENTENCE_PROBES_PAGE = f"{PAGES}/sentence_probes_{{task}}.html"
EXPERIMENT_TABLE_PAGE = f"{PAGES}/experiment_{{experiment}}.html"
TEACHER_TABLE_PAGE = f"{PAGES}/teachers.html"
CLAIMS_TABLE_PAGE = f"{PAGES}/claims.html"
STATUS_PAGE = f"{PAGES}/status.html"
LEDGER_PAGE = f"{PAGES}/ledger.html"
PAPER_TABLE_PAGE = f"{PAGES}/paper_{{paper_table}}.html"
RUNTIME_TABLE_PAGE = f"{PAGES}/runtimes.html"
PROBING_TABLE_PAGE = f"{PAGES}/probing.html"
PROBING_THESIS_PAGE = f"{PAGES}/probing_thesis.html"
THESIS_TABLE51_PAGE = f"{PAGES}/thesis_table51.html"
PLAN_MEASURED_PAGE = f"{PAGES}/plan_measured.html"

# The works' numbered tables and figures a fixed template makes, (paper, "Table N" or "Figure N") -> the template
# (reference/paper_artifacts.csv lists the items). Those the config names, its paper tables, attention maps and the
# exploration's figures, come from the config: kdflow.reporting.works.paper_files.
PAPER_ITEMS = {
    ("alp_kd_passban2021", "Figure 4"): LAYER_OUTPUTS_PNG,
    **{("thesis_sucik2020", item): template for item, template in {
        "Figure 4.2": TEACHER_CURVES_PNG,
        "Table 4.5": RUNTIME_TABLE_CSV,
        "Table 5.1": THESIS_TABLE51_CSV,
        **{f"Figure {figure}": PROBING_THESIS_PNG.format(figure=figure.replace(".", "_"))
           for figure in ("6.1", "6.2", "6.3", "C.1")},
        "Table 6.1": ANALYSIS_JSON,  # the prediction analysis's page holds Tables 6.1 and 6.2
        "Table 6.2": ANALYSIS_JSON,
        "Figure 6.5": CONFIDENCE_CORRELATION_PNG,
        "Figure 6.6": AVERAGE_CONFIDENCE_PNG,
        "Table 6.3": SENTENCE_PROBES_CSV,  # and the sentence probes' Tables 6.3 and C.1
        "Table C.1": SENTENCE_PROBES_CSV,
        "Figure A.1": CLASS_DISTRIBUTION_PNG,
        "Figure C.2": MISTAKE_OVERLAP_PNG,
    }.items()},
}

# The cost plan (before the run) and the plan calibrated on the jobs that ran
PLAN_CSV = f"{RESULTS}/plan.csv"  # per section and rule: jobs, work, estimated hours
PLAN_JOBS_CSV = f"{RESULTS}/plan_jobs.csv"  # each job's estimate and the benchmark file it writes
PILOT_CSV = f"{RESULTS}/pilot.csv"  # the fewest jobs that calibrate the plan
PLAN_MD = f"{RESULTS}/plan.md"
PLAN_PAGE = f"{PAGES}/plan.html"
PLAN_CALIBRATED_CSV = f"{RESULTS}/plan_calibrated.csv"  # per paper table: jobs done, hours spent and left
PLAN_FIGURES_CSV = f"{RESULTS}/plan_figures.csv"  # the plan's figures refit per group of jobs
PLAN_CALIBRATED_JOBS_CSV = f"{RESULTS}/plan_calibrated_jobs.csv"
PLAN_CALIBRATED_MD = f"{RESULTS}/plan_calibrated.md"
PLAN_CALIBRATED_PAGE = f"{PAGES}/plan_calibrated.html"

# Snakemake's record of each job: wall clock, memory, CPU time
BENCHMARKS = f"{RESULTS}/benchmarks"


def benchmark(job: str) -> str:
    """A job's benchmark file: ``job`` is its log's path below ``logs/`` without ``.log`` (``rule/{wildcard}/...``),
    so that every rule's benchmark lies at its log's path (tests/test_workflow.py)."""
    return f"{BENCHMARKS}/{job}.tsv"


def job_usage(benchmark_file: str | Path) -> Path:
    """Beside a job's benchmark file, the CPU time its script measured of itself (kdflow.core.job_setup.rule_job):
    exact where Snakemake's benchmark samples, and misses what a short or delayed job spent between samples."""
    return Path(benchmark_file).with_suffix(".usage.json")

