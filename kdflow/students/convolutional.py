"""Gated-CNN student (Universal-KD §5.5; gated linear units of Dauphin et al. 2017).

A sentence pair is one sequence, as the batch gives it (Universal-KD A.2).
"""

from __future__ import annotations

from torch import nn

from kdflow.students.embeddings import token_embedding
from kdflow.students.layers import GatedConvLayer
from kdflow.students.pooled import AttentionPooledStudent
from kdflow.students.registry import StudentContext, register


@register("gated_cnn", {"layers": 4, "hidden_size": 768, "kernel_width": 3, "dropout": 0.1, "embeddings": None})
def gated_cnn(opts: dict, context: StudentContext) -> nn.Module:
    """Universal-KD §5.5: 4 gated convolution layers with "a hidden size of 768" and "around 25M trainable
    parameters", attention-sum pooling of every layer, a linear classifier on the top one; dropout as in A.2.

    Choices the papers leave open: kernel width 3 (odd widths only, so the convolution stays centred); no weight
    normalisation (Dauphin et al. use it to speed up training, it does not change the model); the embeddings are
    projected to the hidden size by a trainable linear layer when their width differs, so every layer can be
    residual; the default is random 300-wide vectors (the usual word2vec/GloVe width, so a word-vector file fits),
    which with BERT's 30,522 wordpieces makes 23,554,298 parameters for 2 classes.
    Options: ``layers`` (4), ``hidden_size`` (768), ``kernel_width`` (3), ``dropout`` (0.1), ``embeddings``.
    """
    width, kernel_width = opts["hidden_size"], opts["kernel_width"]
    if kernel_width < 1 or kernel_width % 2 == 0:
        raise ValueError(f"gated_cnn kernel_width must be odd (a centred window), got {kernel_width}")
    embed = token_embedding(opts["embeddings"], context, width=width, dim=300)
    layers = [GatedConvLayer(width, kernel_width) for _ in range(opts["layers"])]
    return AttentionPooledStudent(embed, layers, width, context.num_labels, opts["dropout"])
