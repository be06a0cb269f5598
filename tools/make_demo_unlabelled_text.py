"""Cut the demo's unlabelled text (config `unlabelled`): SST-2 training sentences that the demo's own train split
does not hold, one per line, plus two of the demo's dev sentences, which the transfer set's hygiene must drop as
copies of dev (a leak). Regenerate (from the repository root, with the source data in ../shared/data):

    python tools/make_demo_unlabelled_text.py --source ../shared/data --out demo/data/unlabelled/sst2.txt
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path


def sentences(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        return [row[0] for row in list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="the GLUE/Sara data directory (../shared/data)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=150)
    args = parser.parse_args()
    demo = Path(__file__).resolve().parents[1] / "demo/data/glue/SST-2"
    taken = set(sentences(demo / "train.tsv"))
    pool = [s for s in sentences(args.source / "glue/SST-2/train.tsv") if s not in taken and len(s.split()) >= 4]
    chosen = random.Random(0).sample(pool, args.lines) + sentences(demo / "dev.tsv")[:2]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(f"{s}\n" for s in chosen), encoding="utf-8")


if __name__ == "__main__":
    main()
