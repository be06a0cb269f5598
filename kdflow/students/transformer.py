"""Transformer students: ``bert_k`` (a teacher's first k layers, ALP-KD §4 / Universal-KD §5.2 and A.1), ``hf``
(any Hugging Face checkpoint or configuration, e.g. DistilRoBERTa in Universal-KD §5.2) and ``bert_s`` (the
thesis's small random-init BERT, Sučík 2020 §4.3.4).

Layer representations are the first-token ([CLS] / <s>) vector of every transformer layer's hidden states,
bottom to top, the embedding layer excluded: "the output of the layer for the CLS token" (ALP-KD footnote 3) and
the "CLS output representation of each layer" of Universal-KD §4.1, as the teacher's pseudo-heads use.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import nn

# Auto classes only: transformers loads a model family's code on first use, and importing BertModel & co. here
# cost every job that imports the student registry 2 CPU-seconds (a BiLSTM student's job: 5 s of imports to 3).
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from kdflow.students.embeddings import teacher_model_dir, token_embedding
from kdflow.students.registry import StudentContext, StudentOutput, register
from kdflow.students.tokens import input_tokenizer
from kdflow.training.hf_models import build_classifier, from_hub, model_inputs


class HFStudent(nn.Module):
    """A Hugging Face sequence classifier returning its logits and every layer's first-token vector."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: dict[str, torch.Tensor]) -> StudentOutput:
        out = self.model(**model_inputs(self.model, batch), output_hidden_states=True)
        return StudentOutput(out.logits, [hidden[:, 0] for hidden in out.hidden_states[1:]])


def check_vocabulary(model: nn.Module, context: StudentContext) -> None:
    """Batches carry the teacher tokenizer's ids, so a pre-trained student must share the teacher's vocabulary."""
    rows = model.get_input_embeddings().num_embeddings
    if rows < len(context.tokenizer):
        raise ValueError(
            f"the student has {rows} token embeddings but the teacher's tokenizer has {len(context.tokenizer)} "
            "tokens; a pre-trained student must use the teacher's vocabulary"
        )


@register("bert_k", {"layers": None, "init_from": "teacher"})
def bert_k(opts: dict, context: StudentContext) -> nn.Module:
    """A k-layer copy of a source model: its embeddings, transformer layers 0..k-1 and pooler (ALP-KD §4: "we only
    consider the first m layers of the teacher for initialization", after PKD; Universal-KD A.1: "initialized by
    the first 4 layers of the pre-trained BERT-base teacher").

    ``layers``: k (required). ``init_from``: ``teacher`` (default: the fine-tuned teacher, classifier head copied
    too) or a hub name / directory (e.g. ``bert-base-uncased``, the pre-trained model the papers start from; only
    its base model is read and the classifier head is freshly initialised). Any architecture whose config has
    ``num_hidden_layers`` works (BERT, RoBERTa, ...): the student is the source's config with k layers, and every
    student weight is copied from the source weight of the same name, which leaves out layers k and above.
    """
    k, from_teacher = opts["layers"], opts["init_from"] == "teacher"
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"bert_k needs `layers`, the number k >= 1 of source layers to keep; got {k!r}")
    path = teacher_model_dir(context) if from_teacher else opts["init_from"]
    # float32 whatever the checkpoint's dtype: transformers 5 loads a half-precision checkpoint as such, and the
    # student built from its config would inherit it
    loader = AutoModelForSequenceClassification if from_teacher else AutoModel
    source = from_hub(loader.from_pretrained, path, dtype=torch.float32)

    config = copy.deepcopy(source.config)
    if k > config.num_hidden_layers:
        raise ValueError(f"bert_k: layers={k} but {path} has only {config.num_hidden_layers} layers")
    if from_teacher and config.num_labels != context.num_labels:
        raise ValueError(f"bert_k: the teacher has {config.num_labels} outputs, the task {context.num_labels}")
    config.num_hidden_layers, config.num_labels = k, context.num_labels
    student = AutoModelForSequenceClassification.from_config(config)

    target = student if from_teacher else student.base_model  # a pre-trained model has no task head to copy
    source_weights = source.state_dict()
    missing = [name for name in target.state_dict() if name not in source_weights]
    if missing:
        raise ValueError(f"bert_k: {path} lacks student weights {missing[:5]}")
    target.load_state_dict({name: source_weights[name] for name in target.state_dict()})
    check_vocabulary(student, context)
    return HFStudent(student)


@register("hf", {"model": None, "architecture": None})
def hf(opts: dict, context: StudentContext) -> nn.Module:
    """Any Hugging Face encoder with a fresh classification head: ``model`` (hub name or directory, e.g.
    ``distilroberta-base``, Universal-KD §5.2) or ``architecture`` (``model_type`` plus config fields) for a random
    init over the teacher's tokenizer, as :func:`kdflow.teachers.finetune.build_teacher` does."""
    if bool(opts["model"]) == bool(opts["architecture"]):
        raise ValueError("hf needs exactly one of `model` (a checkpoint) and `architecture` (a config)")
    model = build_classifier(opts["model"], opts["architecture"], context.tokenizer, context.num_labels)
    check_vocabulary(model, context)
    return HFStudent(model)


BERT_S = {"num_hidden_layers": 5, "hidden_size": 204, "num_attention_heads": 3, "intermediate_size": 750}


@register("bert_s", {**BERT_S, "embeddings": None, "tokens": "wordpiece"})
def bert_s(opts: dict, context: StudentContext) -> nn.Module:
    """Thesis BERT_S (§4.3.4): BERT-large scaled down ~5x, L=5, d_h=204, A=3, d_I=750 (Table B.1 scales them via
    these options), randomly initialised, 2,417,888 non-embedding parameters for 2 classes (Table 5.2: 2.42M).

    Its token embeddings are the ``embeddings`` option (see :mod:`kdflow.students.embeddings`), by default the
    teacher's wordpieces, projected to d_h by a trainable linear layer (Table 4.3, §5.1 footnote 1). As in the
    thesis, position and token-type embeddings stay BERT's own (random, d_h wide) and are added after the
    projection. ``tokens: words`` reads words instead (the thesis's CoLA and SST-2 BERT_S, with word2vec vectors:
    ``embeddings: {source: file, path: ..., mode: multichannel}``), ``<cls> a <sep>`` with U[-0.25, 0.25] marker
    vectors, cut at the job's ``max_seq_length`` as wordpieces are (see :mod:`kdflow.students.tokens`)."""
    embeddings, tokens = opts.pop("embeddings"), opts.pop("tokens")
    tokenizer = input_tokenizer(tokens, context, markers=True)
    config = AutoConfig.for_model("bert", vocab_size=len(tokenizer), num_labels=context.num_labels,
                                  pad_token_id=tokenizer.pad_token_id, **opts)
    model = AutoModelForSequenceClassification.from_config(config)
    width = config.hidden_size
    embed = token_embedding(embeddings, replace(context, tokenizer=tokenizer), width=width, source="teacher", dim=width)
    model.set_input_embeddings(embed)
    student = HFStudent(model)
    if tokens == "words":
        student.tokenizer = tokenizer
    return student
