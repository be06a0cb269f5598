"""Probing throughput: kdflow's batched probe grid (all nhid x dropout x L2 configurations trained as one model, one
``probe`` call) against training each configuration on its own (one ``probe`` call per configuration), on one
layer of encodings of SentEval's probing-set size, side by side.

    python benchmarks/probing_throughput.py --threads 2                 # 100k/10k/10k x 768, 36 configs, CPU
    python benchmarks/probing_throughput.py --train 5000 --max-epochs 30  # quick look
    python benchmarks/probing_throughput.py --device cuda --mode batched

Encodings are synthetic: Gaussian features with a few directions of larger variance, labelled by a random
two-layer tanh network (a linear part plus a nonlinear one) with a fraction of labels replaced at random, so
the probe learns for a while and early stopping (SentEval's rule on dev accuracy) ends training after tens of
epochs, as on real probing tasks. Wall times include the dev checks and the final test pass.
On CPU, float32 subnormals that appear as the probes train can make later epochs markedly slower than the
first; ``--flush-denormal`` measures the same run with them flushed to zero.

Printed: wall time, epochs run, time per epoch and the configuration-epochs trained per second of each mode,
the speed-up, and per configuration the dev/test accuracy and epochs of both modes. The batched grid keeps
computing configurations that have already stopped (their results stay frozen) until the last one stops; the
sequential runs stop each configuration on its own, so they train fewer configuration-epochs in total. Given
the seed both modes should select the same configuration with the same test accuracies (kdflow.probing.probe's
docstring); the largest per-configuration difference is printed. Agreement is exact only as far as the stacked
and the single-configuration matmuls round alike; a last-bit difference can grow over an epoch or more and move
a dev accuracy, and with it an early-stopping decision.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.probing.probe import ProbeSettings, probe  # noqa: E402


def synthetic_encodings(n: int, dim: int, classes: int, label_noise: float, seed: int,
                        split: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` encodings (float32, n x dim) with labels in 0..classes-1 from a fixed random labelling function.

    Features: standard Gaussian plus 32 shared directions of larger variance and a constant offset, loosely
    like a transformer layer's encodings. Labels: argmax of a linear map plus a 64-unit tanh layer of the
    features (the same function for every call with the same ``seed`` and ``dim``), then each label is replaced
    by a uniformly random class with probability ``label_noise``. ``split`` only changes the sample drawn."""
    function_rng = np.random.default_rng([seed, dim, classes])  # the labelling function, shared by all splits
    directions = function_rng.standard_normal((32, dim)).astype(np.float32)
    offset = function_rng.standard_normal(dim).astype(np.float32) * 0.5
    linear = function_rng.standard_normal((dim, classes)) / np.sqrt(dim)
    inner = function_rng.standard_normal((dim, 64)) * 1.5 / np.sqrt(dim)
    outer = function_rng.standard_normal((64, classes)) * 1.5 / np.sqrt(64)

    rng = np.random.default_rng([seed, split, n])
    X = rng.standard_normal((n, dim), dtype=np.float32)
    X += rng.standard_normal((n, 32), dtype=np.float32) @ directions * 0.5
    X += offset
    centred = (X - offset).astype(np.float64)
    scores = centred @ linear + np.tanh(centred @ inner) @ outer
    y = scores.argmax(1)
    noisy = rng.random(n) < label_noise
    y[noisy] = rng.integers(0, classes, noisy.sum())
    return X, y.astype(np.int64)


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """The synthetic probing problem's size and difficulty (the arguments of :func:`synthetic_encodings`)."""
    parser.add_argument("--train", type=int, default=100_000, help="training encodings (SentEval: 100k)")
    parser.add_argument("--dev", type=int, default=10_000, help="dev encodings (SentEval: 10k)")
    parser.add_argument("--test", type=int, default=10_000, help="test encodings (SentEval: 10k)")
    parser.add_argument("--dim", type=int, default=768, help="encoding dimension")
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--label-noise", type=float, default=0.1, help="fraction of labels replaced at random")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    defaults = ProbeSettings()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(parser)
    parser.add_argument("--max-epochs", type=int, default=defaults.max_epochs,
                        help=f"epoch cap of every probe (ProbeSettings' default: {defaults.max_epochs})")
    parser.add_argument("--mode", choices=["both", "batched", "sequential"], default="both")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="probe seed (init, shuffling, dropout)")
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--flush-denormal", action="store_true",
                        help="torch.set_flush_denormal(True) for the whole run (CPU: subnormal floats become 0)")
    args = parser.parse_args()
    if args.classes < 2:
        parser.error("--classes must be at least 2")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.flush_denormal and not torch.set_flush_denormal(True):
        parser.error("--flush-denormal: not supported on this CPU")
    device = torch.device(args.device)

    started = time.perf_counter()
    splits = {name: synthetic_encodings(n, args.dim, args.classes, args.label_noise, args.data_seed, i)
              for i, (name, n) in enumerate((("train", args.train), ("dev", args.dev), ("test", args.test)))}
    data = [array for split in splits.values() for array in split]
    data_seconds = time.perf_counter() - started
    settings = ProbeSettings(max_epochs=args.max_epochs, seed=args.seed, device=args.device)
    grid = settings.grid
    cap = "ProbeSettings' default" if args.max_epochs == defaults.max_epochs else "capped"
    print(f"encodings {args.train:,}/{args.dev:,}/{args.test:,} (train/dev/test) x {args.dim}, {args.classes} classes, "
          f"label noise {args.label_noise:g} (generated in {data_seconds:.1f} s)\n"
          f"grid {len(grid)} configs: hidden {settings.hidden_sizes} x dropout {settings.dropouts} x L2 "
          f"{settings.l2_penalties}; batch {settings.batch_size}, tenacity {settings.tenacity}, dev every "
          f"{settings.epochs_per_check} epochs, max epochs {settings.max_epochs} ({cap}); "
          f"seed {settings.seed}; device {device}, {torch.get_num_threads()} threads, "
          f"denormals {'flushed to zero' if args.flush_denormal else 'kept (torch default)'}")

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    # Warm-up (thread pools, allocator, kernels): one epoch on a slice, not timed.
    small = [a[:min(len(a), 1024)] for a in data]
    probe(*small, settings=ProbeSettings(max_epochs=1, seed=args.seed, device=args.device))

    def timed(configuration_settings: ProbeSettings) -> tuple[dict, float, float]:
        sync(device)
        began, cpu_began = time.perf_counter(), time.process_time()
        result = probe(*data, settings=configuration_settings)
        sync(device)
        return result, time.perf_counter() - began, time.process_time() - cpu_began

    # mode -> (per-config results in grid order, selected index, wall seconds, CPU seconds, epochs run by the loop)
    runs = {}
    if args.mode in ("both", "batched"):
        result, seconds, cpu = timed(settings)
        configs = result["configs"]
        runs["batched"] = (configs, grid.index(tuple(result["selected"].values())), seconds, cpu,
                           max(c["epochs_trained"] for c in configs))
        print(f"batched: {seconds:.1f} s, {runs['batched'][-1]} epochs", flush=True)
    if args.mode in ("both", "sequential"):
        configs, seconds, cpu = [], 0.0, 0.0
        for hidden, dropout, l2 in grid:
            result, run_seconds, run_cpu = timed(replace(settings, hidden_sizes=(hidden,), dropouts=(dropout,),
                                                         l2_penalties=(l2,)))
            configs.append(result["configs"][0])
            seconds, cpu = seconds + run_seconds, cpu + run_cpu
            print(f"sequential hidden {hidden}, dropout {dropout}, L2 {l2:g}: {run_seconds:.1f} s, "
                  f"{configs[-1]['epochs_trained']} epochs", flush=True)
        dev = np.array([c["dev_accuracy"] for c in configs])
        runs["sequential"] = (configs, int(np.argmax(dev)), seconds, cpu, sum(c["epochs_trained"] for c in configs))

    print("\n| mode | wall (s) | CPU (s) | epochs run | s / epoch | config-epochs (useful / computed) "
          "| useful config-epochs / s | selected (hidden, dropout, L2) | dev acc | test acc |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for mode, (configs, selected, seconds, cpu, epochs) in runs.items():
        useful = sum(c["epochs_trained"] for c in configs)
        computed = len(grid) * epochs if mode == "batched" else useful
        unit = "grid epochs" if mode == "batched" else "single-config epochs"
        print(f"| {mode} | {seconds:.1f} | {cpu:.1f} | {epochs} {unit} | {seconds / epochs:.3f} "
              f"| {useful} / {computed} | {useful / seconds:.2f} | {grid[selected]} "
              f"| {100 * configs[selected]['dev_accuracy']:.2f} | {100 * configs[selected]['test_accuracy']:.2f} |")

    print("\n| hidden | dropout | L2 | " + " | ".join(f"{mode} dev | {mode} test | {mode} best / trained epochs"
                                              for mode in runs) + " |")
    print("|---:|---:|---:|" + "---:|---:|---:|" * len(runs))
    for k, (hidden, dropout, l2) in enumerate(grid):
        cells = [f"{100 * c['dev_accuracy']:.2f} | {100 * c['test_accuracy']:.2f} | "
                 f"{c['best_epoch']} / {c['epochs_trained']}"
                 for c in (configs[k] for configs, *_ in runs.values())]
        print(f"| {hidden} | {dropout} | {l2:g} | " + " | ".join(cells) + " |")

    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n1-minute load average: {load_before:.2f} before, {load_after:.2f} after, on {os.cpu_count()} CPUs "
          "(other processes competing for the cores inflate the wall times; CPU above wall = threads used)")
    if len(runs) == 2:
        (batched, b_selected, b_seconds, *_), (sequential, s_selected, s_seconds, *_) = runs.values()
        test_diff = max(abs(b["test_accuracy"] - s["test_accuracy"]) for b, s in zip(batched, sequential))
        dev_diff = max(abs(b["dev_accuracy"] - s["dev_accuracy"]) for b, s in zip(batched, sequential))
        same_epochs = all((b["best_epoch"], b["epochs_trained"]) == (s["best_epoch"], s["epochs_trained"])
                          for b, s in zip(batched, sequential))
        print(f"\nspeed-up (sequential / batched wall time): {s_seconds / b_seconds:.2f}x")
        print(f"selected configuration: batched {grid[b_selected]}, sequential {grid[s_selected]} -> "
              f"{'same' if b_selected == s_selected else 'DIFFERENT'}")
        print(f"max |test accuracy difference| over the {len(grid)} configs: {100 * test_diff:.4f} points; "
              f"dev: {100 * dev_diff:.4f} points; best/trained epochs {'all equal' if same_epochs else 'DIFFER'}")


if __name__ == "__main__":
    main()
