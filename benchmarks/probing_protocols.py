"""Probing protocols side by side: SentEval's (kdflow's default) against kdflow's earlier one, on the same
synthetic encodings (``probing_throughput.synthetic_encodings``), with two steps in between that show which
change does what:

    old             dev every epoch, stop at the 5th consecutive miss, no L2 (kdflow before issue 14)
    old, every 4    the same with dev every 4 epochs (``epochs_per_check: 4`` alone)
    SentEval rule   SentEval's stopping (dev every 4 epochs, misses never reset, stop at the 6th), no L2
    SentEval        SentEval's stopping and its L2 search {1e-5, ..., 1e-2} (the default)

    python benchmarks/probing_protocols.py --threads 2 --train 5000 --dev 1000 --test 1000 --dim 128
    python benchmarks/probing_protocols.py --device cuda            # SentEval's 100k/10k/10k x 768

Every protocol trains the width {50, 100, 200} x dropout {0, 0.1, 0.2} grid as one batched model with the same
seed (the old protocol's dropout now acts before the sigmoid, as SentEval's; otherwise it is as it was). Printed
per data seed and protocol: the selected configuration, its dev and test accuracy, its best and last epoch, the
mean and the largest epochs trained over the grid, and the wall time; then per protocol the mean over data seeds
and the mean test-accuracy difference from the old protocol.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.probing_throughput import add_problem_arguments, synthetic_encodings  # noqa: E402
from kdflow.probing.probe import ProbeSettings, probe  # noqa: E402

SENTEVAL = ProbeSettings()
PROTOCOLS = {
    "old": replace(SENTEVAL, early_stopping="consecutive", epochs_per_check=1, l2_penalties=(0.0,)),
    "old, every 4": replace(SENTEVAL, early_stopping="consecutive", l2_penalties=(0.0,)),
    "SentEval rule": replace(SENTEVAL, l2_penalties=(0.0,)),
    "SentEval": SENTEVAL,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(parser)
    parser.add_argument("--data-seeds", type=int, nargs="+", default=[0], help="one synthetic problem per seed")
    parser.add_argument("--protocols", nargs="+", choices=list(PROTOCOLS), default=list(PROTOCOLS))
    parser.add_argument("--seed", type=int, default=SENTEVAL.seed, help="probe seed (init, shuffling, dropout)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    print(f"encodings {args.train:,}/{args.dev:,}/{args.test:,} (train/dev/test) x {args.dim}, {args.classes} "
          f"classes, label noise {args.label_noise:g}; probe seed {args.seed}; device {args.device}, "
          f"{torch.get_num_threads()} threads\n")
    print("| data seed | protocol | configs | selected (hidden, dropout, L2) | dev acc | test acc | best / last "
          "epoch | epochs trained: mean / max over grid | wall (s) |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|")
    results = {name: [] for name in args.protocols}
    for data_seed in args.data_seeds:
        data = [array for i, n in enumerate((args.train, args.dev, args.test))
                for array in synthetic_encodings(n, args.dim, args.classes, args.label_noise, data_seed, i)]
        for name in args.protocols:
            settings = replace(PROTOCOLS[name], seed=args.seed, device=args.device)
            began = time.perf_counter()
            result = probe(*data, settings=settings)
            seconds = time.perf_counter() - began
            selected = next(c for c in result["configs"] if all(c[key] == value
                                                                 for key, value in result["selected"].items()))
            trained = [c["epochs_trained"] for c in result["configs"]]
            results[name].append((result["dev_accuracy"], result["test_accuracy"], selected["epochs_trained"],
                                  np.mean(trained), seconds))
            print(f"| {data_seed} | {name} | {len(result['configs'])} | {tuple(result['selected'].values())} "
                  f"| {100 * result['dev_accuracy']:.2f} | {100 * result['test_accuracy']:.2f} "
                  f"| {selected['best_epoch']} / {selected['epochs_trained']} | {np.mean(trained):.1f} / "
                  f"{max(trained)} | {seconds:.1f} |", flush=True)

    print(f"\nmeans over {len(args.data_seeds)} data seed(s):\n")
    print("| protocol | dev acc | test acc | test - old (points) | epochs of the selected | mean epochs over grid "
          "| wall (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    old_test = np.array([run[1] for run in results["old"]]) if "old" in results else None
    for name, runs in results.items():
        dev, test, selected_epochs, grid_epochs, seconds = np.array(runs).T
        versus_old = f"{100 * np.mean(test - old_test):+.2f}" if old_test is not None else "-"
        print(f"| {name} | {100 * dev.mean():.2f} | {100 * test.mean():.2f} | {versus_old} "
              f"| {selected_epochs.mean():.1f} | {grid_epochs.mean():.1f} | {seconds.mean():.1f} |")


if __name__ == "__main__":
    main()
