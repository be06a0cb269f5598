"""The demo end to end (every rule, every paper table and figure), and what reruns in its finished work
directory after a config, code or data edit. The demo runs once, in the module fixture ``demo_run``; conftest.py
starts this file first when the suite runs in parallel."""

import json
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import DEMO, REPO, copy_repo, job_stats, planned_jobs, rule_scripts, run_while_progressing, snakemake
from report_browser import VIEWPORTS, chromium, visit_report
from safetensors import safe_open

from kdflow.distillation.methods.registry import available_methods
from kdflow.reporting.calibration import calibrate, measured_seconds, with_groups
from kdflow.reporting.paper_tables import NOT_IN_PAPER
from kdflow.reporting.pilot import FAMILY, calibrated_jobs
from kdflow.reporting.report_menu import CATEGORIES, category, paper_items, paper_place
from kdflow.reporting.report_search import add_search
from kdflow.reporting.runtime_table import read_benchmark
from kdflow.reporting.works import PAPERS
from kdflow.students.registry import STUDENTS
from kdflow.workflow import replay
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import validate_config
from kdflow.workflow.exploration import with_exploration
from kdflow.workflow.job_settings import student_settings
from kdflow.workflow.provenance import job_closure, script_closure

# What depends on the demo's thesis students: both are probed on 3 tasks, analysed beside their teacher, measured
# for thesis Table 5.2, classify the SST-2 sentence list, and are timed with their transfer set for Table 4.5.
THESIS_STUDENTS_DOWNSTREAM = dict(encode_probing_tasks=2, probe_model=2 * 3, probing_table=1, figure_probing=1,
                                  probing_thesis_table=1, figure_probing_thesis=1, analyse_predictions=1,
                                  figure_analysis=1, measure_inference=2, paper_table=1, classify_sentences=1,
                                  runtime_table=1)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo, run once in a scratch copy of the repository."""
    workdir = copy_repo(tmp_path_factory.mktemp("demo") / "kdflow")
    # the whole demo: about 5 minutes on 2 idle cores, 16 on a busy machine; the limit only catches a hang
    result = snakemake(*DEMO, "--cores", "2", cwd=workdir)
    return workdir, result


@pytest.fixture
def demo_config(demo_run):
    """The demo run's config to edit, and a function that saves it; the original is restored after the test."""
    path = demo_run[0] / "demo/config.yaml"
    original = path.read_text()
    yield yaml.safe_load(original), lambda config: path.write_text(yaml.safe_dump(config))
    path.write_text(original)


@pytest.mark.slow
def test_demo_runs_the_whole_dag(demo_run):
    workdir, result = demo_run
    assert "100%) done" in result.stdout
    config = yaml.safe_load((workdir / "demo/config.yaml").read_text())
    tasks = config["teachers"]["tiny_bert"]["tasks"]
    table = (workdir / paths.TEACHER_TABLE_CSV).read_text()
    for task in tasks:
        metrics = json.loads((workdir / paths.TEACHER_METRICS.format(teacher="tiny_bert", task=task)).read_text())
        assert "dev" in metrics["scores"]
        heads = json.loads((workdir / paths.PSEUDO_HEADS_METRICS.format(teacher="tiny_bert", task=task)).read_text())
        assert len(heads["layers"]) == config["teachers"]["tiny_bert"]["architecture"]["num_hidden_layers"]
        assert f"tiny_bert,{task},teacher" in table and f"tiny_bert,{task},pseudo_head" in table
    assert "# Pseudo-heads of tiny_bert" in (workdir / paths.TEACHER_TABLE_MD).read_text()
    methods, students = set(), set()
    for name, experiment in config["experiments"].items():
        selection = json.loads((workdir / paths.SELECTION.format(experiment=name)).read_text())
        chosen = {(s["student"], s["method"]) for s in selection["selections"]}
        assert chosen == {(st, m) for st in experiment["students"] for m in experiment["methods"]}, name
        assert f"# Experiment {name}" in (workdir / paths.EXPERIMENT_TABLE_MD.format(experiment=name)).read_text()
        methods |= {(spec or {}).get("method", entry) for entry, spec in experiment["methods"].items()}
        students |= {config["students"][student]["type"] for student in experiment["students"]}
        submission = workdir / paths.GLUE_SUBMISSION.format(experiment=name)
        for selection in selection["selections"]:
            server_file = submission / selection["student"] / selection["method"]
            lines = (server_file / "SST-2.tsv").read_text().splitlines()
            assert lines[0] == "index\tprediction" and {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}
    # an experiment with a baseline tests its other methods' held-out seeds against it; the demo's one seed chose
    # kd's and Universal-KD's grid points, so they hold nothing out: their headline is shown, nothing is tested
    table = pd.read_csv(workdir / paths.EXPERIMENT_TABLE_CSV.format(experiment="universal_kd_table2"))
    tested = table.query("compare_to == 'kd'")
    assert set(tested["method"]) == {"no_kd", "universal_kd_il"} and (tested["pairs"] == 0).all()
    assert tested["p"].isna().all() and tested["p_holm"].isna().all()
    kd = table.query("method == 'kd'")
    assert kd["headline"].notna().all() and kd["mean"].isna().all() and (kd["seeds"] == 0).all()
    assert (table.query("method == 'no_kd'")["seeds"] == 1).all()  # no grid: its seed chose nothing, held out
    assert "## Against kd (dev)" in (
        workdir / paths.EXPERIMENT_TABLE_MD.format(experiment="universal_kd_table2")).read_text()
    assert "## ALP-KD: ALP-KD" in (workdir / paths.CLAIMS_TABLE_MD).read_text()  # the committed evidence
    ledger = pd.read_csv(workdir / paths.LEDGER_CSV, keep_default_na=False)  # the deviation ledger
    assert len(ledger) == len(yaml.safe_load((REPO / "reference/deviations.yaml").read_text()))
    assert (ledger.paper != "").all() and (ledger.kdflow != "").all()
    hygiene = json.loads(
        (workdir / paths.TRANSFER_HYGIENE.format(task="sst2", transfer="augmented")).read_text())["sources"]
    assert hygiene["generated"]["read"] == config["generation"]["sampling"]["sentences"]
    assert hygiene["generated"]["kept"] > 0
    assert "Random generated examples" in (
        workdir / paths.TRANSFER_STATISTICS_MD.format(task="sst2", teacher="tiny_bert")).read_text()
    thesis_run = next(workdir.glob(paths.STUDENT_METRICS.format(experiment="thesis_table52", task="sst2", student="*",
                                                                method="*", point="*", seed=0)))
    assert json.loads(thesis_run.read_text())["transfer"]["generated"] == hygiene["generated"]["kept"]
    # the researcher's unlabelled text beside the generated sentences: dev copies dropped, the rest learnt from
    both = json.loads(
        (workdir / paths.TRANSFER_HYGIENE.format(task="sst2", transfer="unlabelled_augmented")).read_text())["sources"]
    assert both["unlabelled"]["read"] == 152 and both["unlabelled"]["in_dev_or_test"] == 2
    assert both["generated"] == hygiene["generated"]
    run = next(workdir.glob(paths.STUDENT_METRICS.format(experiment="unlabelled_text", task="sst2", student="bilstm",
                                                         method="kd", point="*", seed=0)))
    learnt = json.loads(run.read_text())["transfer"]
    assert learnt["set"] == "unlabelled_augmented" and learnt["unlabelled"] == both["unlabelled"]["kept"] == 150
    for job in [workdir / paths.TEACHER_DIR.format(teacher="tiny_bert", task="sst2"),
                workdir / paths.PSEUDO_HEADS_DIR.format(teacher="tiny_bert", task="sst2"),
                workdir / paths.GENERATOR_DIR.format(task="sst2"), thesis_run.parent]:
        curves = pd.read_parquet(job / "curves.parquet")  # the learning curves of every kind of training job
        assert curves.to_dict("records") == json.loads((job / "metrics.json").read_text())["history"], job
        assert (curves.grad_norm_max > 0).all(), job
    assert methods == set(available_methods())  # the demo runs every method and every student type
    assert students == set(STUDENTS)
    check_demo_evidence(workdir, config)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter()  # a second run has nothing to do


@pytest.mark.slow
def test_the_demos_pages_and_cards_describe_the_demo_and_print_no_nan(demo_run):
    """Issue 69: every paper-table page of the demo says it is a demonstration; no page or card prints "nan";
    where a page's deviation section speaks in kdflow's words, it names no epoch count the demo did not run (the
    ledger's "Students train for 5 epochs." is config.yaml's); the cards claim to reproduce nothing."""
    workdir, _ = demo_run
    ran = {int(value) for value in re.findall(r"\bepochs: (\d+)", (workdir / "demo/config.yaml").read_text())}
    pages = sorted((workdir / paths.PAPER_TABLES).glob("*.md"))
    cards = sorted((workdir / paths.RESULTS / "model_cards").rglob("*.md"))
    assert pages and cards
    for path in sorted((workdir / paths.RESULTS).rglob("*.md")):  # every page, the cards and the tables' Markdown
        text = path.read_text()
        assert not re.search(r"\bnan\b", text), f"{path}: nan"
        kdflows_words = re.findall(r"kdflow:\*? (.*?) \*?Paper:", text)  # pages and cards
        said = {int(number) for words in kdflows_words for number in re.findall(r"(\d+) epochs", words)}
        if "model_cards" not in path.parts:  # a card quotes the ledger as written for config.yaml, and says so
            assert said <= ran, f"{path} states {sorted(said - ran)} epochs; the demo ran {sorted(ran)}"
    for path in pages:
        assert "A demonstration, not a result" in path.read_text(), path
    for path in cards:
        text = path.read_text()
        assert "at a demonstration's scale, and reproduces nothing of it." in text, path
        assert "It reproduces" not in text, path


def check_demo_evidence(workdir, config):
    """Probing, prediction analysis, paper tables, figures: every artifact of the demo's evidence stage."""
    probing = pd.read_csv(workdir / paths.PROBING_TABLE_CSV)
    probes = probing[probing.kind == "probe"]
    assert set(probes.model) == set(config["probing"]["models"]) and set(probing.task) == set(config["probing"]["tasks"])
    assert set(probes[probes.model == "tiny_bert_sst2"].layer) == set(range(5))  # embeddings + 4 layers
    assert {"majority", "morphology"} <= set(probing.kind)
    analysis = json.loads((workdir / paths.ANALYSIS_JSON.format(task="sst2")).read_text())
    assert analysis["models"] == ["tiny_bert_sst2", "lstm_s_sst2", "bert_s_sst2"] and analysis["n_examples"] > 0
    check_demo_prediction_analysis(workdir, analysis, config)
    references = {kind: pd.read_csv(REPO / f"reference/{file}.csv", dtype={"table": str})
                  for kind, file in (("scores", "paper_results"), ("hyperparameters", "selected_hyperparameters"))}
    for name, spec in config["paper_tables"]["tables"].items():
        table = pd.read_csv(workdir / paths.PAPER_TABLE_CSV.format(paper_table=name), dtype={"table": str})
        reference = references[spec.get("kind", "scores")]
        paper_rows = reference[(reference.source == spec["source"]) & (reference.table == str(spec["table"]))]
        added = table[table.paper_note == NOT_IN_PAPER]  # kdflow's own rows: ONNX Runtime's after each CPU time
        assert len(table) - len(added) == len(paper_rows), name  # a row for every paper row
        cpu_times = (paper_rows.metric == "ms_per_example_cpu").sum() if "metric" in paper_rows else 0
        assert len(added) == cpu_times and added.paper.isna().all(), name
        assert (workdir / paths.PAPER_TABLE_TEX.format(paper_table=name)).read_text().count("\\toprule") >= 1
        assert "—" in (workdir / paths.PAPER_TABLE_MD.format(paper_table=name)).read_text()  # kdflow lacks most cells
    ukd = pd.read_csv(workdir / paths.PAPER_TABLE_CSV.format(paper_table="universal_kd_table2"))
    assert set(ukd[(ukd.task == "sst2") & ukd.method.isin(["pkd", "alp"])].kdflow_from) == {"alp_kd_table2"}
    selected = pd.read_csv(workdir / paths.PAPER_TABLE_CSV.format(paper_table="universal_kd_table7")).query(
        "task == 'sst2'")
    kdflow = selected.set_index("hyperparameter").kdflow  # the selected point of the demo's grid over beta
    defaults = config["student_defaults"]
    assert (kdflow.learning_rate, kdflow.batch_size) == (defaults["learning_rate"], defaults["batch_size"])
    assert kdflow.beta in (0.3, 0.7)
    thesis = pd.read_csv(workdir / paths.PAPER_TABLE_CSV.format(paper_table="thesis_table52"))
    measured = thesis[(thesis.task == "sst2") & (thesis.metric == "params_millions_non_embedding")]
    assert measured.kdflow.notna().all() and (measured.kdflow > 0).all()
    onnx = thesis[(thesis.task == "sst2") & (thesis.metric == "ms_per_example_onnxruntime_cpu")]  # issue 55
    assert len(onnx) == 3 and (onnx.kdflow > 0).all() and onnx.paper.isna().all()
    check_thesis_teacher_curves_and_runtimes(workdir, config)
    for figure in ["pseudo_heads", "probing", "probing_relative_depth", "confidence_correlation_sst2",
                   "mistake_overlap_sst2", "average_confidence_sst2", "attention_universal_kd_figure3",
                   "attention_alp_kd_figure3", "layer_outputs_sst2", "teacher_curves_tiny_bert", "class_distribution"]:
        assert (workdir / f"{paths.FIGURES}/{figure}.png").read_bytes()[:4] == b"\x89PNG", figure
    classes = pd.read_csv(workdir / paths.CLASS_DISTRIBUTION_CSV)  # thesis Fig. A.1
    assert list(dict.fromkeys(classes.task)) == ["cola", "sst2", "mrpc", "rte", "sara"]  # STS-B has no classes
    for (task, split), rows in classes.groupby(["task", "split"]):
        meta = json.loads((workdir / paths.DATA.format(task=task) / "meta.json").read_text())
        assert rows["count"].sum() == meta["splits"][split] and split in meta["labelled_splits"]
    attention = json.loads((workdir / paths.ATTENTION_JSON.format(figure="universal_kd_figure3")).read_text())
    assert [record["method"] for record in attention] == ["universal_kd_il", "alp"]
    assert {record["student_layer"] for record in attention} == {2}  # the penultimate of 3 layers
    check_demo_exploration(workdir, config)


@pytest.fixture(scope="module")
def demo_report(demo_run):
    workdir, _ = demo_run
    snakemake(*DEMO, "--report", "report.html", cwd=workdir)
    add_search(workdir / "report.html")  # as `make report` does
    return workdir / "report.html"


@pytest.mark.slow
def test_the_report_files_every_page_under_its_paper_in_the_papers_order(demo_report):
    report = demo_report.read_text()

    def shown(text: str) -> bool:  # the report embeds its menus as JSON, non-ASCII letters escaped
        return text in report or json.dumps(text)[1:-1] in report

    for name in CATEGORIES:
        assert shown(category(name)), name
    for paper, item in [("alp_kd_passban2021", "Table 2"), ("alp_kd_passban2021", "Figure 4"),
                        ("universal_kd_wu2021", "Figure 3"), ("thesis_sucik2020", "Table 4.5"),
                        ("thesis_sucik2020", "Figure B.11")]:
        assert shown(paper_place(paper, item)["subcategory"]), (paper, item)
    for gone in ["Paper tables", "thesis_table45 (runtimes)"]:
        assert gone not in report


@pytest.mark.slow
@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_report_in_a_browser_shows_every_entry_and_a_status_page_that_agrees_with_the_results(demo_report, size):
    """Issues 32 and 52: the demo's report in headless Chromium at 1400x900 and 1024x768 (tests/report_browser.py),
    the sidebar as Snakemake leaves it: nothing above or left of where the content pane scrolls to, no table wider
    than its frame, figures shown at 0.7x or more at 1400, one sidebar width, whole breadcrumbs, the page (or figure)
    before its CSV, and kdflow's search finding a paper table by its path, its label, and its work and label.
    Screenshots of the landing page, a paper table, an experiment, the ledger and the tallest figure, at each size,
    go to test-artefacts/report/."""
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's)")
    pytest.importorskip("playwright", reason="Playwright for Python drives the browser (the test extra has it)")
    artefacts = REPO / "test-artefacts" / "report"
    artefacts.mkdir(parents=True, exist_ok=True)
    viewport = VIEWPORTS[size]
    visit = visit_report(demo_report, viewport, artefacts, keep={
        "landing", "search", "paper_alp_kd_table2.html", "experiment_alp_kd_table2.html", "ledger.html", "status.html",
        "probing_thesis_6_1.png"})
    assert visit["errors"] == []
    numbered = {category(name): name for name in CATEGORIES}
    assert set(visit["menu"]) <= set(numbered), "a category outside the report's order"
    assert list(visit["menu"]) == [name for name in numbered if name in visit["menu"]]
    for shown, subcategories in visit["menu"].items():
        paper = {title: key for key, title in PAPERS.items()}.get(numbered[shown])
        if paper is not None:  # a work's items in the paper's order, tables first
            order = [paper_place(paper, item)["subcategory"] for item in paper_items(paper)]
            assert subcategories == [name for name in order if name in subcategories]
    landing = visit["landing"]
    assert landing["height"] <= viewport["height"], "the landing page's rule graph scrolls inside one screen"
    assert landing["above"] == landing["left"] == 0, landing
    widths = visit["sidebar"]
    assert max(widths.values()) - min(widths.values()) <= 1, f"the sidebar changes width: {widths}"
    assert max(widths.values()) <= viewport["width"] / 3 + 1, widths
    crumbs = visit["crumbs"]
    assert all(height <= 1.5 * crumbs["line"] for _, height in crumbs["crumbs"]), f"a breadcrumb wraps: {crumbs}"
    # the deepest trail names its category and subcategory without the numbers that order the menus (search.js)
    assert not [name for name, _ in crumbs["crumbs"] if re.match(r"\d+ ", name)], crumbs
    assert len([name for name, _ in crumbs["crumbs"] if name.strip()]) >= 3, crumbs  # Results, category, subcategory
    assert set(visit["first_views"].values()) <= {"page", "figure"}, visit["first_views"]
    assert visit["first_views"], "no listing offers the page and its CSV as one entry"
    # kdflow's search (report/search.js): the paper table by its path, its label, and its work and label together
    for term, shown in visit["searches"].items():
        assert paths.PAPER_TABLE_PAGE.format(paper_table="alp_kd_table2") in shown["paths"], (term, shown)
        assert "ALP-KD (Passban et al. 2021) · ALP-KD Table 2 · page" in shown["rows"], (term, shown)
    for path, entry in visit["entries"].items():
        assert entry["category"] in numbered, path
        # the info panel: a caption, no raw job parameters; the menu listing it: at most a third of the window
        assert "DESCRIPTION" in entry["info"].upper() and "JOB PARAMETERS" not in entry["info"].upper(), path
        assert entry["listing_sidebar_width"] <= viewport["width"] / 3 + 1, (path, entry["listing_sidebar_width"])
        if entry["kind"] == "download":
            continue
        assert entry["above"] == entry["left"] == 0, f"{path}: {entry['above']} px above, {entry['left']} px left"
        if entry["kind"] == "html":
            assert entry["text"] > 0, f"{path}: an empty page"
            # at most 1 px over: sub-pixel rounding
            assert entry["overflow"] <= 1, f"{path}: {entry['overflow']} px wider than its room"
            # a wide table scrolls in its box at both sizes, never a card per row; a page's own links resolve
            assert entry["cards"] == 0, f"{path}: {entry['cards']} tables shown as cards"
            assert entry["broken_links"] == [], f"{path}: links to no section: {entry['broken_links']}"
            assert entry["unknown_results"] == [], f"{path}: links to no entry: {entry['unknown_results']}"
        else:
            assert entry["natural_width"] > 0 and entry["shown_width"] > 0, f"{path}: a broken image"
            assert "A demonstration, not a result" in entry["info"], f"{path}: no demo line in its caption"
            if viewport["width"] >= 1400:
                scale = entry["shown_width"] / entry["natural_width"]
                assert scale >= 0.7, f"{path}: shown at {scale:.2f}x"
    ledger = next(entry for path, entry in visit["entries"].items() if path.endswith("ledger.html"))
    assert ledger["links"] >= 3, "the ledger's contents link its sections"
    status = next(entry for path, entry in visit["entries"].items() if path.endswith("status.html"))
    assert len(status["result_links"]) >= 10, "the status page opens the items it lists"
    downloads = {(entry["category"], entry["subcategory"]) for path, entry in visit["entries"].items()
                 if path.endswith(".csv") and entry["kind"] == "download" and entry["data_uri_length"] > 100}
    for path, entry in visit["entries"].items():  # every page, and its CSV to download beside it
        if entry["kind"] == "html":
            assert (entry["category"], entry["subcategory"]) in downloads, f"{path}: no CSV beside it"
    workdir = demo_report.parent
    status = pd.read_csv(workdir / paths.STATUS_CSV, keep_default_na=False)
    for row in status.itertuples():
        files = [workdir / name for name in row.files.split(", ") if name]
        if row.status.endswith(" cells"):
            table = pd.read_csv(files[0]).query("paper_note != @NOT_IN_PAPER")  # the paper's cells, not kdflow's
            assert row.status == f"{table.kdflow.notna().sum()}/{len(table)} cells", row
        elif row.status == "made":
            assert files and all(path.exists() for path in files), row
        else:
            assert files == [], row
    counts = status.status.str.replace(r"^\d+/\d+ cells$", "paper table", regex=True).value_counts()
    assert counts["made"] > 0 and counts["paper table"] > 0 and counts["not a result"] > 0


def check_demo_prediction_analysis(workdir, analysis, config):
    """Thesis §6.2 on the demo: P4, P5 and P8's examples, Fig. 6.6's numbers, and the sentence lists (Tables 6.3
    and C.1)."""
    k, n = config["analysis"]["sst2"]["examples"], analysis["n_examples"]
    drawn = analysis["one_student_right"]
    assert drawn["seed"] == 42 and len(drawn["examples"]) == min(k, drawn["candidates"])
    for record in drawn["examples"]:  # the teacher right, exactly one student right
        right = [record[f"{m}:prediction"] == record["gold"] for m in ("lstm_s_sst2", "bert_s_sst2")]
        assert record["tiny_bert_sst2:prediction"] == record["gold"] and sum(right) == 1
        assert record["right_student"] == ("lstm_s_sst2" if right[0] else "bert_s_sst2")
    gap = analysis["confidence_gap"]
    assert (gap["first"], gap["second"]) == ("lstm_s_sst2", "bert_s_sst2")
    assert len(gap["largest"]) == len(gap["smallest"]) == min(k, n)
    largest = [record["gap"] for record in gap["largest"]]
    assert largest == sorted(largest, reverse=True) and largest[0] >= gap["smallest"][0]["gap"]
    p8 = analysis["teacher_confidence_gap"]
    assert len(p8) == min(k, n) and all(a["gap"] >= b["gap"] for a, b in zip(p8, p8[1:]))
    page = (workdir / paths.ANALYSIS_MD.format(task="sst2")).read_text()
    for heading in ["(P4)", "unconfident student (P5)", "unconfident students (P8)"]:
        assert heading in page, heading
    average = pd.read_csv(workdir / paths.AVERAGE_CONFIDENCE_CSV.format(task="sst2")).set_index(["model", "subset"])
    for model in analysis["models"]:  # Fig. 6.6's bars are the analysis's means and standard deviations
        summary = analysis["per_model"][model]
        assert average.loc[(model, "all"), "mean_confidence"] == pytest.approx(summary["mean_confidence"])
        assert average.loc[(model, "hits"), "n"] == summary["n_hits"]
    thesis = pd.read_csv(workdir / paths.SENTENCE_PROBES_CSV.format(task="cola"))  # the default list: thesis Table C.1
    assert len(thesis) == 70 and thesis.original.sum() == 21
    assert thesis.columns[4:].tolist() == [
        "tiny_bert_cola:prediction", "tiny_bert_cola:confidence", "reported:bert_t:prediction",
        "reported:bert_t:confidence", "reported:bert_s:prediction", "reported:bert_s:confidence",
        "reported:lstm_s:prediction", "reported:lstm_s:confidence"]
    assert set(thesis["tiny_bert_cola:prediction"]) <= {"unacceptable", "acceptable"}
    assert thesis["tiny_bert_cola:confidence"].between(0.5, 1).all()
    assert thesis["reported:bert_t:prediction"].count() == 7  # Table 6.3
    pounding = thesis.set_index("sentence").loc["my heart is pounding me."]
    assert (pounding["reported:bert_t:prediction"], pounding["reported:bert_t:confidence"]) == ("unacceptable", 0.89)
    assert "| tiny_bert_cola | 70 | 70 |" in (workdir / paths.SENTENCE_PROBES_MD.format(task="cola")).read_text()
    # the demo's own list, on the SST-2 models
    own = pd.read_csv(workdir / paths.SENTENCE_PROBES_CSV.format(task="sst2"))
    assert len(own) == 9 and all(f"{m}:confidence" in own for m in config["sentence_probes"]["sst2"]["models"])


def check_thesis_teacher_curves_and_runtimes(workdir, config):
    """Thesis Fig. 4.2's data: every dev evaluation of the demo teacher on each of its tasks, also within epochs;
    thesis Table 4.5: the demo's SST-2 pipeline timed step by step beside every row of the thesis's."""
    curves = pd.read_csv(workdir / paths.TEACHER_CURVES_CSV.format(teacher="tiny_bert"))
    assert list(dict.fromkeys(curves.task)) == config["teachers"]["tiny_bert"]["tasks"]
    sst2 = curves[curves.task == "sst2"]
    history = json.loads(
        (workdir / paths.TEACHER_METRICS.format(teacher="tiny_bert", task="sst2")).read_text())["history"]
    assert list(sst2.step) == [record["step"] for record in history]
    assert list(sst2.dev_score) == pytest.approx([100 * record["dev_accuracy"] for record in history])
    assert len(sst2) > config["teacher_defaults"]["epochs"] and (sst2.metric == "accuracy").all()
    runtimes = pd.read_csv(workdir / paths.RUNTIME_TABLE_CSV)
    measured = runtimes[runtimes.kdflow_jobs.notna()].set_index("step")
    assert list(measured.index) == ["data_preparation", "teacher_finetuning", "pseudo_heads", "gpt2_finetuning",
                                    "augmentation_sampling", "transfer_set_assembly", "teacher_logits",
                                    "lstm_student_training", "bert_student_training"]
    assert set(measured.task) == {"sst2"} and (measured.kdflow_hours > 0).all()
    assert measured.kdflow_jobs.augmentation_sampling == config["generation"]["sampling"]["shards"]
    assert measured.kdflow_runs.lstm_student_training == len(config["experiments"]["thesis_table52"]["seeds"])
    reference = pd.read_csv(REPO / "reference/thesis_runtimes.csv")
    assert runtimes.thesis_hours.notna().sum() == len(reference)
    assert "1x GTX TITAN X or RTX 2080 Ti" in (workdir / paths.RUNTIME_TABLE_MD).read_text()


def check_demo_exploration(workdir, config):
    """Thesis Chapter 5 / Appendix B, reduced (demo/config.yaml's `exploration`): every figure with the data behind
    it, covering each study's points, and Table 5.1 with kdflow's best beside the thesis's choice."""
    exploration = config["exploration"]
    for figure in exploration["figures"]:
        assert (workdir / paths.THESIS_FIGURE_PNG.format(figure=figure)).read_bytes()[:4] == b"\x89PNG", figure
    lr, embeddings = (pd.read_csv(workdir / paths.THESIS_FIGURE_CSV.format(figure=figure)) for figure in ("B.1", "B.6"))
    assert set(lr.point) == {"lr0.001", "adadelta"} and set(lr[lr.kind == "best"].point) == {"lr0.001", "adadelta"}
    assert set(embeddings.point) == {"word2vec_multichannel", "wordpiece_non_static"}
    smoothed = lr[lr.kind == "smoothed"]
    assert (smoothed.groupby("point").epoch.max() == 3).all()  # 3 epochs, dev every 3 steps and at epoch ends
    best = lr[lr.kind == "best"].set_index("point").best
    peaks = smoothed.groupby("point").smoothed.max().reindex(best.index)
    assert (best >= peaks - 1e-6).all()  # the × is a single evaluation: no average of them is above it
    sizes = pd.read_csv(workdir / paths.THESIS_FIGURE_CSV.format(figure="B.11"),
                        dtype={"width": str, "depth": str}).set_index("width")
    assert list(sizes.index) == ["1/2", "1"] and sizes.best_dev.notna().all()
    assert list(sizes.hidden_size) == [16, 32] and 0 < sizes.parameters["1/2"] < sizes.parameters["1"]
    explosion = pd.read_csv(workdir / paths.THESIS_FIGURE_CSV.format(figure="B.8"))
    assert (explosion.grad_norm_max > 0).all() and explosion.lr.max() > explosion.lr.iloc[0]  # 1 epoch's warm-up
    assert pd.read_csv(workdir / paths.THESIS_FIGURE_CSV.format(figure="B.9")).learning_slows.sum() == 1
    table = pd.read_csv(workdir / paths.THESIS_TABLE51_CSV).set_index(["student", "parameter", "task"])
    assert table.loc[("lstm_s", "learning rate", "sst2"), "kdflow_best"] in ("η=1e-3", "adadelta")
    chosen = table.loc[("lstm_s", "embeddings", "sst2")]
    assert chosen.thesis_chosen == "word2vec, multichannel" and chosen.kdflow_best in (
        "word2vec, multichannel", "wordpiece, non-static")
    assert table.loc[("bert_s", "batch size", "cola")].isna().kdflow_best  # the demo explores no CoLA row
    assert "Differences from the paper's protocol" in (workdir / paths.THESIS_TABLE51_MD).read_text()


# Rules whose measured time the plan does not model: it counts their start-up alone.
UNMODELLED = {"figure_probing_thesis": "draws four multi-panel figures of the thesis's 1,700 probing scores",
              "figure_teacher_curves": "draws a panel with a learning-rate axis per task: 1.4 CPU-s beyond its start-up, "
                                       "5 CPU-s in all, at the 5-s line",
              "plan": "builds the demo's DAG through Snakemake's API (kdflow.workflow.dag_jobs; 4 to 6 CPU-s)",
              "claims_table": "tests every claim of the committed evidence record, resampling its dev examples: grows with the record"}


def unsampled_cpu_seconds(benchmarks: Path) -> float:
    """At most how many CPU seconds the benchmark files under ``benchmarks`` miss, where no job's own CPU time
    stands beside them (a job whose script does not end through kdflow.core.job_setup.rule_job). Snakemake 9.27 samples a job's
    processes at 0, 0.5, ..., 15 s and then every 30 s (snakemake/benchmark.py) and cannot sample them once they have
    ended, so a job's cpu_time lacks what it spent after its last sample: on a loaded machine, where a 10-s job takes
    28 s of wall clock, up to 13 s of each of its cores (0.5 s of slack for the sampler's own delays)."""
    missed = 0.0
    for path in benchmarks.rglob("*.tsv"):
        if read_benchmark(path)["cpu_measured"] == "job":
            continue  # the job's own CPU time, exact
        wall = read_benchmark(path)["seconds"]
        last = wall // 0.5 * 0.5 if wall <= 15 else 15 + (wall - 15) // 30 * 30
        missed += (wall - last + 0.5) * os.cpu_count()
    return missed


# How much slower or faster than the plan's reference/*.csv machine a run of the demo may be, in CPU seconds. The
# tests beside the demo inflate every job's CPU time alike (shared caches and cores): on the 2-core CI, with the
# suite's other tests running, the demo measured 1.38 times the plan (every rule 1.2-2.3), and unscaled
# figure_experiment_curves (2.28) and paper_table (2.04) left a 2x band they keep, at 1.65 and 1.48, against it.
MACHINE_FACTOR = (0.5, 3.0)


# The calibration's bound on the demo (issue 34): its jobs are start-up-bound, and one factor per rule family cannot
# follow the rules within a family, whose measured over planned CPU time ranges from 0.54 (glue_submission) to 0.94
# (figure_experiment_curves) on the demo; the later experiments' mix of rules differs from the earlier ones', and
# measured +12% on this machine (the uncalibrated plan: +40%); a job's own spread (about 10% within a rule)
# averages out over the 23 jobs.
CALIBRATION_BOUND = 0.25


@pytest.mark.slow
def test_the_plan_calibrated_on_the_demos_first_experiments_predicts_the_others(demo_run):
    """Issue 34, item 3: the plan's figures refit (kdflow.reporting.calibration) on the CPU time of every demo job
    but those of the later half of its experiments, which it then predicts: the error of their total against what
    they measured is within CALIBRATION_BOUND, and `make plan`'s page (rule plan_calibrated) builds from the run."""
    workdir, _ = demo_run
    jobs = pd.read_csv(workdir / paths.PLAN_JOBS_CSV, keep_default_na=False)
    measured = measured_seconds(jobs, root=workdir)
    experiments = list(yaml.safe_load((workdir / "demo/config.yaml").read_text())["experiments"])
    later = experiments[len(experiments) // 2:]
    held_out = jobs.section.isin(later)
    per_job, figures, progress = calibrate(jobs, measured.where(~held_out), {"later experiments": later})
    actual = measured[held_out].sum()
    calibrated, planned = per_job.calibrated_seconds[held_out].sum(), jobs.seconds[held_out].sum()
    print(f"{held_out.sum()} held-out jobs: measured {actual:.1f} CPU-s, calibrated {calibrated:.1f} "
          f"({calibrated / actual - 1:+.1%}), plan {planned:.1f} ({planned / actual - 1:+.1%})")
    print(figures.to_string())
    assert held_out.sum() >= 20 and abs(calibrated / actual - 1) <= CALIBRATION_BOUND
    assert progress.iloc[0].done == 0 and progress.iloc[0].cpu_hours_left == pytest.approx(calibrated / 3600)
    snakemake(*DEMO, "--cores", "1", paths.PLAN_CALIBRATED_MD, cwd=workdir)
    page = (workdir / paths.PLAN_CALIBRATED_MD).read_text()
    done = int(pd.read_csv(workdir / paths.PLAN_CALIBRATED_CSV).set_index("paper_table").loc["all jobs", "done"])
    assert done >= len(jobs) - 2 and f"{done} of {len(jobs)} jobs have run" in page  # but plan_measured, status_page
    assert "fitted on" in pd.read_csv(workdir / paths.PLAN_FIGURES_CSV).figures.str.cat()


@pytest.mark.slow
def test_the_pilot_measures_every_group_of_the_demo_plan_and_the_plan_refit_on_it_predicts_the_other_jobs(demo_run):
    """Issue 34, item 2: the demo's pilot (results/pilot.csv, rule plan) takes a job of every rule and model family
    of the plan (tables and figures aside) with under a third of its jobs, and the plan calibrated on the pilot's
    jobs alone predicts the CPU time of all the others, tables included, within CALIBRATION_BOUND (measured: 48
    pilot jobs, the other 120 within 11%)."""
    workdir, _ = demo_run
    jobs = pd.read_csv(workdir / paths.PLAN_JOBS_CSV, keep_default_na=False)
    pilot = pd.read_csv(workdir / paths.PILOT_CSV, keep_default_na=False)
    groups = lambda frame: set(frame[FAMILY].itertuples(index=False, name=None))  # noqa: E731
    assert groups(calibrated_jobs(with_groups(jobs))) <= groups(pilot) and len(pilot) < len(jobs) / 3
    in_pilot = jobs.benchmark.isin(pilot.benchmark)
    assert in_pilot.sum() == len(pilot)
    assert f"The pilot: {len(pilot)} of {len(jobs)} jobs" in (workdir / paths.PLAN_MD).read_text()
    measured = measured_seconds(jobs, root=workdir)
    per_job, _, _ = calibrate(jobs, measured.where(in_pilot), {})
    others = ~in_pilot & measured.notna()
    actual, predicted = measured[others].sum(), per_job.calibrated_seconds[others].sum()
    print(f"pilot: {len(pilot)} jobs, {measured[in_pilot].sum():.1f} CPU-s; the other {others.sum()} jobs: measured "
          f"{actual:.1f} CPU-s, predicted {predicted:.1f} ({predicted / actual - 1:+.1%}), plan "
          f"{jobs.seconds[others].sum():.1f}")
    assert others.sum() >= 100 and abs(predicted / actual - 1) <= CALIBRATION_BOUND


@pytest.mark.slow
def test_the_demo_plan_is_within_twice_the_measured_time_of_every_rule(demo_run):
    """Issues 16 and 32: the report's plan against the run (rule plan_measured, results/tables/plan_measured.csv):
    every job of the plan ran, and the plan's CPU estimate of each rule is within 2x of the CPU seconds Snakemake
    measured, summed over the rule's jobs, for every rule that took 5 CPU seconds or more in all (shorter ones are
    a start-up of 2 to 3 s a job, modelled as such) but the UNMODELLED ones and those the plan prices as a start-up
    alone, once the plan is scaled by this
    machine's factor (measured over planned CPU seconds of all those rules, within MACHINE_FACTOR). CPU seconds, not
    wall-clock seconds: the plan estimates a job alone on its core, and on a machine shared with other work the
    wall clock also counts the waits for a core. Snakemake's CPU seconds are a lower bound (it samples; see
    unsampled_cpu_seconds), so a rule is too slow if they are over 2x, too fast if their upper bound is under 0.5x."""
    workdir, _ = demo_run
    table = pd.read_csv(workdir / paths.PLAN_MEASURED_CSV)
    per_rule = table.groupby("rule").sum(numeric_only=True)
    print(per_rule.to_string(float_format="%.5f"))
    assert set(per_rule.index) == set(pd.read_csv(workdir / paths.PLAN_CSV).rule)
    built_last = ["status_page", "plan_measured"]  # built beside this table: their benchmarks may not exist yet
    assert (per_rule.ran == per_rule.jobs).drop(built_last).all()
    assert per_rule.loc["plan_measured", "ran"] == 0
    # Rules the plan prices as their start-up alone are left out: a start-up's CPU seconds (imports: page faults,
    # cache misses) grow more on a loaded machine than computation does, so the factor fitted on the others does not
    # scale them (figure_probing, start-up only, took 5.1 times its plan under the suite's 3 workers on 2 cores
    # while the machine factor was 2.0). Their model is the measured start-up (reference/startup.csv).
    plan = pd.read_csv(workdir / paths.PLAN_CSV)
    startup_only = set(plan.rule) - set(plan.rule[plan.source != "start-up only"])
    timed = per_rule[(per_rule.cpu_hours * 3600 >= 5) & ~per_rule.index.isin(UNMODELLED)
                     & ~per_rule.index.isin(startup_only)]
    assert len(timed) >= 10 and {"finetune_teacher", "distill_student", "probe_model"} <= set(timed.index)
    machine = timed.cpu_hours.sum() / timed.ran_planned_hours.sum()
    ratio = timed.cpu_hours / timed.ran_planned_hours / machine
    # what Snakemake's sampling may have missed: the measured CPU is a lower bound, this its upper one
    unsampled = pd.Series({rule: unsampled_cpu_seconds(workdir / paths.BENCHMARKS / rule) for rule in timed.index})
    most = (timed.cpu_hours + unsampled / 3600) / timed.ran_planned_hours / machine
    print(f"this machine against the plan's: {machine:.2f}; each rule against that (and at most, with the CPU "
          f"Snakemake's sampling may have missed):\n{pd.DataFrame({'ratio': ratio, 'at_most': most}).round(2)}")
    assert MACHINE_FACTOR[0] <= machine <= MACHINE_FACTOR[1], machine
    assert (ratio <= 2).all() and (most >= 0.5).all(), ratio[(ratio > 2) | (most < 0.5)]
    page = (workdir / paths.PLAN_MEASURED_MD).read_text()
    assert f"{int(table.ran.sum())} of {int(table.jobs.sum())} planned jobs have run" in page


@pytest.mark.slow
def test_changing_one_teacher_hyperparameter_reruns_exactly_its_jobs(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["teachers"]["tiny_bert"]["task_hyperparameters"]["rte"] = {"learning_rate": 5.0e-4}
    save(config)
    result = snakemake("-n", *DEMO, cwd=workdir).stdout
    assert job_stats(result) == Counter(  # and the cost plan, which every config edit changes
        finetune_teacher=1, evaluate_teacher=1, train_pseudo_heads=1, evaluate_pseudo_heads=1, teacher_table=1, figure_pseudo_heads=1,
        figure_teacher_curves=1, plan=1, all=1, status_page=1, plan_measured=1,
        # the pages that compare the teacher's settings with the papers' (all but probing's)
        run_deviations=11, paper_table=10, exploration_table=1,
    )
    assert re.search(r"rule finetune_teacher:\n(.*\n)*?\s+wildcards: teacher=tiny_bert, task=rte", result)
    assert "Params have changed since last execution" in result


@pytest.mark.slow
def test_changing_one_method_option_or_adding_a_seed_reruns_exactly_those_students(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["experiments"]["alp_kd_table3"]["methods"]["pkd_1"]["mapping"] = [2]
    config["experiments"]["thesis_table52"]["seeds"].append(7)
    save(config)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(  # alp_kd_table3's, and ALP-KD Fig. 3 of its ALP student
        distill_student=1 + 2, select_students=2, experiment_table=2, figure_experiment_curves=2, glue_submission=2,
        paper_table=1, run_deviations=2,  # ALP-KD Table 3's and thesis Table 5.2's settings against the papers'
        compute_attention_maps=1, figure_attention_maps=1, plan=1, all=1, status_page=1, plan_measured=1,
    ) + Counter(THESIS_STUDENTS_DOWNSTREAM)


@pytest.mark.slow
def test_changing_the_sampling_reruns_the_transfer_set_and_only_the_students_learning_from_it(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["generation"]["sampling"]["sentences"] += 10
    save(config)
    seeds = len(config["experiments"]["thesis_table52"]["seeds"])
    # the augmented set and the set of unlabelled + generated sentences, the students learning from each (also
    # the two students from scratch by two methods, one seed), and the input vectors of the word-level LSTM_S (its vocabulary is
    # the transfer set's words), each probed on 3 tasks
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(
        sample_transfer_shard=2, build_transfer_set=2, compute_teacher_signals=2, transfer_statistics=1,
        distill_student=2 * seeds + 2 * 2 + 1, select_students=3, experiment_table=3, figure_experiment_curves=3,
        glue_submission=3, plan=1,
        all=1, status_page=1, plan_measured=1,
    ) + Counter(THESIS_STUDENTS_DOWNSTREAM) + Counter(encode_probing_tasks=2 + 1, probe_model=(2 + 1) * 3) + Counter(
        run_deviations=12, paper_table=9, exploration_table=1)  # every page that states the generation's settings


@pytest.mark.slow
@pytest.mark.parametrize("edited", ["kdflow/distillation/methods/hidden_methods.py", "kdflow/students/recurrent.py",
                                    "kdflow/transfer/generation.py", "kdflow/reporting/figures/style.py",
                                    "kdflow/training/loop.py"],
                         ids=["method", "student", "generator", "figures", "training-loop"])
def test_editing_code_reruns_exactly_the_jobs_that_run_it(demo_run, demo_config, edited):
    """A code edit reruns the jobs whose code holds the edited file, and what depends on them: the same plan as
    forcing those jobs to run. A student job's code holds its own student type's and method's modules of the
    registries alone (provenance.job_closure): an edit of the hidden-space methods reruns their students, not KD's.
    A comment reruns nothing (a file counts by its syntax tree)."""
    workdir, _ = demo_run
    edited_path = (REPO / edited).resolve()
    forced = [rule for rule, script in rule_scripts().items()
              if rule != "distill_student" and edited_path in script_closure(REPO / "scripts" / script)]
    config = demo_config[0]
    validate_config(config, REPO / "schemas/config.schema.yaml")
    config |= with_exploration(config)  # the hyperparameter exploration's experiments, as the workflow adds them
    students, running = 0, []
    for metrics in sorted((workdir / paths.STUDENTS).glob("*/*/*/*/*/seed*/metrics.json")):
        experiment, task, student, method, point, seed = metrics.relative_to(workdir / paths.STUDENTS).parts[:6]
        settings = student_settings(config, experiment, task, student, method, point, seed.removeprefix("seed"))
        members = {"kdflow.students": settings["student"]["type"], "kdflow.distillation.methods": settings["method"]}
        students += 1
        if edited_path in job_closure(REPO / "scripts/distill_student.py", members):
            running.append(str(metrics.relative_to(workdir)))
    if edited == "kdflow/distillation/methods/hidden_methods.py":
        assert 0 < len(running) < students  # its students alone
    if edited == "kdflow/training/loop.py":  # every training job: the teacher, pseudo-heads, generator, students
        assert len(running) == students and {"finetune_teacher", "train_pseudo_heads", "finetune_generator"} <= set(forced)
    assert forced or running
    expected = planned_jobs(*DEMO, "--forcerun", *forced, *running, cwd=workdir)
    path = workdir / edited
    original = path.read_text()
    try:
        path.write_text(original + "# a comment\n")
        assert planned_jobs(*DEMO, cwd=workdir) == Counter()
        path.write_text(original + "EDITED = 1\n")
        assert planned_jobs(*DEMO, cwd=workdir) == expected
    finally:
        path.write_text(original)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter()


@pytest.mark.slow
def test_changing_the_precision_reruns_every_job_that_runs_a_model_and_what_follows(demo_run, demo_config):
    """Everything downstream of the prepared data runs a model or reads what one computed; only the data and its
    class distribution (thesis Fig. A.1) stay, the claims' page, which reads the committed real-data runs, and the
    ledger's page. Every paper table's page reruns, Universal-KD Table 3's too (it runs no experiment): its
    differences from the paper's protocol name the precision."""
    workdir, _ = demo_run
    config, save = demo_config
    everything = planned_jobs(*DEMO, "--forceall", cwd=workdir)
    config["precision"] = "bf16"
    save(config)
    result = snakemake("-n", *DEMO, cwd=workdir).stdout
    assert job_stats(result) == everything - Counter(prepare_task=everything["prepare_task"],
                                                     figure_class_distribution=1, claims_table=1,
                                                     ledger_table=1)
    assert "Params have changed since last execution" in result


@pytest.mark.slow
def test_editing_raw_data_reruns_that_task_only(demo_run):
    workdir, _ = demo_run
    raw = workdir / "demo/data/glue/CoLA/dev.tsv"
    original, stat = raw.read_text(), raw.stat()
    raw.write_text(original.rstrip("\n") + "\nxx00\t1\t\tThe cat sat on the mat.\n")
    try:
        assert planned_jobs(*DEMO, cwd=workdir) == Counter(  # and the CoLA teacher's sentence list (Table C.1), and
            prepare_task=1, finetune_teacher=1, evaluate_teacher=1, train_pseudo_heads=1, evaluate_pseudo_heads=1,
            teacher_table=1, figure_pseudo_heads=1, all=1, classify_sentences=1, figure_teacher_curves=1,
            figure_class_distribution=1,
            plan=1,  # the cost plan, which counts the raw rows
            status_page=1,  # the status page, which reads the sentence list and the teacher's curves
            plan_measured=1,  # the plan against the run, built last like the status page
        )
    finally:
        # the file's rows and modification time as they were: the demo's outputs are up to date again for the
        # tests that follow, whether or not the plan above was the expected one
        raw.write_text(original)
        os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.slow
def test_demo_probes_input_embeddings_and_students_from_scratch_beside_the_thesis(demo_run):
    """Thesis §6.1: the "embed." baselines (Fig. 6.2) and the students trained from scratch (Figs. 6.3, C.1) are
    probed, and every score of the thesis stands beside kdflow's for the models the demo maps onto it."""
    workdir, _ = demo_run
    config = yaml.safe_load((workdir / "demo/config.yaml").read_text())
    probing = pd.read_csv(workdir / paths.PROBING_TABLE_CSV)
    probes = probing[probing.kind == "probe"]
    layers = probes.groupby("model").layer.agg(lambda values: sorted(set(values)))
    assert layers["embed_words_sst2"] == [0]  # one layer: the vectors
    assert layers["lstm_s_scratch_sst2"] == [1, 2, 3] and layers["bert_s_scratch_sst2"] == [0, 1, 2]
    encodings = workdir / paths.PROBING_ENCODINGS.format(model="embed_words_sst2", probing_task="Length")
    with safe_open(str(encodings), "pt") as cache:
        assert cache.get_tensor("layer0.dev").shape[1] == 50  # the word vectors' width, one channel
    scratch = json.loads((workdir / paths.SELECTION.format(experiment="thesis_scratch")).read_text())
    assert {(s["student"], s["method"]) for s in scratch["selections"]} == {
        (student, method) for student in ["lstm_s_scratch", "bert_s_scratch"] for method in ["mse_logits", "hard_logits"]}

    comparison = pd.read_csv(workdir / paths.PROBING_THESIS_CSV, dtype={"thesis_layer": str})
    reference = pd.read_csv(REPO / "reference/thesis_probing_scores.csv")
    assert len(comparison) == len(reference)  # every thesis score, with or without a kdflow counterpart
    compared = comparison[comparison.kdflow.notna()]
    assert set(compared.model) == set(config["probing"]["thesis"]["models"].values())
    assert set(compared.task) == set(config["probing"]["tasks"])
    joined = compared.merge(probes, on=["model", "task", "layer"], suffixes=("", "_probe"))
    assert len(joined) == len(compared) and (joined.kdflow == joined.test_accuracy.round(4)).all()
    assert (compared.difference.round(3) == (compared.kdflow - compared.thesis).round(3)).all()
    lstm = compared[compared.thesis_model == "LSTM_S[SST-2]"]
    assert set(lstm.thesis_layer) == {"last (BiLSTM)"} and set(lstm.layer) == {2}  # 2 BiLSTM layers, then FC
    teacher = comparison[comparison.thesis_model == "BERT_T[SST-2]"]
    assert set(teacher[teacher.kdflow.notna()].thesis_layer) == {"E", "1"}  # the tiny teacher has 4 layers
    notes = set(comparison.note.dropna())
    assert ("no kdflow counterpart: the demo trains hard-logit students (thesis_scratch) but does not probe them; "
            "config.yaml does") in notes
    assert "pooled by cls in the thesis; kdflow probes with mean pooling" in notes
    page = (workdir / paths.PROBING_THESIS_MD).read_text()
    assert "| embed.word\\[SST-2\\] | avg | embed_words_sst2 | 10 | 3 |" in page
    for figure in ["6_1", "6_2", "6_3", "C_1"]:
        assert (workdir / paths.PROBING_THESIS_PNG.format(figure=figure)).read_bytes()[:4] == b"\x89PNG", figure


@pytest.mark.slow
def test_demo_alp_kd_figures_cover_its_alp_and_pkd_students(demo_run):
    """ALP-KD Fig. 3: the first layer of each of the demo's ALP students (2 and 3 layers) over the teacher's 4, on
    the same examples; Fig. 4: its ALP and PKD students beside the teacher, as JSON, CSV and PNG."""
    workdir, _ = demo_run
    config = yaml.safe_load((workdir / "demo/config.yaml").read_text())
    alp_depths = sorted(config["students"][student]["layers"] for experiment in config["experiments"].values()
                        for entry, spec in experiment["methods"].items() if (spec or {}).get("method", entry) == "alp"
                        for student in experiment["students"])
    assert alp_depths == [2, 3]
    attention = json.loads((workdir / paths.ATTENTION_JSON.format(figure="alp_kd_figure3")).read_text())
    assert sorted(record["student_layers"] for record in attention) == alp_depths  # every ALP student of the demo
    for record in attention:
        assert (record["method"], record["student_layer"], record["idx"]) == ("alp", 1, attention[0]["idx"])
        weights = np.array(record["weights"])
        assert weights.shape == (10, 4) and np.allclose(weights.sum(1), 1)

    outputs = json.loads((workdir / paths.LAYER_OUTPUTS_JSON.format(task="sst2")).read_text())
    # the ALP and PKD students of alp_kd_table2, the demo's stand-in for ALP-KD Table 1's 4-layer students
    assert sorted(model["method"] for model in outputs["models"].values()) == ["alp", "pkd"]
    assert {model["student_layers"] for model in outputs["models"].values()} == {3}
    assert len(outputs["idx"]) == len(set(outputs["idx"])) == 40 and outputs["teacher_layers"] == 4
    assert [(entry["student_layer"], entry["teacher_layer"]) for entry in outputs["panels"]] == [(1, 1), (2, 2)]
    table = pd.read_csv(workdir / paths.LAYER_OUTPUTS_CSV.format(task="sst2"))
    assert len(table) == 2 * 3 * 40 and set(table.model) == {"teacher", *outputs["models"]}
    for entry in outputs["panels"]:
        assert 0 < sum(entry["explained_variance_ratio"]) <= 1 + 1e-9
        for values in entry["students"].values():
            distances = np.array(values["cosine_distance"])
            assert distances.shape == (40,) and ((distances >= 0) & (distances <= 2)).all()
            assert values["mean_cosine_distance"] == pytest.approx(distances.mean())


@pytest.mark.slow
def test_a_job_replayed_without_snakemake_writes_the_bytes_snakemake_wrote(demo_run, tmp_path):
    """Issue 50: kdflow.workflow.replay, the GPU check's runner where Snakemake is not. A demo student, listed by
    Snakemake and replayed by its rule's own script in a new directory that holds only the outputs of the jobs it
    needs (copied from the demo), runs alone and writes the same predictions and weights as the demo's job."""
    workdir, _ = demo_run
    student = paths.STUDENT_RUN_DIR.format(experiment="universal_kd_table5", task="sst2", student="bilstm",
                                           method="universal_kd_ca", point="default", seed=0)
    listing = replay.export([workdir / "demo/config.yaml"], targets=[f"{student}/metrics.json"], directory=workdir)
    (tmp_path / "jobs.json").write_text(json.dumps(listing))
    (tmp_path / "demo").symlink_to(workdir / "demo", target_is_directory=True)
    for job in listing["jobs"]:
        for path in job["output"]["items"] if job["rule"] != "distill_student" else []:
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            copy = shutil.copytree if (workdir / path).is_dir() else shutil.copy2
            copy(workdir / path, tmp_path / path)
    records = replay.run(tmp_path / "jobs.json", tmp_path, log=lambda message: None)
    assert [(record["rule"], record["returncode"]) for record in records] == [("distill_student", 0)]
    for name in ("predictions.parquet", "model.safetensors"):
        assert (tmp_path / student / name).read_bytes() == (workdir / student / name).read_bytes(), name


EXPORT_CHECK = """
import json, sys
import numpy as np
import onnxruntime
import pandas as pd
from transformers import AutoTokenizer, pipeline
folder, data, predictions, out = sys.argv[1:]
classify = pipeline("text-classification", model=folder, truncation=True)
dev = pd.read_parquet(data)
labels = [found["label"] for found in classify(list(dev["text_a"]), batch_size=16)]
session = onnxruntime.InferenceSession(folder + "/model.onnx", providers=["CPUExecutionProvider"])
tokenizer = AutoTokenizer.from_pretrained(folder)
names = [given.name for given in session.get_inputs()]
onnx = []
for start in range(0, len(dev), 16):
    encoded = tokenizer(list(dev["text_a"][start:start + 16]), truncation=True, padding=True, return_tensors="np")
    onnx += session.run(None, {name: encoded[name].astype(np.int64) for name in names})[0].argmax(-1).tolist()
json.dump({"labels": labels, "onnx_predictions": onnx, "kdflow_imported": "kdflow" in sys.modules}, open(out, "w"))
"""


@pytest.mark.slow
def test_a_demo_student_exported_by_its_rule_predicts_in_a_pipeline_what_kdflow_recorded(demo_run, tmp_path):
    """Issue 55: `snakemake results/export/...` on the demo (also a default target of the demo's `export`), and a fresh
    Python process that has only transformers' pipeline, and onnxruntime on the folder's model.onnx, gives the
    recorded dev predictions of the run the export took."""
    workdir, _ = demo_run
    target = paths.EXPORT.format(experiment="alp_kd_table2", task="sst2", student="bert_3", method="alp")
    snakemake(*DEMO, "--cores", "1", target, cwd=workdir)
    folder = workdir / target
    record = json.loads((folder / "kdflow.json").read_text())
    recorded = pd.read_parquet(Path(workdir / record["run"]["directory"]) / "predictions.parquet")
    recorded = recorded[recorded["split"] == "dev"].sort_values("idx")
    dev = pd.read_parquet(workdir / paths.DATA.format(task="sst2") / "dev.parquet")
    dev = dev.set_index("idx").loc[recorded["idx"]]
    dev.reset_index().to_parquet(tmp_path / "dev.parquet")
    (tmp_path / "check.py").write_text(EXPORT_CHECK)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    checked = run_while_progressing([sys.executable, str(tmp_path / "check.py"), str(folder),
                                     str(tmp_path / "dev.parquet"), "", str(tmp_path / "loaded.json")],
                                    cwd=tmp_path, env=environment)
    assert checked.returncode == 0, checked.stdout[-3000:]
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    names = json.loads((folder / "config.json").read_text())["id2label"]
    assert loaded["kdflow_imported"] is False
    assert loaded["labels"] == [names[str(prediction)] for prediction in recorded["prediction"]]
    assert loaded["onnx_predictions"] == recorded["prediction"].tolist()  # model.onnx under onnxruntime, the same
