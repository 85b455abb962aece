"""Checks for the assignments: feedback that teaches instead of a bare ``AssertionError``.

    from vitedu.checks import check_attention
    # prints "✓ check_attention passed ..." or raises CheckFailed
    check_attention(attention)

Each check runs the student's function (or builds the student's module) on fresh random inputs of
its own and compares the result with the reference in ``vitedu``. When they differ, it also computes a
few *deliberately wrong* variants - softmax over the wrong axis, no scale, heads merged in the wrong
order, [CLS] at the wrong end, ... - and when the student's result matches one of them, the message
names that mistake and its fix. Inputs use their own random generator, so a check never changes the
random numbers of the notebook that calls it, and they live on ``device`` (default: the best
available), so a correct solution passes on CPU and GPU alike. Every check runs a second set of sizes
(another d_k, number of heads, stride, ...): code that passes the first and fails the second has a size
written in as a number, and the message says so.

Mistakes are recognised by what the code *computes*, not by how it is written: the check computes a family of
deliberately wrong variants with vitedu's code (every usual mistake, and every pair of mistakes of different
kinds) and names the one the student's result equals, so ``q @ k.mT``, ``torch.matmul``, ``einsum``, masked_fill
or an added mask, 3-D or 4-D inputs all get the same hint for the same mistake. tests/test_mistake_catalogue.py
keeps a catalogue of written forms per graded function and checks that each gets its hint.

Each check takes ``only=...`` for the graded cells that give partial credit (see book/assignments.md): every
aspect includes the core computation, so a broken mechanism fails every cell of its part and an edge-case slip
(a finite mask fill, a hard-coded size, a mean of batch means, ...) only the cell of its edge.

The mistakes diagnosed by name (each has a test in tests/test_checks.py or tests/test_mistake_catalogue.py that
plants it and expects its hint):

- check_attention_weights, check_attention: a softmax over a wrong axis, named whichever it is (the
  queries, the heads or the batch of 4-D inputs); softmax missing; exp without normalising, log_softmax, a
  sigmoid, logits divided by their sums; scale missing, 1/d_k (or scaled twice), or multiplied; keys compared
  with queries (k q^T); transposed weights (check_attention); ``k.T`` on batched inputs; a hard-coded d_k (e.g.
  sqrt(8)); a naive exp / sum softmax that turns large logits into NaN (numerically unstable); a wrong shape,
  with the axis named; two of these at once, both named. Any other scale is *fitted*: the check finds the scale
  that explains the result and names it (e.g. 1/sqrt(number of keys), the number of heads, or 1/sqrt(d_v), the
  width of the values, which check_attention makes differ from d_k); so do check_single_head,
  check_masked_attention and check_multi_head_attention. A scale that is a size of the inputs is named as that
  size, never as a hard-coded number. check_attention reads the weights the student's code uses (it hands it
  v = the identity) and names what is wrong with them.
- check_masked_attention: the mask ignored; the mask inverted (with -inf or a large finite fill, masked_fill or
  added, ``+ (~mask) * 1e9`` or ``- mask * 1e9``); the mask applied to the queries (rows) instead of the keys
  (with -inf, NaN, -1e9, or the queries zeroed); weights zeroed after the softmax; logits multiplied by the mask,
  or the masked keys or values zeroed; ``mask * -inf`` (0 x -inf = NaN); NaN for a fully masked query; uniform
  weights (a finite fill such as -1e9) or unmasked weights (a moderate additive fill such as -1e4) for a fully
  masked query; each with attention's own mistakes (scale, softmax axis, k q^T); boolean indexing
  ``logits[~mask]`` with a broadcast mask (an IndexError: use masked_fill); hard-coded sizes or a number of axes
  (4-D and 3-D inputs).
- check_single_head: sqrt(D) instead of sqrt(d_k); queries and keys swapped; the wrong value
  projection, or none; a softmax over a wrong axis (named); scale mistakes; a hard-coded d_k; missing projection
  (shape); a transposed projection matrix (the error explained).
- check_multi_head_split, check_multi_head_merge: a plain reshape without the transpose; a transpose
  before the reshape (split_heads, and in check_multi_head_attention); interleaved heads ('(d h)'); heads axis
  not moved, or in front of the batch; heads of width num_heads (head width wrong); heads concatenated along the
  tokens, or summed over them; tokens and features swapped before the reshape; a hard-coded number of heads.
- check_multi_head_attention: scale by sqrt(D) or sqrt(h) instead of sqrt(d_k), scale missing, scaled twice;
  split into head_dim heads (head width wrong); no split at all (one head); heads merged or split in the wrong
  order; output projection missing; q, k and v from the wrong slices of qkv (which slice each came from is
  named), q and k swapped; heads interleaved when splitting; a softmax over a wrong axis (named); a hard-coded
  size.
- check_patchify, check_patch_embedding: every order of the image's axes (channel, grid row, row in the patch,
  grid column, column in the patch) flattened into tokens, i.e. every reshape/permute/unfold/rearrange, named:
  column-major patch order; (channel, row, column) or another order inside a patch; rows and columns swapped
  inside a patch; a plain reshape, of the image or of the channels-last image; strided patches (height or width
  split as (P, H/P)); scrambled patches; missing bias;
  hard-coded sizes.
- check_unfold_embedding: the kernel flattened in another order than unfold's (channel, row, column); missing
  bias; the kernel or the windows reshaped instead of transposed; tokens and features not transposed; stride
  left at unfold's default of 1, or hard-coded to the kernel size (overlapping windows).
- check_encoder_block: every wiring of the two branches, one or both wrong: post-norm; a missing residual
  connection (either or both); the normalised tokens on the skip path; a LayerNorm missing, applied twice, or
  applied to a branch's output; the other branch's LayerNorm (norm1 used twice); parallel sub-layers; no
  LayerNorms; the tuple of self.attn not unpacked (the error explained).
- check_vit_forward: the blocks never run, or only the first or the last; the final LayerNorm before the blocks,
  or missing; [CLS] at the wrong end, or missing (the first patch classified); the first patch classified instead
  of [CLS]; zeros instead of the learned [CLS]; positions not added, added twice, not for [CLS], or off by one
  (rows 0...N-1 on the patches); positions added before [CLS] is prepended (N tokens against N + 1 rows, a
  RuntimeError); [CLS] not expanded to the batch (the error explained); mean pooling; logits for every token or
  patch (shape).
- check_accuracy: the arg-max over the batch axis, of the whole tensor, or argmin; labels compared with the
  largest logit values; a percentage, a count, the error rate, an integer division; a tensor instead of a float;
  the mean of a boolean tensor (the error explained).
- check_train_epoch: ``model.train()`` missing; ``optimizer.step()`` missing; ``optimizer.step()`` before
  ``loss.backward()`` (the steps find no gradients, or change the weights the backward pass still needs: the error
  explained); ``zero_grad()`` missing (gradients accumulate); ``zero_grad()`` between ``backward()`` and
  ``step()`` (the step finds no gradients); ``loss.backward()`` missing; the forward pass under no_grad (the error
  explained); another optimizer than the one passed in; more or fewer steps than batches; the loss summed over the
  batch (``reduction="sum"``); a softmax before ``F.cross_entropy``, or ``F.nll_loss`` on raw logits; a tensor
  returned instead of a float, or nothing; the mean of batch losses, their sum, the total over images, the last or
  the first batch's loss instead of the mean per image. The order of the calls is read from a trace (zero_grad,
  backward, step).
- check_evaluate: the split ignored (which split was scored instead is named); the model argument not used;
  images not as the notebook's loader serves them (not normalised);
  only the first batch; training mode (no model.eval()); gradients on (no torch.no_grad()); the mean of
  per-batch values over batches of unequal sizes; the summed loss; (accuracy, loss) swapped; a percentage;
  tensors instead of floats. The check's models record which images (hence which split) they are given.
- check_cls_attention: the first block instead of the last, or the mean over blocks; head 0, the maximum or the
  sum over heads instead of the mean; the grid transposed; the [CLS] column kept; the column to [CLS] instead of
  its row; a second softmax; renormalised weights (as vitedu.interpret.cls_attention returns them; the
  assignment asks for the raw ones); the mean over the images too (shape); a hard-coded grid size.

The checks live in modules per assignment (``a1_attention``, ``a1_masking``, ``a2_patches_to_vit``,
``a3_training``, ``a3_evaluation``; ``a1_family`` holds the family of attention computations A1's checks compare
with) and share the machinery of ``vitedu.checks.diagnosis``; every check is importable from ``vitedu.checks``.
"""

from .a1_attention import (
    check_attention,
    check_attention_weights,
    check_multi_head_attention,
    check_multi_head_merge,
    check_multi_head_split,
    check_single_head,
)
from .a1_masking import check_masked_attention
from .a2_patches_to_vit import (
    check_encoder_block,
    check_patch_embedding,
    check_patchify,
    check_unfold_embedding,
    check_vit_forward,
)
from .a3_evaluation import check_evaluate
from .a3_training import check_accuracy, check_cls_attention, check_train_epoch
from .diagnosis import TOLERANCE, CheckFailed

__all__ = [
    "CheckFailed",
    "TOLERANCE",
    "check_accuracy",
    "check_attention",
    "check_attention_weights",
    "check_encoder_block",
    "check_evaluate",
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

