"""Transfer-set generation throughput: kdflow's batched KV-cache sampler (finished sequences free their slot
at once) against one-at-a-time `generate` with the same model and settings, side by side; then the teacher
labelling the transfer set (logits and every pseudo-head, as `compute_teacher_signals` does).

    python benchmarks/generation_throughput.py                      # GPT-2-small-shaped generator, CPU
    python benchmarks/generation_throughput.py --generator medium --device cuda --sentences 4096 \\
        --batch-size 512 --teacher-size large --precision fp32 bf16

Models are randomly initialised (speed does not depend on the weights). A random model almost never emits
end-of-text, so a bias on that logit (``--mean-length``) makes sequence lengths vary around a realistic mean,
the same for both samplers. The projection for the thesis's 800,000 sentences per task uses the measured
rate (the thesis: 17 GPU-hours per task in 2019, ../shared/reference/thesis_runtimes.csv).

Each ``--precision`` (kdflow.core.precision: the forward passes under autocast, as the sampling and labelling
jobs run them) is measured in turn in the same process, the batched sampler and the labelling; ``--dtype`` is
the generator weights' storage (``generation.sampling.dtype``), independent of it. The rates of a mixed precision
over the first one listed are printed last. bf16 and fp16 speed on a CPU says nothing about a GPU's.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core import run_files  # noqa: E402
from kdflow.core.precision import PRECISIONS, resolve_precision  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.teachers.pseudo_heads import LayerHeads  # noqa: E402
from kdflow.transfer.generation import SamplingSettings, sample  # noqa: E402
from kdflow.transfer.labelling import compute_signals  # noqa: E402
from kdflow.transfer.sampling import CHUNK_SLOTS  # noqa: E402

GENERATORS = {"tiny": (4, 256, 4), "small": (12, 768, 12), "medium": (24, 1024, 16)}  # layers, width, heads
TEACHERS = {"minilm": (6, 384, 12, 1536), "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096)}
VOCAB, EOS = 50257, 50256
THESIS_HOURS = 17
SENTENCES = 800_000


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generator", choices=GENERATORS, default="small")
    parser.add_argument("--teacher-size", choices=TEACHERS, default="minilm")
    parser.add_argument("--sentences", type=int, default=256, help="sentences sampled by the batched sampler")
    parser.add_argument("--one-at-a-time", type=int, default=16, help="sentences sampled by one-at-a-time generate")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--mean-length", type=float, default=25.0, help="target mean tokens per sequence")
    parser.add_argument("--label-sentences", type=int, default=2048)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, default=["fp32"],
                        help="one or more, measured side by side (auto: what a job on this device resolves to)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    torch.manual_seed(0)

    layers, width, heads = GENERATORS[args.generator]
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_layer=layers, n_embd=width, n_head=heads,
                                       bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS))
    model = model.to(device, dtype).eval()
    # A random model's logits are near 0: this bias gives end-of-text probability ~1/mean_length per step.
    bias = math.log(VOCAB / (args.mean_length - 1))
    model.lm_head.register_forward_hook(lambda module, inputs, output: output.index_add(
        -1, torch.tensor([EOS], device=output.device), torch.full_like(output[..., :1], bias)))
    first_tokens = torch.randint(0, EOS, (args.sentences,), generator=torch.Generator().manual_seed(0)).tolist()
    prefixes = [[EOS, t] for t in first_tokens]
    settings = SamplingSettings(max_length=args.max_length, batch_size=args.batch_size)
    print(f"generator GPT-2 {args.generator} ({layers}x{width}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M), "
          f"{args.dtype}, device {device}, {torch.get_num_threads()} threads, max {args.max_length} tokens")

    precisions = [resolve_precision(name, device) for name in args.precision]
    chunk = CHUNK_SLOTS * args.batch_size
    sampled, labelled = {}, {}
    for precision in precisions:
        sampled[precision.name] = rates = sampler_rates(model, prefixes, settings, chunk, precision, args, device)
        tf32 = " (TF32 for the float32 matmuls left)" if precision.tf32 else ""
        print(f"\n{precision.name}{tf32}: mean {rates['mean_tokens']:.1f} tokens per sequence")
        print(f"{'sampler':<38}{'sentences/s':>12}{'800k sentences':>16}")
        for name, rate in ((f"batched KV cache, {args.batch_size} slots, refill", rates["batched"]),
                           (f"  the same in chunks of {chunk} (shards)", rates["chunked"]),
                           ("one at a time, generate()", rates["single"])):
            print(f"{name:<38}{rate:>12.1f}{SENTENCES / rate / 3600:>14.1f} h")
        print(f"speed-up {rates['batched'] / rates['single']:.1f}x; thesis: {THESIS_HOURS} GPU-hours per task")

    t_layers, t_width, t_heads, t_inter = TEACHERS[args.teacher_size]
    spec = {"architecture": dict(model_type="bert", num_hidden_layers=t_layers, hidden_size=t_width,
                                 num_attention_heads=t_heads, intermediate_size=t_inter, max_position_embeddings=512),
            "tokenizer": str(REPO / "demo/vocab.txt")}
    teacher, tokenizer = build_teacher(spec, num_labels=2)
    frame = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3)
    frame = pd.DataFrame({"idx": range(args.label_sentences), "text_b": None,
                          "text_a": frame["sentence"].sample(args.label_sentences, replace=True, random_state=0).values})
    with tempfile.TemporaryDirectory() as directory:
        directory = Path(directory)
        teacher.save_pretrained(directory / "model")
        tokenizer.save_pretrained(directory / "model")
        save_file(LayerHeads(t_layers, t_width, 2).state_dict(), str(directory / run_files.PSEUDO_HEADS),
                  metadata={"pooling": "cls"})
        for precision in precisions:
            sync(device)
            started = time.perf_counter()
            compute_signals(frame, "augmented", directory, directory / run_files.PSEUDO_HEADS, [], 128, 256, device,
                            directory / "teacher_signals.safetensors", precision=precision)
            sync(device)
            labelled[precision.name] = rate = len(frame) / (time.perf_counter() - started)
            print(f"\n{precision.name}: teacher labelling ({args.teacher_size}, {t_layers}x{t_width}, logits + "
                  f"{t_layers} pseudo-heads): {rate:.0f} sentences/s, {SENTENCES / rate / 3600:.2f} h for 800k "
                  "(model loading included)")
    reference = precisions[0].name
    for precision in precisions[1:]:
        ratios = {name: sampled[precision.name][name] / sampled[reference][name] for name in ("batched", "chunked")}
        print(f"\n{precision.name} over {reference} (sentences/s ratio): batched sampler {ratios['batched']:.2f}x, "
              f"in chunks {ratios['chunked']:.2f}x, labelling {labelled[precision.name] / labelled[reference]:.2f}x")


def sampler_rates(model, prefixes, settings, chunk, precision, args, device) -> dict[str, float]:
    """Sentences per second of the batched sampler (whole, and chunk by chunk as the shards sample) and of
    one-at-a-time ``generate``, all in ``precision``; and the mean tokens per sampled sequence."""
    sample(model, prefixes[: args.batch_size], EOS, settings, torch.Generator(device).manual_seed(0), device,
           precision)  # warm-up
    sync(device)
    started = time.perf_counter()
    results = sample(model, prefixes, EOS, settings, torch.Generator(device).manual_seed(1), device, precision)
    sync(device)
    batched = len(results) / (time.perf_counter() - started)

    # Sampling shards sample chunk by chunk (the unit of their checkpoints): a chunk's last slots drain idle.
    sync(device)
    started = time.perf_counter()
    for start in range(0, len(prefixes), chunk):
        sample(model, prefixes[start:start + chunk], EOS, settings, torch.Generator(device).manual_seed(start),
               device, precision)
    sync(device)
    chunked = len(prefixes) / (time.perf_counter() - started)

    sync(device)
    started = time.perf_counter()
    with precision.autocast():
        for prefix in prefixes[: args.one_at_a_time]:
            model.generate(torch.tensor([prefix], device=device), do_sample=True, top_k=0, top_p=1.0,
                           temperature=1.0, max_length=args.max_length, eos_token_id=EOS, pad_token_id=EOS)
    sync(device)
    single = args.one_at_a_time / (time.perf_counter() - started)
    return {"batched": batched, "chunked": chunked, "single": single,
            "mean_tokens": sum(len(tokens) for tokens, _ in results) / len(results)}

if __name__ == "__main__":
    main()
