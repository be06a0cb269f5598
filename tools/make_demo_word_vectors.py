"""Write the demo's word-vectors file: synthetic stand-ins for word2vec's GoogleNews vectors, which are 3.6 GB and
not downloadable offline, so that the demo runs the thesis's word-level students (Sučík 2020 §4.3.3) end to end.

The words are the most frequent words of the demo's SST-2 training excerpt, tokenised as a word-level student
reads them (lower-cased BERT basic tokenisation, :func:`kdflow.students.tokens.transfer_words`); the rest of the
excerpt's words, and the generated sentences' new ones, stay out of the file, as many words are missing from
word2vec, so the demo draws their vectors at random as the thesis does. The vectors are seeded random numbers,
not word2vec's, in word2vec's text format (a ``count dim`` header, then ``word v1 ... vdim`` per line).

    python tools/make_demo_word_vectors.py --out demo/data/word_vectors.txt

The output is deterministic.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.students.tokens import transfer_words

REPO = Path(__file__).resolve().parents[1]
SEED = 0
WORDS = 400  # of the excerpt's ~1,000 words
DIM = 50  # word2vec's is 300; the demo's students are tiny


def sst2_sentences(path: Path) -> list[str]:
    """The sentence column of a GLUE SST-2 TSV (unquoted, one header line)."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0] for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sst2", type=Path, default=REPO / "demo/data/glue/SST-2/train.tsv")
    parser.add_argument("--out", type=Path, default=REPO / "demo/data/word_vectors.txt")
    args = parser.parse_args()

    words = transfer_words(pd.DataFrame({"text_a": sst2_sentences(args.sst2), "text_b": None}))[:WORDS]
    vectors = np.random.default_rng(SEED).normal(0.0, 0.1, size=(len(words), DIM))
    lines = [f"{len(words)} {DIM}"] + [" ".join([word, *(f"{value:.4f}" for value in row)])
                                        for word, row in zip(words, vectors)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(words)} words x {DIM}")


if __name__ == "__main__":
    main()
