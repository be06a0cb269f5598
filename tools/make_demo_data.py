"""Cut the small real-data fixtures that kdflow ships for its offline demo and tests.

Users of the repository do not have the full GLUE / Sara data, so the demo and the test suite run on
excerpts of it that live in the repository. This script makes them from a local copy of the original
releases (``--source``, laid out as ``glue/<Task>/{train,dev,test}.tsv`` and ``sara/*.tsv``):

* ``<out>/glue/<Task>/{train,dev,test}.tsv`` for CoLA, SST-2, MRPC, STS-B and RTE, and
  ``<out>/sara/{train,dev,test}.tsv`` plus a whole copy of ``sara/int_to_intent.tsv``.
  Each file is a seeded random sample of the source's data rows, written in the source's row order
  and copied byte for byte: same header line, same UTF-8 BOM, same line endings, no re-quoting, so
  the fixtures exercise the same format quirks as the real files. Samples of labelled files contain
  at least one row of every label; the remaining rows are drawn uniformly.
* ``<out>/SOURCES.md``: where every fixture was cut from, how many rows, the seed, the licences.
* ``--vocab`` (``demo/vocab.txt``): a small lowercase BERT-style WordPiece vocabulary trained on the
  sentences of the fixtures, so that the demo can build tiny models without downloading a tokenizer.

The output is deterministic; rerunning the script reproduces the same bytes. Regenerate with

    python tools/make_demo_data.py --source ../shared/data --out demo/data --vocab demo/vocab.txt

Needs only the standard library and ``tokenizers``.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
from collections import defaultdict
from pathlib import Path

from tokenizers import BertWordPieceTokenizer

REPO = Path(__file__).resolve().parents[1]
SEED = 0
BOM = b"\xef\xbb\xbf"
SIZES = {"glue": {"train": 240, "dev": 80, "test": 40}, "sara": {"train": 300, "dev": 120, "test": 60}}
GLUE_TASKS = ["CoLA", "SST-2", "MRPC", "STS-B", "RTE"]
HEADERLESS = {"glue/CoLA/train.tsv", "glue/CoLA/dev.tsv", "sara/train.tsv", "sara/dev.tsv", "sara/test.tsv"}
# Column indices of headerless files: (label, text).
HEADERLESS_COLUMNS = {"glue/CoLA": (1, [3]), "sara": (0, [1])}
# Column names of files with a header. STS-B's "score" is a regression target, not a label.
LABEL_NAMES = {"label", "Quality"}
TEXT_NAMES = {"sentence", "sentence1", "sentence2", "#1 String", "#2 String"}
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_SIZE = 3000
LICENCES = {
    "CoLA": "GLUE terms",
    "SST-2": "Stanford Sentiment Treebank: cite Socher et al. 2013 (EMNLP)",
    "MRPC": "Microsoft Research Paraphrase Corpus terms",
    "STS-B": "CC BY-SA 4.0 (see glue/STS-B/LICENSE.txt in the source data)",
    "RTE": "GLUE terms",
    "sara": "GPLv3 (Rasa demo data, \"Sara\"); names and e-mail addresses pseudonymised",
}


def split_lines(data: bytes) -> list[bytes]:
    """Split on b"\\n" only, keeping the line ends (and a last line without one) intact."""
    lines = data.split(b"\n")
    tail = lines.pop()
    return [line + b"\n" for line in lines] + ([tail] if tail else [])


def fields(line: bytes) -> list[str]:
    """The tab-separated fields of a line, read with quoting disabled as GLUE loaders do."""
    return line.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n").split("\t")


def read_table(path: Path, rel: str) -> tuple[bytes, list[bytes]]:
    """Return (prefix, data rows): the prefix is the BOM plus the header line, b"" if neither."""
    lines = split_lines(path.read_bytes())
    if rel in HEADERLESS:
        bom = BOM if lines and lines[0].startswith(BOM) else b""
        if bom:
            lines[0] = lines[0][len(bom) :]
        return bom, lines
    return lines[0], lines[1:]


def columns(rel: str, prefix: bytes) -> tuple[int | None, list[int]]:
    """Index of the label column (None if there is none) and indices of the sentence columns."""
    if rel in HEADERLESS:
        return HEADERLESS_COLUMNS[rel.rsplit("/", 1)[0]]
    names = fields(prefix)
    label = next((i for i, name in enumerate(names) if name in LABEL_NAMES), None)
    return label, [i for i, name in enumerate(names) if name in TEXT_NAMES]


def sample(rows: list[bytes], k: int, label: int | None, rng: random.Random) -> list[bytes]:
    """k rows in their original order; one row per label first, the rest uniformly at random."""
    if k >= len(rows):
        return list(rows)
    chosen = set()
    if label is not None:
        by_label = defaultdict(list)
        for i, row in enumerate(rows):
            by_label[fields(row)[label]].append(i)
        chosen.update(rng.choice(by_label[name]) for name in sorted(by_label))
    rest = [i for i in range(len(rows)) if i not in chosen]
    chosen.update(rng.sample(rest, k - len(chosen)))
    return [rows[i] for i in sorted(chosen)]


def cut(source: Path, out: Path, rel: str, k: int) -> dict:
    """Write a sample of source/rel to out/rel; return what SOURCES.md and the vocabulary need."""
    src = source / rel
    prefix, rows = read_table(src, rel)
    label, text_cols = columns(rel, prefix)
    kept = sample(rows, k, label, random.Random(SEED))
    dest = out / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = prefix + b"".join(kept)
    dest.write_bytes(data)
    texts = [fields(row)[i] for row in kept for i in text_cols]
    labels = sorted({fields(row)[label] for row in kept}) if label is not None else None
    return {"rel": rel, "kept": len(kept), "total": len(rows), "sha256": sha256(src), "texts": texts,
            "labels": labels, "open_end": not data.endswith(b"\n")}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_fixtures(source: Path, out: Path) -> list[dict]:
    """Cut every fixture file and copy sara/int_to_intent.tsv whole."""
    made = []
    for task in GLUE_TASKS:
        for split, k in SIZES["glue"].items():
            made.append(cut(source, out, f"glue/{task}/{split}.tsv", k))
    for split, k in SIZES["sara"].items():
        made.append(cut(source, out, f"sara/{split}.tsv", k))
    rel = "sara/int_to_intent.tsv"
    shutil.copyfile(source / rel, out / rel)
    n = len(split_lines((source / rel).read_bytes()))
    made.append({"rel": rel, "kept": n, "total": n, "sha256": sha256(source / rel), "texts": [],
                 "labels": None, "open_end": not (source / rel).read_bytes().endswith(b"\n")})
    return made


def write_sources(out: Path, made: list[dict]) -> None:
    """Write SOURCES.md: provenance, sample sizes, seed and licence of every fixture."""
    lines = [
        "# Sources of the demo and test fixtures",
        "",
        "Small excerpts of public data sets, cut by `tools/make_demo_data.py` from the original releases",
        "(classic GLUE TSV layout, and the thesis's split of the Rasa \"Sara\" intent data). Every file",
        f"holds a random sample (Python `random.Random({SEED})`, one per file) of its source's data rows,",
        "kept in the source's order and copied byte for byte (header line, UTF-8 BOM, line endings and",
        "quoting exactly as in the source). Samples of labelled files contain every label at least once.",
        "`sara/int_to_intent.tsv` is copied whole. `../vocab.txt` is a WordPiece vocabulary trained on",
        "the sentences of these files.",
        "",
        "Regenerate (from the repository root, with the source data in `../shared/data`):",
        "",
        "    python tools/make_demo_data.py --source ../shared/data --out demo/data --vocab demo/vocab.txt",
        "",
        "| file (in demo/data) | cut from (in shared/data) | data rows | seed | sha256 of the source | licence |",
        "|---|---|---:|---:|---|---|",
    ]
    for m in made:
        group = m["rel"].split("/")[1] if m["rel"].startswith("glue/") else "sara"
        seed = "whole file" if m["kept"] == m["total"] and m["rel"].endswith("int_to_intent.tsv") else SEED
        lines.append(f"| `{m['rel']}` | `{m['rel']}` | {m['kept']} of {m['total']} | {seed} "
                     f"| `{m['sha256']}` | {LICENCES[group]} |")
    open_end = ", ".join(f"`{m['rel']}`" for m in made if m["open_end"])
    if open_end:
        lines += ["", f"Files that, like their sources, end without a newline after their last row: {open_end}."]
    lines += [
        "",
        "## Licences",
        "",
        "- STS-B: CC BY-SA 4.0.",
        "- SST-2: Stanford Sentiment Treebank; cite Socher et al. 2013, \"Recursive Deep Models for",
        "  Semantic Compositionality Over a Sentiment Treebank\", EMNLP.",
        "- MRPC: Microsoft Research Paraphrase Corpus terms.",
        "- CoLA, RTE: GLUE terms.",
        "- Sara: from the Rasa demo data, GPLv3; personal names and e-mail addresses were replaced by",
        "  `__PERSON_NAME__` and `__EMAIL_ADDRESS__`.",
        "",
    ]
    (out / "SOURCES.md").write_text("\n".join(lines), encoding="utf-8")


def train_vocab(texts: list[str], path: Path) -> None:
    """Train a lowercase BERT WordPiece vocabulary on texts and write it one token per line.

    The trainer breaks ties between equally frequent merges by hash order, which differs from run to
    run, so the ids it assigns are not reproducible (the set of tokens is, on these fixtures). The
    special tokens come first, in BERT's order; the others are written sorted, which makes the file
    reproducible and does not change tokenization (WordPiece matches tokens regardless of their ids).
    """
    tokenizer = BertWordPieceTokenizer(lowercase=True, strip_accents=True, clean_text=True)
    tokenizer.train_from_iterator(texts, vocab_size=VOCAB_SIZE, min_frequency=1,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False)
    tokens = SPECIAL_TOKENS + sorted(set(tokenizer.get_vocab()) - set(SPECIAL_TOKENS))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")


def unk_rate(texts: list[str], path: Path) -> tuple[int, float]:
    """Vocabulary size and the share of [UNK] tokens when the written vocabulary tokenizes texts."""
    tokenizer = BertWordPieceTokenizer(str(path), lowercase=True, strip_accents=True)
    tokens = [t for enc in tokenizer.encode_batch(texts, add_special_tokens=False) for t in enc.tokens]
    return tokenizer.get_vocab_size(), tokens.count("[UNK]") / max(len(tokens), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "demo" / "data")
    parser.add_argument("--vocab", type=Path, default=REPO / "demo" / "vocab.txt")
    args = parser.parse_args()

    made = make_fixtures(args.source, args.out)
    write_sources(args.out, made)
    texts = [text for m in made for text in m["texts"]]
    train_vocab(texts, args.vocab)
    size, rate = unk_rate(texts, args.vocab)
    for m in made:
        labels = f"  labels {m['labels'] if len(m['labels']) < 10 else len(m['labels'])}" if m["labels"] else ""
        print(f"{m['rel']}: {m['kept']}/{m['total']} rows{labels}")
    print(f"{args.vocab}: {size} tokens, [UNK] rate {rate:.4%} over {len(texts)} fixture sentences")


if __name__ == "__main__":
    main()
