"""The papers' central claims on real data: verdicts from the committed record of benchmarks/quality_claims.py.

The record (benchmarks/quality/claims_runs.jsonl) holds one run per line: its experiment, task, student, method,
grid point (``config``), seed, main dev metric and score (x100), its dev predictions and the clean commit on main
that trained it. The thesis's runs (thesis_runs.jsonl) are LSTM_S students of the benchmark's ``thesis`` phase, one
labelled subset and teacher per seed, each run keeping its teacher's digest.

**Selection apart from what it reports.** Each method's point is chosen on the first seed's dev score (kdflow's
:func:`kdflow.distillation.selection.select`; exact ties to the first point in name order): that is the cell's
headline, the like of a paper's best dev score. A method with a grid is then judged on its chosen point's other
seeds only, held out of the choice; a method without one chooses nothing, and all its seeds count. CKD's variant
(the better of its NO and PO bucketings) is chosen the same way, on the first seed.

**A link "A > B" (or "A >= B")** is tested over the seeds both sides hold out, paired by seed (a pair only where
its two runs learnt from the same teacher, :func:`teacher_of`), and the dev examples together
(:func:`kdflow.core.statistics.seed_example_test`), against its **margin**: the smallest difference of interest,
declared per link and task with its source in benchmarks/quality/claim_margins.yaml (the paper's gain where it is
positive, else a stated value; :func:`read_margins`). **One family per claim**: the m links of a claim that can be
tested get simultaneous intervals at level 1 - alpha/m (Bonferroni; each side alpha/2m), and the verdict is where a
link's interval lies, so that the chance of any wrong verdict in the claim is at most alpha whatever the truth (a
true difference d can be wrong on at most one side of its interval). The four verdicts are exclusive, taken in
this order:
- **contradicted**: the interval lies below 0 (``>``), or below minus the margin (``>=``: worse by more than it);
- **holds**: it lies above 0 (``>``: superiority), or above minus the margin (``>=``: non-inferiority);
- **no difference as large as the margin** (``>`` only): it lies below the margin, and holds neither way;
- **inconclusive**: none of these; the difference the data can detect (80% power at alpha/m) says why, and the
  seeds planner (:func:`kdflow.core.statistics.seeds_needed`) how many held-out seeds would detect the margin.
Each verdict is about the grid point each side chose on its first seed, not the method over its grid.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core import metrics, statistics
from kdflow.core.documents import Document, Heading, Paragraph, Table, number, signed
from kdflow.distillation.selection import select
from kdflow.workflow.job_settings import grid_points

# The experiments of benchmarks/quality/config.yaml. A link's side is (experiment, method), or a tuple of them of
# which the one best on the first seed counts (ALP-KD's CKD is the better of its NO and PO bucketings). Each claim
# names where its paper's numbers are (source, table, student of reference/paper_results.csv), searched in order.
ALP, UKD, UKD_CA = "claims_alp", "claims_universal", "claims_universal_ca"
CKD = ((ALP, "ckd_no"), (ALP, "ckd_po"))
UKD_TABLE2 = ("universal_kd_wu2021", 2, "bert-4")
CLAIMS = [
    ("ALP-KD: ALP-KD (and its NO/PO variants) >= CKD >= PKD > KD > no KD", "ALP-KD Table 1 (BERT-base -> BERT-4)",
     [((ALP, "alp"), CKD, ">="), ((ALP, "alp_no"), CKD, ">="), ((ALP, "alp_po"), CKD, ">="),
      (CKD, (ALP, "pkd"), ">="), ((ALP, "pkd"), (ALP, "kd"), ">"), ((ALP, "kd"), (ALP, "no_kd"), ">")],
     # kdflow's text of ALP-KD lacks Table 1 but its PKD and ALP rows, which Universal-KD's Table 2 quotes beside
     # its own KD and no-KD runs of the same BERT-base -> BERT-4 setting
     [("alp_kd_passban2021", 1, "bert-4"), UKD_TABLE2]),
    ("Universal-KD: Universal-KD (IL, CG) > ALP-KD, PKD, KD",
     "Universal-KD Tables 2 and 4; their PKD and ALP rows come from ALP-KD Table 1, as here",
     [((UKD, method), other, ">") for method in ("universal_kd_il", "universal_kd_cg")
      for other in ((ALP, "alp"), (ALP, "pkd"), (UKD, "kd"))] + [((UKD, "kd"), (UKD, "no_kd"), ">")],
     # CG's gains are Table 4's (RoBERTa-large -> DistilRoBERTa), which has no PKD or ALP-KD row
     [UKD_TABLE2, ("universal_kd_wu2021", 4, "distilroberta")]),
    ("Universal-KD, cross-architecture: Universal-KD (CA) > KD > no KD, with a BiLSTM student",
     "Universal-KD Table 5 (BERT-base -> 3-layer BiLSTM); the paper's own gains are small: KD +0.5 over no KD "
     "and Universal-KD (CA) +0.8 over KD on average, -0.4 and +0.8 on SST-2",
     [((UKD_CA, "universal_kd_ca"), (UKD_CA, "kd"), ">"), ((UKD_CA, "kd"), (UKD_CA, "no_kd"), ">")],
     [("universal_kd_wu2021", 5, "bilstm")]),
    ("Investigation: Universal-KD (IL) against KD with a three times longer schedule (6 + 3 epochs)",
     "not a paper table: is the scaled 2 + 1 schedule what holds Universal-KD back? Both at beta 0.5",
     [((UKD + "_long", "universal_kd_il"), (UKD + "_long", "kd"), ">")], [UKD_TABLE2]),
] + [
    (f"The thesis{kind}: KD over a large transfer set > KD on the labelled set > no KD",
     f"Sučík (2020) Table 5.2; LSTM_S{kind.replace(',', ' with')} distilled from MiniLM-L6, each seed with its own "
     "4,000 labelled SST-2 examples (and the teacher fine-tuned on them), benchmarks/quality_claims.py --phases thesis",
     [((f"{prefix}_unlabelled", "mse_logits"), (f"{prefix}_train", "mse_logits"), ">"),
      ((f"{prefix}_generated", "mse_logits"), (f"{prefix}_train", "mse_logits"), ">"),
      ((f"{prefix}_train", "mse_logits"), (f"{prefix}_train", "no_kd"), ">")], [])
    for prefix, kind in (("lstm_s", ""), ("lstm_s_scratch", ", random vectors"))
]
VERDICTS = ("contradicted", "holds", "no difference as large as the margin", "inconclusive")
NAMES = {(f"{prefix}_{experiment}", method): name for prefix in ("lstm_s", "lstm_s_scratch")
         for experiment, method, name in (("train", "no_kd", "(a) no KD"), ("train", "mse_logits", "(b) KD, labelled"),
                                          ("unlabelled", "mse_logits", "(c) KD, + unlabelled"),
                                          ("generated", "mse_logits", "(d) KD, + generated"))}
METHOD_NAMES = {"no_kd": "no KD", "kd": "KD", "pkd": "PKD", "ckd_no": "CKD-NO", "ckd_po": "CKD-PO", "alp": "ALP-KD",
                "alp_no": "ALP-KD NO", "alp_po": "ALP-KD PO", "universal_kd_il": "Universal-KD IL",
                "universal_kd_cg": "Universal-KD CG", "universal_kd_ca": "Universal-KD CA"}


def read_runs(path, on_gpu: bool = False) -> list[dict]:
    """A record (one JSON object per line): its CPU runs, or with ``on_gpu`` those a GPU check ran
    (benchmarks/gpu_check.py: full train sets, another device and precision), which name their ``device``; the two
    are never compared with each other."""
    path = Path(path)
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [run for run in runs if ("device" in run) == on_gpu]


def searched_points(config: dict) -> dict[tuple[str, str], set[str]]:
    """(experiment, method entry) -> the grid points a benchmark's config searches (kdflow's own expansion)."""
    return {(name, entry): set(grid_points(spec, entry))
            for name, spec in config.get("experiments", {}).items() for entry in spec["methods"]}


def cells(runs: list[dict], grids: dict | None = None) -> dict[tuple, dict]:
    """(task, experiment, method) -> the point chosen on the first seed's dev scores (``point``, its score the
    ``headline``), the runs a verdict may use (``held_out``: the point's other seeds where there was a choice, all
    its seeds where the search has one point), every run of the point (``runs``) and the first seed's score of every
    point. With ``grids`` (:func:`searched_points`), a cell whose search has not run every point yet is marked
    incomplete: its choice may still change."""
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
        chose = len(expected | {run["point"] for run in group}) > 1
        at_point = sorted((run for run in group if run["point"] == point), key=lambda run: run["seed"])
        result[key] = {"point": point, "metric": group[0]["metric"], "runs": at_point, "chose": chose,
                       "headline": next(run["dev"] for run in at_point if run["seed"] == first),
                       "held_out": [run for run in at_point if not chose or run["seed"] != first],
                       "grid": {run["point"]: run["dev"] for run in search},
                       "searched": None if not missing else f"{len(expected) - len(missing)} of {len(expected)}"}
    return result


def side(table: dict, task: str, name) -> tuple[str, dict] | None:
    """A link's side on ``task``: its label and cell, of several the best on the first seed (a choice like a grid
    point's); None if any is missing or its search is incomplete."""
    options = [name] if isinstance(name[0], str) else list(name)
    found = [(NAMES.get((e, m)) or METHOD_NAMES.get(m, m), table[task, e, m]) for e, m in options
             if (task, e, m) in table and table[task, e, m]["searched"] is None]
    if len(found) < len(options):
        return None
    found = [(label, {**cell, "key": (e, m, cell["point"])}) for (label, cell), (e, m) in zip(found, options)]
    if len(found) == 1:
        return found[0]
    label, cell = max(found, key=lambda item: item[1]["headline"])  # the first of equals, in the claim's order
    return label, {**cell, "chose": True, "held_out": [run for run in cell["runs"] if run["seed"] !=
                                                       min(r["seed"] for r in cell["runs"])]}


def paper_gain(reference: pd.DataFrame, sources: list[tuple], task: str, better, worse) -> float:
    """The paper's dev difference of a link's sides on ``task`` (a side of several: the best of them, as kdflow's
    side), from the first of ``sources`` (source, table, student) that has both; NaN where none does."""

    def value(rows: pd.DataFrame, name) -> float:
        methods = [name[1]] if isinstance(name[0], str) else [m for _, m in name]
        values = [rows.loc[rows["method"] == method, "value"] for method in methods]
        return float(max(v.iloc[0] for v in values)) if all(len(v) and v.notna().all() for v in values) else math.nan

    for source, table, student in sources:
        rows = reference[(reference["source"] == source) & (reference["table"] == table)
                         & (reference["student"] == student) & (reference["task"] == task)
                         & (reference["split"] == "dev")]
        gain = value(rows, better) - value(rows, worse)
        if math.isfinite(gain):
            return gain
    return math.nan


def side_name(name) -> str:
    """A link's side as the margins file names it: ``experiment/method``, or ``experiment/a|b`` where the side is
    the best of several methods on the first seed."""
    options = [name] if isinstance(name[0], str) else list(name)
    return f"{options[0][0]}/" + "|".join(method for _, method in options)


def read_margins(path) -> dict:
    """benchmarks/quality/claim_margins.yaml: link -> task -> {margin, source}."""
    import yaml

    return yaml.safe_load(Path(path).read_text())["links"]


def margin_of(margins: dict, better, worse, relation: str, task: str) -> dict:
    """The declared margin of a link on ``task``, or a clear error where none is (a margin is chosen before the
    runs it judges, never from them)."""
    link = f"{side_name(better)} {relation} {side_name(worse)}"
    try:
        return margins[link][task]
    except KeyError:
        raise ValueError(f"no margin declared for {link!r} on {task}: add one, with its source, to "
                         "benchmarks/quality/claim_margins.yaml before its runs are judged") from None


def teacher_of(run: dict) -> str | None:
    """The teacher a run learnt from, as far as pairing goes: two runs of one seed are a pair only if this is
    equal, since with two teachers their difference would carry the teachers' as well.
    - A GPU check's run names the digest of its teacher's weights (``teacher_digest``): each check fine-tunes the
      teacher again, and two checks' teachers differ. A check that found no weights to digest (None) is named by
      its commit and command line, so that its runs pair with no other call's.
    - The 11 GPU runs recorded before digests (2026-11-28, commit 2e2eb12) all came from one teacher: the check's
      second call ran on the first call's work directory and reused it. They are named by commit and device.
    - A thesis run (CPU) names its teacher's digest too: each seed's labelled subset has its own teacher.
    - Other CPU runs: None. The CPU benchmark fine-tunes one teacher per task, its runs are bit-exact, and a fix to
      the teacher moves the runs it voids to superseded_runs.jsonl (benchmarks/quality_claims.py)."""
    if run.get("teacher_digest"):
        return run["teacher_digest"]
    if "device" not in run:
        return None
    if "teacher_digest" not in run:
        return f"{run['commit']} {run['device']}"
    return f"{run['commit']} {run.get('invocation', '')}"


def compare_sides(better: dict, worse: dict, gold, gain: float = math.nan, margin: float = math.nan) -> dict:
    """The held-out runs of two sides, paired by seed where both runs learnt from one teacher, tested over seeds and
    dev examples together (x100): the difference, its standard error, degrees of freedom and two-sided p-value,
    the paper's ``gain`` and the link's ``margin`` (the interval, detectable difference and seeds needed are the
    claim's: :func:`judged`). ``other_teachers``: the seeds both sides hold out whose runs learnt from different
    teachers, left out."""
    ours, theirs = ({run["seed"]: run for run in side["held_out"]} for side in (better, worse))
    common = ours.keys() & theirs.keys()
    paired = {seed for seed in common if teacher_of(ours[seed]) == teacher_of(theirs[seed])}
    ours, theirs = ({seed: np.asarray(runs[seed]["dev_predictions"]) for seed in paired} for runs in (ours, theirs))
    result = statistics.seed_example_test(ours, theirs, np.asarray(gold), metrics.METRICS[better["metric"]],
                                          per_example=metrics.PER_EXAMPLE.get(better["metric"]))
    result["other_teachers"] = len(common) - len(paired)
    scaled = {name: 100 * result[name] for name in ("difference", "standard_error")}
    variances = 1e4 * result["seed_variance"], 1e4 * result["example_variance"]
    return {**result, **scaled, "seed_variance": variances[0], "example_variance": variances[1], "paper_gain": gain,
            "margin": margin}


def interval(result: dict, family: int) -> dict:
    """A link's interval at the claim's level, 1 - alpha / ``family`` (the claim's testable links)."""
    alpha = statistics.SIGNIFICANCE / max(family, 1)
    error, df, difference = result["standard_error"], result["df"], result["difference"]
    half = statistics.t_quantile(1 - alpha / 2, df) * error if math.isfinite(error) else math.nan
    return {"level": 1 - alpha, "low": difference - half, "high": difference + half}


def judged(result: dict, relation: str, family: int, seed_variance: float | None = None) -> dict:
    """A link's :func:`interval`, the difference it detects at that level with 80% power, the held-out seeds that
    would detect its margin, and its :func:`verdict`. The test and its interval use the link's own seed variance;
    what it detects and the seeds it needs use ``seed_variance`` where given (the claim's pooled one)."""
    planning = result["seed_variance"] if seed_variance is None or not math.isfinite(seed_variance) else seed_variance
    found = {**interval(result, family), **statistics.sensitivity(
        result["margin"], planning, result["example_variance"], result["pairs"],
        statistics.SIGNIFICANCE / max(family, 1))}
    return {**found, "verdict": verdict({**result, **found}, relation)}


def verdict(result: dict, relation: str) -> str:
    """One of :data:`VERDICTS` from where a link's interval (``low``, ``high``) lies against 0 and its ``margin``,
    in the module's order, which makes them exclusive."""
    low, high, margin = result["low"], result["high"], result["margin"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    floor = -margin if relation == ">=" else 0.0  # non-inferiority: worse by less than the margin is no worse
    if high < floor:
        return "contradicted"
    if low > floor:
        return "holds"
    if relation == ">" and high < margin:
        return "no difference as large as the margin"
    return "inconclusive"


def usable(run: dict) -> bool:
    """Whether a verdict may use a run: it kept its dev predictions and names the clean commit that trained it."""
    return "dev_predictions" in run and bool(run.get("commit")) and not run["commit"].endswith("-dirty")


def verdicts(runs: list[dict], labels: dict, margins: dict, grids: dict | None = None,
             reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim, task and link whose sides' searches are complete and which a verdict may use, with its
    margin (``margins``: :func:`read_margins`), its interval at the claim's level and the verdict (the module)."""
    table = cells([run for run in runs if usable(run)], grids)
    reference = reference if reference is not None else pd.DataFrame(columns=["source", "table", "student", "task",
                                                                              "split", "method", "value"])
    tasks = list(dict.fromkeys(run["task"] for run in runs))
    rows = []
    for claim, _, links, sources in CLAIMS:
        found = []
        for task in tasks:
            for better_name, worse_name, relation in links:
                better, worse = side(table, task, better_name), side(table, task, worse_name)
                if better is None or worse is None or task not in labels:
                    continue
                gain = paper_gain(reference, sources, task, better_name, worse_name)
                declared = margin_of(margins, better_name, worse_name, relation, task)
                result = compare_sides(better[1], worse[1], labels[task], gain, declared["margin"])
                found.append({"claim": claim, "task": task, "link": f"{better[0]} {relation} {worse[0]}",
                              "margin_source": declared["source"],
                              "better": better[0], "worse": worse[0], "relation": relation,
                              "metric": better[1]["metric"], "better_mean": _mean(better[1]["held_out"]),
                              "worse_mean": _mean(worse[1]["held_out"]),
                              "selection_seeds": int(better[1]["chose"] or worse[1]["chose"]),
                              "better_key": better[1]["key"], "worse_key": worse[1]["key"], **result})
        family = sum(math.isfinite(row["standard_error"]) for row in found)  # the links a test can judge
        pooled = {task: statistics.pooled_seed_variance([r["seed_variance"] for r in found if r["task"] == task],
                                                        [r["pairs"] for r in found if r["task"] == task])
                  for task in {row["task"] for row in found}}
        rows += [{**row, "family": family, "pooled_seed_variance": pooled[row["task"]][0],
                  "pooled_df": pooled[row["task"]][1],
                  **judged(row, row["relation"], family, pooled[row["task"]][0])} for row in found]
    return pd.DataFrame(rows)


def _mean(runs: list[dict]) -> float:
    return float(np.mean([run["dev"] for run in runs])) if runs else math.nan


def planner_blocks(found: pd.DataFrame) -> list:
    """The seeds planner for every link: the held-out seeds it has and would need for its test, at its claim's level,
    to detect its margin with 80% power, and the seeds that means in all (one more where a side chose its point on
    seed 1)."""
    rows = found[found["margin"].notna()]
    if not len(rows):
        return []
    needed = [None if n is None or pd.isna(n) else int(n) for n in rows["seeds_needed"]]
    frame = pd.DataFrame({
        "task": rows["task"], "link": rows["link"], "margin": [f"{m:.2f}" for m in rows["margin"]],
        "detectable now": [number(d) for d in rows["detectable"]], "held-out seeds now": rows["pairs"],
        "dev set's floor": [number(statistics.dev_set_floor(v, statistics.SIGNIFICANCE / max(f, 1)))
                            for v, f in zip(rows["example_variance"], rows["family"])],
        "held-out seeds needed": [str(n) if n is not None else "— (not on this dev set)" if math.isfinite(v)
                                  else "— (fewer than 2 held-out seeds)" for n, v in zip(needed, rows["seed_variance"])],
        "seeds in all": ["—" if n is None else str(n + s) for n, s in zip(needed, rows["selection_seeds"])]})
    return [Heading("Seeds planner"), Paragraph(
        "How many seeds each link needs for its test, at its claim's level, to detect its margin with 80% power, from "
        "the variance its runs show so far: the dev set's part its own, the seed part pooled over the claim's links on "
        "the task (weighted by their degrees of freedom: one link's 3 or 4 make a noisy plan), as is the detectable "
        "difference beside each verdict. The seed part shrinks with seeds, the dev set's own part does not: the "
        "dev set's floor is the smallest difference any number of seeds could detect on it (— in the seeds column "
        f"where the margin is below it, or {statistics.MAX_PLANNED_SEEDS} held-out seeds would not reach it). Seeds "
        "in all count the seed that chose a side's grid point, which no test uses."), Table(frame.reset_index(drop=True))]


def claims_document(runs: list[dict], labels: dict, margins: dict, grids: dict | None = None,
                    reference: pd.DataFrame | None = None) -> Document:
    found = verdicts(runs, labels, margins, grids, reference)
    document = Document("The papers' claims on real data", [Paragraph(
        "From the committed record of benchmarks/quality_claims.py (benchmarks/quality/claims_runs.jsonl; "
        "docs/evidence.md): a shallow BERT student (MiniLM-L6's first 3 layers) distilled from MiniLM-L6 "
        "fine-tuned on each task, and the thesis's LSTM_S. Dev scores x100. Each method's point is chosen on the "
        "first seed, and judged on its other seeds (all seeds where it has no grid). Each link is tested over those "
        "held-out seeds, paired, and the dev examples together, against its margin (the smallest difference of "
        "interest, declared with its source in benchmarks/quality/claim_margins.yaml). A claim's links are one "
        "family: each interval is at level 1 - 0.05/m for the claim's m tested links (Bonferroni), so that all of "
        "its verdicts are right together with 95% probability. The verdict is where the interval lies, in this "
        "order: contradicted (below 0; for >=, below minus the margin), holds (above 0; for >=, above minus the "
        "margin), no difference as large as the margin (for >, below the margin), otherwise inconclusive. "
        "Detectable: the smallest difference the test finds with 80% power at the observed spread and the claim's "
        "level; seeds needed: the held-out seeds per side that would detect the margin (— where no number up to "
        f"{statistics.MAX_PLANNED_SEEDS} does, the dev set's own noise being too large).")])
    for claim, paper, _, _ in CLAIMS:
        rows = found[found["claim"] == claim] if len(found) else found
        document.blocks += [Heading(claim), Paragraph(f"Paper: {paper}.")]
        if not len(rows):
            document.blocks.append(Paragraph("No link of this claim has both sides' searches complete, in runs a "
                                             "verdict may use, in the record yet."))
            continue
        if rows["selection_seeds"].any():
            document.blocks.append(Paragraph(
                "What these verdicts are about: each side at the grid point its search chose on seed 1, not the "
                "method over its grid; the choice's own variance (Bouthillier et al. 2021) is not in the test."))
        level = rows["level"].iloc[0]
        document.blocks.append(Table(pd.DataFrame({
            "task": rows["task"], "link": rows["link"], "difference": [signed(d) for d in rows["difference"]],
            "seeds paired": rows["pairs"],
            "p (two-sided, raw)": [number(p, "{:.3f}") for p in rows["p"]],
            f"{100 * level:.1f}% CI": ["—" if not math.isfinite(low) else f"[{signed(low)}, {signed(high)}]"
                                       for low, high in zip(rows["low"], rows["high"])],
            "margin": [number(m) for m in rows["margin"]],
            "paper's gain": [signed(g) for g in rows["paper_gain"]],
            "detectable": [number(d) for d in rows["detectable"]],
            "seeds needed": ["—" if n is None or pd.isna(n) else str(int(n)) for n in rows["seeds_needed"]],
            "verdict": rows["verdict"]})))
        by_source: dict[str, list[str]] = {}
        for row in rows.itertuples():
            by_source.setdefault(row.margin_source, []).append(f"{row.task} {row.link}")
        document.blocks.append(Paragraph(
            f"Intervals at {100 * level:.1f}% ({int(rows['family'].iloc[0])} links tested). Margins, by source: "
            + "; ".join(f"{source} ({', '.join(links)})" for source, links in by_source.items()) + "."))
    left_out = found[found["other_teachers"] > 0] if len(found) else found
    if len(left_out):
        document.blocks.append(Paragraph(
            "Seed pairs left out because their two runs learnt from different teachers (each GPU check fine-tunes "
            "its own, and such a difference would hold the teachers' too): "
            + "; ".join(f"{row.task} {row.link}, {row.other_teachers}" for row in left_out.itertuples())
            + ". Each of these links is tested on its pairs that share a teacher, if it has any."))
    if len(found):
        document.blocks += planner_blocks(found)
    # a GPU check's runs share the GPU and time themselves by the wall clock; the CPU runs by their CPU time
    seconds, unit = ("wall_seconds", "wall") if runs and all(run.get("device") for run in runs) else \
        ("cpu_seconds", "CPU")
    table = cells(runs, grids)
    tasks = list(dict.fromkeys(run["task"] for run in runs))
    lines = []
    for (task, experiment, method), cell in sorted(table.items(), key=lambda item: (tasks.index(item[0][0]),
                                                                                   item[0][1], item[0][2])):
        values = [run["dev"] for run in cell["held_out"]]
        spread = statistics.sample_std(values)
        cost = [run[seconds] for run in cell["runs"] if run.get(seconds) and not run.get("resumed")]
        lines.append({"task": task, "experiment": experiment,
                      "method": NAMES.get((experiment, method)) or METHOD_NAMES.get(method, method),
                      "metric": cell["metric"],
                      "chosen point": cell["point"] + (f" (search {cell['searched']})" if cell["searched"] else ""),
                      "headline": f"{cell['headline']:.2f}",
                      "held-out seeds": len(values),
                      "held-out mean ± std": (f"{np.mean(values):.2f}" + (f" ± {spread:.2f}" if math.isfinite(spread)
                                                                          else "")) if values else "—",
                      "grid, first seed": ", ".join(f"{p} {v:.2f}" for p, v in sorted(cell["grid"].items())),
                      f"{unit}-min per run": f"{np.mean(cost) / 60:.1f}" if cost else "—"})
    hours = sum(run.get(seconds) or 0 for run in runs) / 3600
    resumed = sum(bool(run.get("resumed")) for run in runs)
    document.blocks += [Heading("Every cell"), Paragraph(
        "headline: the chosen point's first-seed score, which chose it (a paper's best dev score is its like); "
        "held-out: the point's other seeds (all its seeds where the method has no grid), the only numbers the "
        "verdicts use."), Table(pd.DataFrame(lines)),
                        Paragraph(f"{len(runs)} runs; {hours:.1f} {unit}-hours of student training in the record (the "
                                  "teachers, pseudo-heads and teacher signals not included"
                                  + ("; jobs shared the GPU, so these hours overlap)." if unit == "wall" else ").")
                                  + (f" {resumed} of them resumed from a checkpoint after an interruption: their "
                                     f"{unit} time is their last attempt's alone, so the total is a lower bound and "
                                     f"the {unit}-min per run leaves them out." if resumed else ""))]
    return document
