"""How a student reads text: the teacher's wordpieces or words, with or without sentence markers (Sučík 2020
§4.3.3-4.3.4).

A student reads text as its teacher does (``[CLS] a [SEP] b [SEP]`` in the teacher's wordpieces, cut at the job's
``max_seq_length``) unless it carries its own tokenizer as ``student.tokenizer``. Every job that turns text into a
student's batches (distillation, TAKD assistant signals, probing, inference, attention maps) takes the tokenizer
from :func:`student_tokenizer`; the teacher's signals are per example, so a student may tokenise differently.

- ``tokens: words`` (bilstm_s, bert_s): the thesis's CoLA and SST-2 students read words. Their vocabulary is every
  distinct lower-cased, BERT-basic-tokenised word of the transfer set they learn from (243,120 words on CoLA,
  284,273 on SST-2), plus ``<unk>`` and ``<pad>``; word-level BERT_S also reads ``<cls>`` and ``<sep>``. The student
  job builds the word list (:func:`transfer_words`) and saves it with the trained student, so that reloading it
  (:mod:`kdflow.students.loading`) rebuilds the same student, which tokenises sentences the same way.
- LSTM_S (bilstm_s, words or wordpieces) reads sentences without [CLS]/[SEP] and whole (:class:`WholeSentences`):
  the thesis's LSTM_S has no maximum length, its sequences are packed.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
from torch import nn
from transformers import BasicTokenizer

from kdflow.students.registry import StudentContext, student_options

TOKENS = ("wordpiece", "words")
SPECIALS = ("<unk>", "<pad>")  # ids 0 and 1 of every word vocabulary
MARKERS = ("<cls>", "<sep>")  # word-level BERT_S's sentence markers, ids 2 and 3


def basic_tokenizer() -> BasicTokenizer:
    """BERT's pre-wordpiece step: lower-cases, strips accents, splits on whitespace and punctuation."""
    return BasicTokenizer(do_lower_case=True)


def transfer_words(frame: pd.DataFrame) -> list[str]:
    """Every distinct word of a transfer set's sentences (``text_a``, and ``text_b`` of pairs), most frequent first
    and ties alphabetically, so that the vocabulary does not depend on the order of the examples."""
    basic, counts = basic_tokenizer(), Counter()
    for column in ("text_a", "text_b"):
        for text in frame[column].dropna():
            counts.update(basic.tokenize(text))
    return sorted(counts, key=lambda word: (-counts[word], word))


class WordTokenizer:
    """Text -> word ids over a fixed word list, called like a Hugging Face tokenizer (as
    :func:`kdflow.training.batching.tokenize` calls one). A word outside the list reads as ``<unk>``. With ``markers``
    (word-level BERT_S) a sentence reads ``<cls> a <sep>`` and a pair ``<cls> a <sep> b <sep>`` (token type 1 from
    b on), as BERT's [CLS]/[SEP]."""

    def __init__(self, words: list[str], markers: bool):
        self.words = list(words)
        self.markers = markers
        tokens = [*SPECIALS, *(MARKERS if markers else ()), *self.words]
        self.ids = {token: index for index, token in enumerate(tokens)}
        self.unk_token_id, self.pad_token_id = self.ids["<unk>"], self.ids["<pad>"]
        self.basic = basic_tokenizer()

    def __len__(self) -> int:
        return len(self.ids)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.ids)

    def encode(self, text: str) -> list[int]:
        return [self.ids.get(word, self.unk_token_id) for word in self.basic.tokenize(text)]

    def __call__(self, texts: list[str], pairs: list[str] | None = None, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None, return_token_type_ids: bool = True) -> dict:
        marked = add_special_tokens and self.markers
        input_ids, token_type_ids = [], []
        for text, pair in zip(texts, pairs or [None] * len(texts)):
            a, b = self.encode(text), [] if pair is None else self.encode(pair)
            if truncation and max_length is not None:
                a, b = longest_first(a, b, max_length - marked * (2 if pair is None else 3))
            if marked:
                cls, sep = self.ids["<cls>"], self.ids["<sep>"]
                a, b = [cls, *a, sep], b if pair is None else [*b, sep]
            input_ids.append(a + b)
            token_type_ids.append([0] * len(a) + [1] * len(b))
        return {"input_ids": input_ids, "token_type_ids": token_type_ids}


def longest_first(a: list[int], b: list[int], room: int) -> tuple[list[int], list[int]]:
    """Drop the last token of the longer sequence until both fit in ``room``, as Hugging Face's default truncation."""
    while len(a) + len(b) > room:
        if len(a) >= len(b):
            a = a[:-1]
        else:
            b = b[:-1]
    return a, b


class WholeSentences:
    """LSTM_S's reading (thesis §4.3.3, and the original code): ``tokenizer``'s tokens without sentence markers
    ([CLS]/[SEP] or <cls>/<sep>), cut at the student's own ``max_length`` (None: never) in place of the job's
    ``max_seq_length``, which the calling job passes for its transformers. A sentence with no token at all (an
    empty generated sample) reads as one unknown token: an LSTM cannot run over nothing."""

    def __init__(self, tokenizer, max_length: int | None):
        self.tokenizer, self.max_length = tokenizer, max_length
        self.pad_token_id = tokenizer.pad_token_id

    def __len__(self) -> int:
        return len(self.tokenizer)

    def __call__(self, texts: list[str], pairs: list[str] | None = None, **job_truncation) -> dict:
        encoded = self.tokenizer(texts, pairs, add_special_tokens=False, truncation=self.max_length is not None,
                                 max_length=self.max_length, return_token_type_ids=True)
        return {"input_ids": [ids or [self.tokenizer.unk_token_id] for ids in encoded["input_ids"]],
                "token_type_ids": [types or [0] for types in encoded["token_type_ids"]]}


def input_tokenizer(tokens: str, context: StudentContext, markers: bool):
    """The tokenizer whose ids a student with the option ``tokens`` reads: the teacher's, or a word tokenizer over
    the word list of its transfer set (``context.words``)."""
    if tokens not in TOKENS:
        raise ValueError(f"unknown tokens {tokens!r}; expected one of {TOKENS}")
    if tokens == "wordpiece":
        return context.tokenizer
    if context.words is None:
        raise ValueError("a word-level student (tokens: words) needs its transfer set's words (StudentContext.words)")
    return WordTokenizer(context.words, markers)


def reads_words(spec: dict) -> bool:
    """Whether the student ``spec`` reads words, so that its job must give it the words of its transfer set."""
    return student_options(spec)[1].get("tokens") == "words"


def student_tokenizer(student: nn.Module, teacher_tokenizer):
    """What turns text into ``student``'s token ids: its own tokenizer, or else the teacher's."""
    own = getattr(student, "tokenizer", None)
    return teacher_tokenizer if own is None else own

