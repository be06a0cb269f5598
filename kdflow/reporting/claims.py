"""The papers' central claims on real data: verdicts from the committed record of benchmarks/quality_claims.py.

The record (benchmarks/quality/claims_runs.jsonl) holds one run per line: its experiment, task, student, method,
grid point (``config``), seed, main dev metric and score (x100), and its dev predictions. The thesis's runs
(thesis_runs.jsonl) are transcribed from an earlier README, without predictions. Each method's cell is its point
chosen on dev with the first seed (kdflow's :func:`kdflow.distillation.selection.select`) and that point's runs.

A claim is a chain of links "A > B" (or "A >= B"), each tested with :mod:`kdflow.core.statistics`: the difference
of the mean dev scores, a paired t-test over the seeds both ran, and a 95% paired-bootstrap interval over the dev
examples. Its verdict:
- **holds**: A is ahead and both tests reject "no difference";
- **contradicted**: A is behind and both tests reject it;
- **within noise**: otherwise; for a link the paper writes "A >= B", that agrees with the paper.
Where one test cannot be made, the other decides, and the verdict says so: runs without predictions (the thesis's)
by the seed test alone, a single seed by the bootstrap alone (provisional: a seed's luck is not in it).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core import metrics, statistics
from kdflow.core.documents import Document, Heading, Paragraph, Table
from kdflow.distillation.selection import select
from kdflow.workflow.config import grid_points

# The experiments of benchmarks/quality/config.yaml. A link's side is (experiment, method), or a tuple of them of
# which the best mean counts (ALP-KD's CKD is the better of its NO and PO bucketings).
ALP, UKD, UKD_CA = "claims_alp", "claims_universal", "claims_universal_ca"
CKD = ((ALP, "ckd_no"), (ALP, "ckd_po"))
CLAIMS = [
    ("ALP-KD: ALP-KD (and its NO/PO variants) >= CKD >= PKD > KD > no KD", "ALP-KD Table 1 (BERT-base -> BERT-4)",
     [((ALP, "alp"), CKD, ">="), ((ALP, "alp_no"), CKD, ">="), ((ALP, "alp_po"), CKD, ">="),
      (CKD, (ALP, "pkd"), ">="), ((ALP, "pkd"), (ALP, "kd"), ">"), ((ALP, "kd"), (ALP, "no_kd"), ">")]),
    ("Universal-KD: Universal-KD (IL, CG) > ALP-KD, PKD, KD",
     "Universal-KD Tables 2 and 4; their PKD and ALP-KD rows come from ALP-KD Table 1, as here",
     [((UKD, method), other, ">") for method in ("universal_kd_il", "universal_kd_cg")
      for other in ((ALP, "alp"), (ALP, "pkd"), (UKD, "kd"))] + [((UKD, "kd"), (UKD, "no_kd"), ">")]),
    ("Universal-KD, cross-architecture: Universal-KD (CA) > KD > no KD, with a BiLSTM student",
     "Universal-KD Table 5 (BERT-base -> 3-layer BiLSTM); the paper's own gains are small: KD +0.5 over no KD "
     "and Universal-KD (CA) +0.8 over KD on average, -0.4 and +0.8 on SST-2",
     [((UKD_CA, "universal_kd_ca"), (UKD_CA, "kd"), ">"), ((UKD_CA, "kd"), (UKD_CA, "no_kd"), ">")]),
    ("Investigation: Universal-KD (IL) against KD with a three times longer schedule (6 + 3 epochs)",
     "not a paper table: is the scaled 2 + 1 schedule what holds Universal-KD back? Both at beta 0.5",
     [((UKD + "_long", "universal_kd_il"), (UKD + "_long", "kd"), ">")]),
    ("The thesis: KD over a large transfer set > KD on the labelled set > no KD",
     "Sučík (2020) Table 5.2; LSTM_S from MiniLM-L6 on 4,000 labelled examples, the runs of the thesis check "
     "of docs/evidence.md (no predictions kept: the seed test alone)",
     [(("lstm_s_unlabelled", "mse_logits"), ("lstm_s_train", "mse_logits"), ">"),
      (("lstm_s_generated", "mse_logits"), ("lstm_s_train", "mse_logits"), ">"),
      (("lstm_s_train", "mse_logits"), ("lstm_s_train", "no_kd"), ">")]),
]
NAMES = {("lstm_s_train", "no_kd"): "(a) no KD", ("lstm_s_train", "mse_logits"): "(b) KD, labelled",
         ("lstm_s_unlabelled", "mse_logits"): "(c) KD, + unlabelled",
         ("lstm_s_generated", "mse_logits"): "(d) KD, + generated"}
METHOD_NAMES = {"no_kd": "no KD", "kd": "KD", "pkd": "PKD", "ckd_no": "CKD-NO", "ckd_po": "CKD-PO", "alp": "ALP-KD",
                "alp_no": "ALP-KD NO", "alp_po": "ALP-KD PO", "universal_kd_il": "Universal-KD IL",
                "universal_kd_cg": "Universal-KD CG", "universal_kd_ca": "Universal-KD CA"}


def read_runs(path) -> list[dict]:
    """A record: one JSON object per line."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def searched_points(config: dict) -> dict[tuple[str, str], set[str]]:
    """(experiment, method entry) -> the grid points a benchmark's config searches (kdflow's own expansion)."""
    return {(name, entry): set(grid_points(spec, entry))
            for name, spec in config.get("experiments", {}).items() for entry in spec["methods"]}


def cells(runs: list[dict], grids: dict | None = None) -> dict[tuple, dict]:
    """(task, experiment, method) -> the point chosen on the first seed's dev scores, that point's runs (by seed)
    and the first seed's score of every point. With ``grids`` (:func:`searched_points`), a cell whose search has
    not run every point yet is marked incomplete: its choice may still change."""
    groups = defaultdict(list)
    for run in runs:
        groups[run["task"], run["experiment"], run["method"]].append(run)
    result = {}
    for key, group in groups.items():
        first = min(run["seed"] for run in group)
        search = [{**run, "scores": {"dev": {run["metric"]: run["dev"]}}} for run in group if run["seed"] == first]
        point = select(search, group[0]["metric"])["selected"]
        expected = (grids or {}).get(key[1:], set())
        missing = expected - {run["point"] for run in search}
        result[key] = {"point": point, "metric": group[0]["metric"],
                       "runs": sorted((run for run in group if run["point"] == point), key=lambda run: run["seed"]),
                       "grid": {run["point"]: run["dev"] for run in search},
                       "searched": None if not missing else f"{len(expected) - len(missing)} of {len(expected)}"}
    return result


def side(table: dict, task: str, name) -> tuple[str, dict] | None:
    """A link's side on ``task``: its label and cell, the best on mean dev of several; None if any is missing or
    its search is incomplete."""
    options = [name] if isinstance(name[0], str) else list(name)
    found = [(NAMES.get((e, m)) or METHOD_NAMES.get(m, m), table[task, e, m]) for e, m in options
             if (task, e, m) in table and table[task, e, m]["searched"] is None]
    if len(found) < len(options):
        return None
    return max(found, key=lambda item: np.mean([run["dev"] for run in item[1]["runs"]]))


def compare_sides(better: dict, worse: dict, gold) -> dict:
    """The difference of the mean dev scores (x100), the paired t-test over the common seeds and the paired
    bootstrap over the dev examples (where both sides kept their predictions and ``gold`` is known)."""
    by_seed = lambda cell: {run["seed"]: run["dev"] for run in cell["runs"]}  # noqa: E731
    kept = all("dev_predictions" in run for run in better["runs"] + worse["runs"]) and gold is not None
    predictions = [[np.asarray(run["dev_predictions"]) for run in cell["runs"]] if kept else None
                   for cell in (better, worse)]
    result = statistics.compare(by_seed(better), by_seed(worse), metrics.METRICS[better["metric"]], *predictions,
                                np.asarray(gold) if kept else None)
    return {**result, "low": 100 * result["low"], "high": 100 * result["high"]}


def verdict(result: dict, relation: str) -> str:
    """holds, contradicted or within noise (see the module). Where one test cannot be made, the other decides and
    the verdict says so: the seed test alone for runs without predictions, the bootstrap alone for one seed."""
    seed_test, example_test = math.isfinite(result["p_seeds"]), math.isfinite(result["low"])
    by_seeds = seed_test and result["p_seeds"] < statistics.SIGNIFICANCE
    by_examples = example_test and (result["low"] > 0 or result["high"] < 0)
    if seed_test and example_test:
        significant, basis = by_seeds and by_examples, ""
    elif seed_test:
        significant, basis = by_seeds, " (seeds only)"
    elif example_test and result["pairs"] < 2:
        significant, basis = by_examples, " (dev examples only: one seed)"
    else:
        significant, basis = False, ""
    if significant:
        return ("holds" if result["difference"] > 0 else "contradicted") + basis
    return "within noise" + (" (agrees with >=)" if relation == ">=" else "") + basis


def verdicts(runs: list[dict], labels: dict, grids: dict | None = None) -> pd.DataFrame:
    """One row per claim, task and link that the runs cover (with complete searches)."""
    table = cells(runs, grids)
    tasks = list(dict.fromkeys(run["task"] for run in runs))
    rows = []
    for claim, _, links in CLAIMS:
        for task in tasks:
            for better_name, worse_name, relation in links:
                better, worse = side(table, task, better_name), side(table, task, worse_name)
                if better is None or worse is None:
                    continue
                result = compare_sides(better[1], worse[1], labels.get(task))
                rows.append({"claim": claim, "task": task, "link": f"{better[0]} {relation} {worse[0]}",
                             "better": better[0], "worse": worse[0], "relation": relation,
                             "metric": better[1]["metric"], **result, "verdict": verdict(result, relation)})
    return pd.DataFrame(rows)


def claims_document(runs: list[dict], labels: dict, grids: dict | None = None) -> Document:
    found = verdicts(runs, labels, grids)
    document = Document("The papers' claims on real data", [Paragraph(
        "From the committed record of benchmarks/quality_claims.py (benchmarks/quality/claims_runs.jsonl; "
        "docs/evidence.md): a shallow BERT student (MiniLM-L6's first 3 layers) distilled from MiniLM-L6 "
        "fine-tuned on each task. Dev scores x100; each method at its point chosen on dev with the first seed. A "
        "link holds or is contradicted when both tests reject no difference: " + statistics.LEGEND)])
    for claim, paper, _ in CLAIMS:
        rows = found[found["claim"] == claim] if len(found) else found
        document.blocks += [Heading(claim), Paragraph(f"Paper: {paper}.")]
        if not len(rows):
            document.blocks.append(Paragraph("No link of this claim has both sides' searches complete in the record "
                                             "yet."))
            continue
        document.blocks.append(Table(pd.DataFrame({
            "task": rows["task"], "link": rows["link"], "difference": [f"{d:+.2f}" for d in rows["difference"]],
            "seeds paired": rows["pairs"],
            "p (seeds)": ["—" if math.isnan(p) else f"{p:.3f}" for p in rows["p_seeds"]],
            "95% CI (dev examples)": ["—" if math.isnan(low) else f"[{low:+.2f}, {high:+.2f}]"
                                      for low, high in zip(rows["low"], rows["high"])],
            "verdict": rows["verdict"]})))
    table = cells(runs, grids)
    tasks = list(dict.fromkeys(run["task"] for run in runs))
    lines = []
    for (task, experiment, method), cell in sorted(table.items(), key=lambda item: (tasks.index(item[0][0]),
                                                                                   item[0][1], item[0][2])):
        values = [run["dev"] for run in cell["runs"]]
        spread = statistics.sample_std(values)
        cpu = [run["cpu_seconds"] for run in cell["runs"] if run.get("cpu_seconds") and not run.get("resumed")]
        lines.append({"task": task, "experiment": experiment,
                      "method": NAMES.get((experiment, method)) or METHOD_NAMES.get(method, method),
                      "metric": cell["metric"],
                      "chosen point": cell["point"] + (f" (search {cell['searched']})" if cell["searched"] else ""),
                      "seeds": len(values),
                      "dev mean ± std": f"{np.mean(values):.2f}" + (f" ± {spread:.2f}" if math.isfinite(spread) else ""),
                      "grid, first seed": ", ".join(f"{p} {v:.2f}" for p, v in sorted(cell["grid"].items())),
                      "CPU-min per run": f"{np.mean(cpu) / 60:.1f}" if cpu else "—"})
    hours = sum(run.get("cpu_seconds") or 0 for run in runs) / 3600
    resumed = sum(bool(run.get("resumed")) for run in runs)
    document.blocks += [Heading("Every cell"), Table(pd.DataFrame(lines)),
                        Paragraph(f"{len(runs)} runs; {hours:.1f} CPU-hours of student training in the record (the "
                                  "teachers, pseudo-heads and teacher signals not included)."
                                  + (f" {resumed} of them resumed from a checkpoint after an interruption: their CPU "
                                     "time is their last attempt's alone, so the total is a lower bound and the "
                                     "CPU-min per run leaves them out." if resumed else ""))]
    return document
