"""Pieces shared by the students: option checking and the thesis's token-embedding options.

Token embeddings (Sučík 2020 §4.3.3, §5.1 footnote 1, Appendix B.2.1), the ``embeddings`` option of bilstm,
bilstm_s, gated_cnn and bert_s: ``{source: random | teacher | file, mode: non_static | static | multichannel,
dim: N, path: ..., init: uniform | normal}``.

- ``source: random``: ``dim``-wide vectors drawn from U[-0.25, 0.25] (``init: uniform``), the range the thesis (after
  Kim 2014) uses for words without a pre-trained vector and for its from-scratch LSTM_S, or from N(0, 0.02)
  (``init: normal``), BERT's initialisation, which the thesis's from-scratch BERT_S has (§6.1, Figs. 6.3 and C.1;
  ``init`` applies to random vectors only). ``teacher``: the fine-tuned teacher's wordpiece matrix, read from
  ``teacher_dir/model`` (wordpiece students only). ``file``: word vectors in word2vec/GloVe text format
  (``word v1 v2 ...`` per line, an optional ``count dim`` header), or word2vec's binary format when the name ends in
  ``.bin`` (GoogleNews-vectors-negative300.bin), either optionally gzipped (``.gz``). They are matched to the
  student's vocabulary by exact token: the teacher's wordpieces (a leading RoBERTa ``Ġ`` or SentencePiece ``▁`` word
  marker is ignored) or a word-level student's lower-cased words (:mod:`kdflow.students.tokens`); only the rows of
  vocabulary tokens are kept. Tokens the file lacks (``##`` pieces, out-of-vocabulary words, ``<unk>``) are drawn
  from U[-0.25, 0.25], and the coverage is logged. ``dim`` is the vectors' own width: needed for ``random`` (a student
  may default it), checked against the teacher or file otherwise.
- ``mode`` (Kim 2014, thesis §4.3.3): ``static`` freezes the vectors, ``non_static`` trains them,
  ``multichannel`` keeps a frozen and a trainable copy and concatenates the two vectors of each token, as the thesis
  states ("the two embeddings produced are concatenated together for further processing"). A linear layer after
  the concatenation sums a separate linear map of each channel, which is how Kim combines channels (each filter is
  applied to both channels and the results added).
- A student whose layers need a fixed width (bert_s: d_h; gated_cnn: its hidden size) gets a trainable linear
  projection from the (concatenated) vectors to that width when they differ, as the thesis does for BERT_S with
  the teacher's 1024-wide wordpieces (§5.1 footnote 1). Recurrent students take the vectors at their own width
  (this is what reproduces the thesis's LSTM_S sizes, Table 5.2: 2.41M non-embedding parameters with 300-wide
  multichannel word2vec, 5.90M with 1024-wide multichannel wordpieces on Sara).
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Callable, Iterator
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoModel

from kdflow.core.errors import UserError
from kdflow.students.registry import StudentContext, with_defaults
from kdflow.students.tokens import WordTokenizer

log = logging.getLogger("kdflow")

SOURCES = ("random", "teacher", "file")
EMBEDDING_DEFAULTS = {"source": "random", "mode": "non_static", "dim": None, "path": None,
                      "init": "uniform"}  # a student may change them
MODES = ("non_static", "static", "multichannel")
INITS = ("uniform", "normal")  # distributions of random vectors
CHANNELS = {"static": (True,), "non_static": (False,), "multichannel": (True, False)}  # frozen? per channel
UNSEEN_RANGE = 0.25  # U[-0.25, 0.25] for vectors with no pre-trained value (thesis §4.3.3, Kim 2014)
NORMAL_STD = 0.02  # N(0, 0.02): BERT's initializer_range, the thesis's from-scratch BERT_S (§6.1)
WORD_MARKERS = ("Ġ", "▁")  # RoBERTa/GPT-2 and SentencePiece mark a word-initial piece; word vectors do not


class VectorsError(UserError, ValueError):
    """A word-vectors file that does not follow its format; the message names the file and line."""


def teacher_model_dir(context: StudentContext) -> Path:
    if context.teacher_dir is None:
        raise ValueError("this student needs the fine-tuned teacher (StudentContext.teacher_dir is not set)")
    return Path(context.teacher_dir) / "model"


class TokenEmbedding(nn.Module):
    """Token ids [B, T] -> vectors [B, T, width]: one or two copies of ``vectors`` (see the module docstring)."""

    def __init__(self, vectors: torch.Tensor, mode: str, width: int | None = None):
        super().__init__()
        self.channels = nn.ModuleList(
            nn.Embedding.from_pretrained(vectors.clone(), freeze=frozen) for frozen in CHANNELS[mode]
        )
        native = vectors.shape[1] * len(self.channels)
        self.width = width or native
        self.projection = nn.Linear(native, self.width) if self.width != native else nn.Identity()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.projection(torch.cat([channel(input_ids) for channel in self.channels], dim=-1))


def non_embedding_parameters(module: nn.Module) -> int:
    """Parameters outside token, position and token-type embeddings, the size the thesis reports (Table 5.2,
    Tables B.1-B.2): every ``nn.Embedding`` and every :class:`TokenEmbedding` whole, its projection included, are
    embeddings (:mod:`kdflow.analysis.inference` says why)."""
    embedding = {id(p) for m in module.modules() if isinstance(m, (nn.Embedding, TokenEmbedding)) for p in m.parameters()}
    return sum(p.numel() for p in module.parameters() if id(p) not in embedding)


def token_embedding(spec: dict | None, context: StudentContext, width: int | None = None, **defaults) -> TokenEmbedding:
    """The embedding layer an ``embeddings`` option describes; ``defaults`` are the student's (source, mode, dim).
    A student's default ``dim`` is for random vectors only: a teacher's or a file's vectors have their own width."""
    spec = spec or {}
    defaults = {**EMBEDDING_DEFAULTS, **defaults}
    if spec.get("source", defaults["source"]) != "random":
        defaults["dim"] = None
    opts = with_defaults(spec, defaults, "embeddings")
    source, mode, dim = opts["source"], opts["mode"], opts["dim"]
    if source not in SOURCES:
        raise ValueError(f"unknown embeddings source {source!r}; expected one of {SOURCES}")
    if mode not in MODES:
        raise ValueError(f"unknown embeddings mode {mode!r}; expected one of {MODES}")
    if opts["init"] not in INITS:
        raise ValueError(f"unknown embeddings init {opts['init']!r}; expected one of {INITS}")
    if opts["init"] != "uniform" and source != "random":
        raise ValueError(f"embeddings init {opts['init']!r} is for random vectors (source: random), not {source!r}")

    if source == "random":
        if not dim:
            raise ValueError("embeddings source 'random' needs `dim`, the width of the vectors")
        vectors = random_vectors(len(context.tokenizer), dim, opts["init"])
    elif source == "teacher":
        if isinstance(context.tokenizer, WordTokenizer):
            raise ValueError("the teacher's vectors are for its wordpieces; a word-level student (tokens: words) "
                             "takes embeddings from a word-vectors file (source: file) or random ones")
        teacher = AutoModel.from_pretrained(teacher_model_dir(context))
        vectors = teacher.get_input_embeddings().weight.detach().float()
        if vectors.shape[0] < len(context.tokenizer):
            raise ValueError(
                f"the teacher has {vectors.shape[0]} token vectors, the tokenizer {len(context.tokenizer)}"
            )
    else:
        if not opts["path"]:
            raise ValueError("embeddings source 'file' needs `path`, a word2vec or GloVe vectors file")
        if not context.read_vector_files:  # trained weights follow
            return TokenEmbedding(unseen_vectors(len(context.tokenizer), vector_width(opts["path"])), mode, width)
        vectors, found = read_word_vectors(opts["path"], context.tokenizer)
        log.info(
            "embeddings from %s: %d of %d vocabulary tokens (%.1f%%) have a vector, the rest are random",
            opts["path"],
            found,
            len(vectors),
            100 * found / len(vectors),
        )
    if dim and dim != vectors.shape[1]:
        raise ValueError(f"embeddings `dim` {dim} differs from the {source}'s vector width {vectors.shape[1]}")
    return TokenEmbedding(vectors, mode, width)


def unseen_vectors(rows: int, dim: int) -> torch.Tensor:
    return torch.empty(rows, dim).uniform_(-UNSEEN_RANGE, UNSEEN_RANGE)


def random_vectors(rows: int, dim: int, init: str) -> torch.Tensor:
    """``source: random``'s vectors: U[-0.25, 0.25] (``uniform``) or N(0, 0.02) (``normal``)."""
    return unseen_vectors(rows, dim) if init == "uniform" else torch.empty(rows, dim).normal_(0.0, NORMAL_STD)


def read_word_vectors(path: str | Path, tokenizer) -> tuple[torch.Tensor, int]:
    """A [len(tokenizer), dim] matrix holding the file's vector for each vocabulary token that has one, random
    vectors for the rest, and how many tokens had one. Only vectors of vocabulary tokens are parsed and kept, which
    keeps a multi-gigabyte word2vec file quick to scan and its 3M words out of memory."""
    ids_of_word: dict[str, list[int]] = {}
    for token, index in tokenizer.get_vocab().items():
        word = token
        for marker in WORD_MARKERS:
            word = word.removeprefix(marker)
        ids_of_word.setdefault(word, []).append(index)

    dim = vector_width(path)
    vectors = unseen_vectors(len(tokenizer), dim)
    found = torch.zeros(len(tokenizer), dtype=torch.bool)
    with open_vectors(path) as stream:
        entries = binary_entries(stream, dim, path) if is_binary(path) else text_entries(stream, dim, path)
        for word, parse in entries:
            if word in ids_of_word:
                ids = ids_of_word[word]
                vectors[ids] = parse()
                found[ids] = True
    return vectors, int(found.sum())


def is_binary(path: str | Path) -> bool:
    return Path(path).name.removesuffix(".gz").endswith(".bin")


def open_vectors(path: str | Path):
    opener = gzip.open if Path(path).name.endswith(".gz") else open
    return opener(path, "rb") if is_binary(path) else opener(path, "rt", encoding="utf-8", errors="replace")


def vector_width(path: str | Path) -> int:
    """The width of a vectors file's vectors, from its ``count dim`` header (which the binary format always has)
    or else its first line."""
    with open_vectors(path) as stream:
        first = stream.readline()
    fields = (first.decode("utf-8", errors="replace") if isinstance(first, bytes) else first).split()
    return int(fields[1]) if has_header(fields) else len(fields) - 1


def has_header(fields: list[str]) -> bool:
    return len(fields) == 2 and all(field.isdigit() for field in fields)


Entries = Iterator[tuple[str, Callable[[], torch.Tensor]]]


def text_entries(lines, dim: int, path: str | Path) -> Entries:
    """(word, parser of its vector) per line: parsing only the vectors that are used is what makes a scan quick."""
    first = lines.readline()
    header = has_header(first.split())
    for number, line in enumerate(lines if header else chain([first], lines), start=2 if header else 1):
        word, *values = line.rstrip().rsplit(" ", dim)  # from the right: a few GloVe words contain spaces
        if len(values) != dim:
            raise VectorsError(f"{path}:{number}: expected a word and {dim} numbers, got {line[:80]!r}")
        yield word, partial(parse_text, values, f"{path}:{number}")


def parse_text(values: list[str], where: str) -> torch.Tensor:
    try:
        return torch.tensor([float(value) for value in values])
    except ValueError:
        raise VectorsError(f"{where}: a vector value is not a number: {' '.join(values)[:80]!r}") from None


def binary_entries(stream, dim: int, path: str | Path) -> Entries:
    """word2vec's binary format: a ``count dim`` line, then per word its UTF-8 bytes, a space and ``dim``
    little-endian float32s (word2vec's own writer adds a newline after each vector). Read in 4 MB chunks."""
    stream.readline()
    size, buffer, start = 4 * dim, b"", 0
    while True:
        space = buffer.find(b" ", start)  # words hold no space: the first one after a record's start ends its word
        if space < 0 or len(buffer) < space + 1 + size:
            chunk = stream.read(1 << 22)
            if not chunk:
                if buffer[start:].strip():
                    raise VectorsError(f"{path}: ends inside the entry {buffer[start:start + 80]!r}")
                return
            buffer, start = buffer[start:] + chunk, 0
            continue
        word = buffer[start:space].lstrip(b"\n").decode("utf-8", errors="replace")
        yield word, partial(parse_binary, buffer[space + 1 : space + 1 + size])
        start = space + 1 + size


def parse_binary(values: bytes) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(values, dtype="<f4").copy())
