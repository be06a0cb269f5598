"""A trained kdflow student as a ``transformers`` sequence classifier and the tokenizer it reads, and how closely
the two agree with kdflow's own forward pass.

Which class a student becomes (docs/export.md says the same for users):

- ``bert_k`` and ``hf`` students *are* a ``transformers`` ``AutoModelForSequenceClassification`` inside kdflow's
  wrapper (:class:`kdflow.students.transformer.HFStudent` returns the wrapped model's ``logits`` unchanged: BERT's
  pooler on [CLS], dropout, the linear classifier; RoBERTa's own head; a single output for regression). The
  wrapped model is saved as it is, so the folder loads as ``BertForSequenceClassification`` (or the class of its
  architecture) with no code of kdflow's.
- ``bert_s`` is a ``BertForSequenceClassification`` whose token embedding kdflow replaced by its own module (one or
  two channels of vectors, concatenated, and a linear projection to the hidden size). That module is a function of
  the token id alone, so it is folded, exactly, into one embedding table (:func:`folded_embeddings`), and the
  student becomes a plain ``BertForSequenceClassification`` too.
- ``bilstm``, ``gated_cnn`` and ``bilstm_s`` have no ``transformers`` class: they become
  :class:`kdflow.students.modeling_kdflow_student.KdflowStudentForSequenceClassification`, built of the classes of
  :mod:`kdflow.students.layers` that trained them, whose code travels in the folder (``trust_remote_code``; that
  module says why this route and not a loader of kdflow's own). A student of another registered type whose model is
  one of those classes over registered sequence layers is exported the same way, with no code of this module's.

The tokenizer is the teacher's (what every wordpiece student reads), saved with the student's ``max_seq_length`` as
its ``model_max_length`` so that ``truncation=True`` cuts where kdflow cut; LSTM_S's copy adds no [CLS]/[SEP] and
never truncates (kdflow.students.tokens.WholeSentences); a word-level student's is a ``tokenizers`` word-level
tokenizer over its saved word list, with BERT's basic tokenisation (lower case, accents stripped, split on
whitespace and punctuation) and, for word-level BERT_S, its ``<cls>``/``<sep>`` markers.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from torch import nn
from transformers import AutoTokenizer, PreTrainedModel
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from kdflow.core.errors import UserError
from kdflow.students.embeddings import TokenEmbedding
from kdflow.students.layers import LSTMS, SEQUENCE_LAYERS, AttentionPooled
from kdflow.students.modeling_kdflow_student import KdflowStudentConfig, KdflowStudentForSequenceClassification
from kdflow.students.tokens import MARKERS, SPECIALS, WholeSentences, WordTokenizer, student_tokenizer
from kdflow.students.transformer import HFStudent
from kdflow.training.batching import batches, tokenize
from kdflow.training.hf_models import model_inputs
from kdflow.training.loop import predict

REGRESSION_LABEL = "score"  # id2label of a regression task's single output
NO_LENGTH_LIMIT = int(1e30)  # transformers' own "no limit" (its VERY_LARGE_INTEGER)
INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
FOLD_ROWS = 1 << 16  # vocabulary rows folded at once (a word-level vocabulary may hold 300,000 words)
# Logits of the exported model and of kdflow's student, both in float32 on the CPU, differ by float rounding only
# (a folded embedding row is the same arithmetic in another order, a batch padded to another length): at most
# 1.2e-7 on tests/test_export.py's students, 0 on the demo's. The bound leaves a margin of almost three orders of
# magnitude and stays far below any difference a real change of weights or tokens makes (LSTM_S given [CLS]/[SEP]
# it never read: 1e-2 on a tiny test student).
TOLERANCE = 1e-4


def needs_remote_code(student: nn.Module) -> bool:
    """Whether ``student`` is exported with its code (``trust_remote_code=True``): it is built of
    :mod:`kdflow.students.layers`' models rather than wrapping a ``transformers`` one; a clear error for a model
    this module cannot export."""
    if isinstance(student, HFStudent):
        return False
    if isinstance(student, (AttentionPooled, LSTMS)):
        return True
    raise UserError(f"kdflow cannot export a student of class {type(student).__name__}: export knows students that "
                    "wrap a transformers model and those built of kdflow/students/layers.py's AttentionPooled or "
                    "LSTMS (kdflow/export/conversion.py)")


def folded_embeddings(embed: TokenEmbedding) -> torch.Tensor:
    """kdflow's token embedding applied to every vocabulary id: row i is the vector token i reads as."""
    rows = embed.channels[0].num_embeddings
    with torch.no_grad():
        return torch.cat([embed(torch.arange(start, min(start + FOLD_ROWS, rows))).float()
                          for start in range(0, rows, FOLD_ROWS)])


def with_labels(config, labels: list[str] | None, regression: bool) -> None:
    """``id2label``/``label2id`` from the task's label names, and the problem type the pipeline reads (a regression
    output is returned as it is, not through a sigmoid)."""
    names = [REGRESSION_LABEL] if regression else list(labels)
    config.problem_type = "regression" if regression else "single_label_classification"
    config.id2label = dict(enumerate(names))
    config.label2id = {name: index for index, name in enumerate(names)}


def exported_model(student: nn.Module, labels: list[str] | None, regression: bool, tokenizer) -> PreTrainedModel:
    """The ``transformers`` model that computes ``student``'s logits (see the module docstring), in eval mode."""
    if needs_remote_code(student):
        model = custom_model(student, tokenizer)
    else:
        model = copy.deepcopy(student.model)
        embed = model.get_input_embeddings()
        if isinstance(embed, TokenEmbedding):  # bert_s
            table = folded_embeddings(embed)
            model.set_input_embeddings(nn.Embedding.from_pretrained(table, freeze=False,
                                                                    padding_idx=model.config.pad_token_id))
            model.config.vocab_size = table.shape[0]
    with_labels(model.config, labels, regression)
    return model.float().eval()


def custom_model(student: nn.Module, tokenizer) -> KdflowStudentForSequenceClassification:
    """A student built of :mod:`kdflow.students.layers`' models as :class:`KdflowStudentForSequenceClassification`:
    the same classes, configured from the student's own modules (each sequence layer's ``kind`` and ``options``),
    with the student's weights (strictly: every weight, none left over) and its folded embedding table."""
    table = folded_embeddings(student.embed)
    common = {"vocab_size": table.shape[0], "embedding_size": table.shape[1], "dropout": student.dropout.p,
              "num_labels": student.classifier.out_features, "unk_token_id": tokenizer.unk_token_id,
              "pad_token_id": tokenizer.pad_token_id}
    if isinstance(student, LSTMS):
        config = KdflowStudentConfig(architecture="lstm_s", hidden_size=student.lstm.hidden_size,
                                     num_layers=student.lstm.num_layers, fc_size=student.fc.out_features, **common)
    elif isinstance(student, AttentionPooled):
        unregistered = [type(layer).__name__ for layer in student.layers if SEQUENCE_LAYERS.get(
            getattr(layer, "kind", None)) is not type(layer)]
        if unregistered:
            raise UserError(f"the student's layers {unregistered} are not sequence layers of kdflow/students/"
                            "layers.py (sequence_layer), which the exported folder builds its model from")
        config = KdflowStudentConfig(architecture="attention_pooled", hidden_size=student.classifier.in_features,
                                     layers=[{"kind": layer.kind, **layer.options} for layer in student.layers],
                                     **common)
    else:
        raise UserError(f"no exported class for a student of class {type(student).__name__}")
    model = KdflowStudentForSequenceClassification(config)
    weights = {name: value for name, value in student.state_dict().items() if not name.startswith("embed.")}
    model.student.load_state_dict(weights | {"embed.weight": table})
    return model


def word_tokenizer(reader: WordTokenizer) -> TokenizersBackend:
    """A word-level student's tokenizer: its word list over BERT's basic tokenisation (kdflow.students.tokens),
    unknown words as ``<unk>``, and word-level BERT_S's markers: ``<cls> a <sep>``, ``<cls> a <sep> b <sep>``."""
    backend = Tokenizer(WordLevel(reader.get_vocab(), unk_token=SPECIALS[0]))
    backend.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                    lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = {"unk_token": SPECIALS[0], "pad_token": SPECIALS[1]}
    if reader.markers:
        cls, sep = MARKERS
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, reader.ids[cls]), (sep, reader.ids[sep])])
        specials |= {"cls_token": cls, "sep_token": sep}
    else:
        backend.post_processor = unmarked()
    return TokenizersBackend(tokenizer_object=backend, **specials)


def unmarked() -> processors.TemplateProcessing:
    """A post-processor that adds nothing: a sentence, or a pair as one sequence (token types 0, then 1)."""
    return processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1", special_tokens=[])


def without_markers(teacher) -> TokenizersBackend:
    """The teacher's tokenizer adding no [CLS]/[SEP], as LSTM_S reads wordpieces. Saved as the generic
    ``TokenizersBackend`` class: BERT's tokenizer class would put its markers back on loading."""
    backend = getattr(teacher, "backend_tokenizer", None)
    if backend is None:
        raise UserError(f"the teacher's tokenizer ({type(teacher).__name__}) has no `tokenizers` backend, so an "
                        "LSTM_S copy without its sentence markers cannot be saved")
    backend = Tokenizer.from_str(backend.to_str())
    backend.post_processor = unmarked()
    specials = {name: getattr(teacher, name) for name in ("unk_token", "pad_token", "cls_token", "sep_token",
                                                          "mask_token") if getattr(teacher, name, None)}
    return TokenizersBackend(tokenizer_object=backend, **specials)


def tokenizer_kind(student: nn.Module) -> str:
    """What the exported tokenizer is, in words (the model card's)."""
    own = getattr(student, "tokenizer", None)
    reader = own.tokenizer if isinstance(own, WholeSentences) else own
    if isinstance(reader, WordTokenizer):
        return f"a word list of {len(reader.words)} words" + (" with <cls>/<sep> markers" if reader.markers else "")
    return "the teacher's, without [CLS]/[SEP]" if isinstance(own, WholeSentences) else "the teacher's"


def exported_tokenizer(student: nn.Module, teacher_model_dir: Path, max_length: int):
    """The tokenizer the exported ``student`` reads (see the module docstring); ``max_length``: the
    ``max_seq_length`` the student was trained and evaluated with."""
    own = getattr(student, "tokenizer", None)
    whole = isinstance(own, WholeSentences)
    reader = own.tokenizer if whole else own
    teacher = AutoTokenizer.from_pretrained(teacher_model_dir)
    if isinstance(reader, WordTokenizer):
        tokenizer = word_tokenizer(reader)
    elif whole:
        tokenizer = without_markers(teacher)
    elif reader is None:
        tokenizer = teacher
    else:
        raise UserError(f"no exported tokenizer for a student reading with {type(reader).__name__}")
    tokenizer.model_max_length = (own.max_length or NO_LENGTH_LIMIT) if whole else max_length
    return tokenizer


def accepted_inputs(tokenizer, model: PreTrainedModel) -> None:
    """Make ``tokenizer`` return only what ``model.forward`` takes (a DistilBERT-style student takes no token
    types), as kdflow passes only those (:func:`kdflow.training.hf_models.model_inputs`)."""
    sample = {name: None for name in INPUT_NAMES}
    names = [name for name in INPUT_NAMES if name in model_inputs(model, sample)]
    tokenizer.model_input_names = names
    tokenizer.init_kwargs["model_input_names"] = names  # what save_pretrained writes to tokenizer_config.json


# Agreement: the exported pair against kdflow's student, on the same texts.


def kdflow_logits(student: nn.Module, teacher_model_dir: Path, frame: pd.DataFrame, max_length: int,
                  batch_size: int = 64) -> np.ndarray:
    """``student``'s logits on ``frame``'s texts as kdflow computes them (its tokenisation, batching and forward
    pass), float32 on the CPU."""
    reader = student_tokenizer(student, AutoTokenizer.from_pretrained(teacher_model_dir))
    split = tokenize(frame, reader, max_length, labelled=False)
    student.eval()
    with torch.no_grad():
        return predict(lambda batch: student(batch).logits, batches(split, batch_size, False), torch.device("cpu"))


def exported_logits(model: PreTrainedModel, tokenizer, frame: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
    """The exported model's logits on ``frame``'s texts, tokenised as a user of the folder would:
    ``tokenizer(a, b, truncation=True, padding=True)``."""
    texts = list(frame["text_a"])
    pairs = list(frame["text_b"]) if frame["text_b"].notna().any() else None
    model.eval()
    outputs = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            end = start + batch_size
            encoded = tokenizer(texts[start:end], pairs[start:end] if pairs else None, truncation=True, padding=True,
                                return_tensors="pt")
            outputs.append(model(**encoded).logits.float())
    return torch.cat(outputs).numpy() if outputs else np.zeros((0, model.config.num_labels), dtype=np.float32)


def agreement(reference: np.ndarray, exported: np.ndarray, regression: bool, tolerance: float = TOLERANCE) -> dict:
    """How far ``exported`` logits are from ``reference`` ones: the largest absolute difference, and the examples
    whose prediction differs (a class whose argmax changed although the reference's two best logits were more than
    twice ``tolerance`` apart; a regression output more than ``tolerance`` away). Rows whose two best logits lie
    within twice ``tolerance`` are ties that float rounding may break either way: counted, never a disagreement."""
    reference, exported = np.asarray(reference, dtype=np.float64), np.asarray(exported, dtype=np.float64)
    if reference.shape != exported.shape:
        raise ValueError(f"logits of shape {exported.shape} against {reference.shape}")
    difference = np.abs(reference - exported)
    result = {"examples": len(reference), "max_abs_logit_difference": float(difference.max(initial=0.0)),
              "tolerance": tolerance}
    if regression:
        result["prediction_disagreements"] = int((difference[:, 0] > tolerance).sum())
        return result
    best_two = np.sort(reference, axis=1)[:, -2:]
    ties = best_two[:, 1] - best_two[:, 0] <= 2 * tolerance
    flipped = reference.argmax(axis=1) != exported.argmax(axis=1)
    result["prediction_disagreements"] = int((flipped & ~ties).sum())
    result["ties_within_tolerance"] = int(ties.sum())
    return result


def agrees(result: dict) -> bool:
    return result["prediction_disagreements"] == 0 and result["max_abs_logit_difference"] <= result["tolerance"]
