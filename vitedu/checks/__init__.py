"""Checks for the assignments: feedback that teaches instead of a bare ``AssertionError``.

    from vitedu.checks import check_attention
    check_attention(attention)    # prints "✓ check_attention passed ..." or raises CheckFailed

Each check runs the student's function (or builds the student's module) on fresh random inputs of
its own and compares the result with the reference in ``vitedu``. When they differ, it also computes a
few *deliberately wrong* variants - softmax over the wrong axis, no scale, heads merged in the wrong
order, [CLS] at the wrong end, ... - and when the student's result matches one of them, the message
names that mistake and its fix. Inputs use their own random generator, so a check never changes the
random numbers of the notebook that calls it, and they live on ``device`` (default: the best
available), so a correct solution passes on CPU and GPU alike. Every check runs a second set of sizes
(another d_k, number of heads, stride, ...): code that passes the first and fails the second has a size
written in as a number, and the message says so.

The mistakes diagnosed by name (each has a test in tests/test_checks.py that plants it and expects its hint):

- check_attention_weights, check_attention: a softmax over a wrong axis, named whichever it is (the
  queries, the heads or the batch of 4-D inputs); softmax missing; scale missing, 1/d_k, or multiplied;
  keys compared with queries (k q^T); transposed weights (check_attention); ``k.T`` on batched inputs; a
  hard-coded d_k (e.g. sqrt(8)); a naive exp / sum softmax that turns large logits into NaN (numerically
  unstable); a wrong shape, with the axis named. Any other scale is *fitted*: the check finds the scale
  that explains the result and names it (e.g. 1/sqrt(number of keys), or 1/sqrt(d_v), the width of the
  values, which check_attention makes differ from d_k); so do check_single_head and
  check_multi_head_attention. A scale that is a size of the inputs is named as that size, never as a
  hard-coded number.
- check_masked_attention: the mask ignored; the mask inverted; the mask applied to the queries (rows)
  instead of the keys (with -inf, NaN, -1e9, or the queries zeroed); weights zeroed after the softmax;
  logits multiplied by the mask; NaN for a fully masked query; uniform weights (a finite fill such as
  -1e9) for a fully masked query; boolean indexing ``logits[~mask]`` with a broadcast mask (an
  IndexError: use masked_fill); hard-coded sizes.
- check_single_head: sqrt(D) instead of sqrt(d_k); queries and keys swapped; the wrong value
  projection; a softmax over a wrong axis (named); scale mistakes; a hard-coded d_k; missing projection
  (shape).
- check_multi_head_split, check_multi_head_merge: a plain reshape without the transpose; a transpose
  before the reshape (split_heads, and in check_multi_head_attention); interleaved
  heads ('(d h)'); heads axis not moved; heads of width num_heads (head width wrong); a hard-coded
  number of heads.
- check_multi_head_attention: scale by sqrt(D) or sqrt(h) instead of sqrt(d_k); split into head_dim
  heads (head width wrong); no split at all (one head); heads merged or split in the wrong order;
  output projection missing; wrong [q | k | v] slices; a softmax over a wrong axis (named); a
  hard-coded size.
- check_patchify, check_patch_embedding: column-major patch order; (channel, row, column) order inside
  a patch; rows and columns swapped inside a patch; a plain reshape; missing bias.
- check_unfold_embedding: the kernel reordered to (row, column, channel); missing bias; tokens and
  features not transposed; stride hard-coded to the kernel size (overlapping windows).
- check_encoder_block: post-norm; a missing residual connection (either or both); the normalised tokens
  on the skip path; norm1 used twice; parallel sub-layers; no LayerNorms; a LayerNorm applied to a
  branch's output (x + norm2(mlp(x))) instead of its input, for either branch or both.
- check_vit_forward: the blocks never run; the final LayerNorm before the blocks, or missing; [CLS] at
  the wrong end, or missing (the first patch classified); positions not added, not for [CLS], or off by
  one (rows 0...N-1 on the patches); positions added before [CLS] is prepended (N tokens against N + 1
  rows, a RuntimeError); mean pooling; logits for every token or patch (shape).
- check_train_epoch: ``model.train()`` missing; ``optimizer.step()`` missing; ``zero_grad()`` missing
  (gradients accumulate); ``zero_grad()`` between ``backward()`` and ``step()`` (the step finds no
  gradients); the loss summed over the batch (``reduction="sum"``); a softmax before ``F.cross_entropy``;
  a tensor returned instead of a float; the mean of batch losses instead of the mean per image.
- check_cls_attention: the first block instead of the last; head 0 instead of the mean over heads; the
  grid transposed; the [CLS] column kept; the column to [CLS] instead of its row; renormalised weights
  (as vitedu.interpret.cls_attention returns them; the assignment asks for the raw ones); a hard-coded
  grid size.

The checks live in one module per assignment (``a1_attention``, ``a2_patches_to_vit``, ``a3_training``) and share
the machinery of ``vitedu.checks.diagnosis``; every check is importable from ``vitedu.checks``.
"""

from .a1_attention import (
    check_attention,
    check_attention_weights,
    check_masked_attention,
    check_multi_head_attention,
    check_multi_head_merge,
    check_multi_head_split,
    check_single_head,
)
from .a2_patches_to_vit import (
    check_encoder_block,
    check_patch_embedding,
    check_patchify,
    check_unfold_embedding,
    check_vit_forward,
)
from .a3_training import check_cls_attention, check_train_epoch
from .diagnosis import TOLERANCE, CheckFailed

__all__ = [
    "CheckFailed",
    "TOLERANCE",
    "check_attention",
    "check_attention_weights",
    "check_encoder_block",
    "check_masked_attention",
    "check_multi_head_attention",
    "check_multi_head_merge",
    "check_multi_head_split",
    "check_patch_embedding",
    "check_patchify",
    "check_single_head",
    "check_cls_attention",
    "check_train_epoch",
    "check_unfold_embedding",
    "check_vit_forward",
]

