"""Assignment 2: patches, the patch embedding, the encoder block and the whole forward pass (chapters 4-6).

See ``vitedu.checks`` for what each check diagnoses by name."""

from __future__ import annotations

import itertools
import re
from typing import Callable

import torch
from einops import rearrange
from torch import Tensor, nn

from ..blocks import Block
from ..patching import PatchEmbedding, patchify
from ..vit import VisionTransformer
from .diagnosis import (
    CheckFailed,
    Variants,
    aspect,
    build_student,
    check_shape,
    diagnose,
    other_sizes,
    passed,
    randn,
    resolve_device,
    run_student,
    tensor_out,
)

_COLUMN_MAJOR = (
    "the patches are in column-major order (down the first column, then the next). ViT reads them row by "
    "row, like text: patch i sits at grid position (i // W_p, i % W_p). Put the row index first: '(h w)', "
    "not '(w h)'."
)


# The axes of an image cut into patches, as 'b c (h p1) (w p2)' splits it: a patch layout is an order of these.
_AXES = {"c": "channel", "h": "grid row", "p1": "row inside the patch", "w": "grid column",
         "p2": "column inside the patch"}


def _layout(images: Tensor, p: int, order: tuple[str, ...], split: str = "(h p1) (w p2)") -> Tensor:
    """The image's axes in ``order``, flattened and cut into (batch, N, P * P * C): every way to write patchify
    with reshape/permute/unfold/rearrange is one of these orders (the right one is h w p1 p2 c). ``split``: how
    height and width are cut, '(h p1)' (blocks of P rows, right) or '(p1 h)' (every H/P-th row: strided)."""
    batch, chans, height, width = images.shape
    flat = rearrange(images, f"b c {split} -> b ({' '.join(order)})", p1=p, p2=p)
    return flat.reshape(batch, height * width // p**2, p * p * chans)


_STRIDED = ("the patches are strided, not square blocks: you split the height or width as (P, H/P), '(p1 h)', "
            "which puts every H/P-th row (or column) into one patch. Split them as (H/P, P), the grid index "
            "outer and the position inside the patch inner: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.")


def _strided_variants(make: Callable[[str], Tensor]) -> list[tuple[str, Callable[[], Tensor]]]:
    return [(_STRIDED, lambda s=split: make(s)) for split in ("(p1 h) (p2 w)", "(p1 h) (w p2)", "(h p1) (p2 w)")]


def _layout_hint(order: tuple[str, ...]) -> str | None:
    """What is wrong with the layout ``order`` (None: it is right)."""
    if order == ("h", "w", "p1", "p2", "c"):
        return None
    if order == ("c", "h", "p1", "w", "p2"):
        return ("a plain reshape cuts the image into runs of consecutive pixels, not P x P squares. Split height and "
                "width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.")
    if order == ("h", "p1", "w", "p2", "c"):
        return ("a reshape of the channels-last image cuts it into runs of consecutive pixels, not P x P squares. "
                "Split height and width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.")
    grid, inner = order[:2], order[2:]
    if set(grid) != {"h", "w"}:
        named = ", ".join(_AXES[a] for a in order)
        return (f"the patches are cut wrongly: your tokens are the image read in the order ({named}) and cut "
                "into N pieces, so a token mixes pixels of several patches (or the patches of one channel only). "
                "Put the two grid axes first and the three axes of a patch last before flattening: "
                "'b c (h p1) (w p2) -> b (h w) (p1 p2 c)' (reshape to (b, C, H/P, P, W/P, P), then "
                "permute(0, 2, 4, 3, 5, 1)).")
    mistakes = []
    if grid == ("w", "h"):
        mistakes.append(_COLUMN_MAJOR)
    if inner == ("c", "p1", "p2"):
        mistakes.append("the numbers inside each patch are ordered (channel, row, column) - this is also what "
                        "F.unfold returns; vitedu and timm order them (row, column, channel): '(p1 p2 c)'.")
    elif inner == ("p2", "p1", "c"):
        mistakes.append("rows and columns inside each patch are swapped: flatten a patch row by row, '(p1 p2 c)' "
                        "with p1 the row inside the patch.")
    elif inner != ("p1", "p2", "c"):
        named = ", ".join(_AXES[a] for a in inner)
        mistakes.append(f"the numbers inside each patch are ordered ({named}); vitedu and timm order them (row "
                        "inside the patch, column inside the patch, channel): '(p1 p2 c)'.")
    return mistakes[0] if len(mistakes) == 1 else f"two mistakes at once. First, {mistakes[0]} Second, {mistakes[1]}"


def _layout_variants(make: Callable[[tuple[str, ...]], Tensor]) -> list[tuple[str, Callable[[], Tensor]]]:
    """Every other layout of the patches, the likeliest first (one mistake before two, before a scramble)."""
    orders = sorted(itertools.permutations(_AXES), key=lambda o: (set(o[:2]) != {"h", "w"}, "two" in
                                                                  str(_layout_hint(o))))
    return [(hint, lambda o=order: make(o)) for order in orders if (hint := _layout_hint(order))]


def check_patchify(patchify_fn: Callable[[Tensor, int], Tensor], device=None, only: str | None = None) -> None:
    """Check ``patchify(images, patch_size)``: (batch, C, H, W) -> (batch, N, P * P * C), N = HW / P^2.

    Patches row by row; inside a patch the numbers are ordered (row, column, channel), as vitedu.patchify.
    ``only="values"``: one size, (2, 3, 8, 12) with P = 4; without it also (1, 2, 6, 9) with P = 3.
    """
    only = aspect(only, ("values",), "check_patchify")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(7), "patchify(images, patch_size)"

    def one(batch: int, chans: int, height: int, width: int, p: int) -> None:
        images = randn(gen, batch, chans, height, width, device=device)
        n, d = height * width // p**2, p * p * chans
        got = tensor_out(run_student(patchify_fn, images, p, what=what), what)
        check_shape(got, (batch, n, d), ("batch", "patches", "patch_size*patch_size*channels"), what, hints={
            (batch, d, n): "Patches and features are swapped: return (batch, patches, features), e.g. with "
            "'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
            (batch, height // p, width // p, d): "Flatten the grid of patches into one axis of N tokens: '(h w)'.",
            (batch, n, chans, p, p): "Flatten each patch into one vector of P * P * C numbers: '(p1 p2 c)'."})
        right = ("h", "w", "p1", "p2", "c")
        diagnose(got, patchify(images, p), [*_layout_variants(lambda order: _layout(images, p, order)),
                                            *_strided_variants(lambda split: _layout(images, p, right, split))], what)

    one(2, 3, 8, 12, 4)  # a 2 x 3 grid: not square, so orders are visible
    if only == "values":
        passed("check_patchify", "the values: (2, 3, 8, 12) with P=4 -> (2, 6, 48), row-major like vitedu")
        return
    other_sizes("(2, 3, 8, 12) with P=4", "(1, 2, 6, 9) with P=3", lambda: one(1, 2, 6, 9, 3))
    passed("check_patchify", "(2, 3, 8, 12) with P=4 -> (2, 6, 48) and (1, 2, 6, 9) with P=3 -> (1, 6, 18), "
           "row-major like vitedu")


def check_patch_embedding(cls: Callable[..., nn.Module], device=None, only: str | None = None) -> None:
    """Check a patch embedding ``cls(img_size, patch_size, in_chans, embed_dim)`` with a Linear ``proj``
    of shape (P * P * C -> embed_dim): forward (batch, C, H, W) -> (batch, N, embed_dim).

    The reference is ``vitedu.PatchEmbedding`` (a Conv2d) with the student's Linear weights reshaped into
    the convolution kernel: the two are the same map. ``only="values"``: one size (12x12 images, P = 4, 3
    channels); without it also 10x10 images with P = 5 and 2 channels.
    """
    only = aspect(only, ("values",), "check_patch_embedding")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(8), "your patch embedding"

    def one(img: int, p: int, chans: int, dim: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(8)
            module = run_student(cls, img, p, chans, dim, what="creating your patch embedding")
        proj = getattr(module, "proj", None)
        if not isinstance(proj, nn.Linear) or tuple(proj.weight.shape) != (dim, p * p * chans):
            raise CheckFailed(
                f"{what} needs the layer `proj = nn.Linear(patch_size * patch_size * in_chans, embed_dim)` of the "
                f"given __init__ (here Linear({p * p * chans}, {dim})); got {proj!r}. Keep the __init__ and write "
                "only forward().")
        module = module.to(device).eval()
        ref = PatchEmbedding(img_size=img, patch_size=p, in_chans=chans, embed_dim=dim).to(device).eval()
        with torch.no_grad():
            ref.proj.weight.copy_(rearrange(proj.weight, "d (p1 p2 c) -> d c p1 p2", p1=p, p2=p))
            ref.proj.bias.copy_(proj.bias)
            images = randn(gen, 2, chans, img, img, device=device)
            got = tensor_out(run_student(module, images, what=what), what)
            n = (img // p) ** 2
            check_shape(got, (2, n, dim), ("batch", "patches", "embed_dim"), what, hints={
                (2, n, p * p * chans): "These are the flattened patches: project them with self.proj."})
            no_bias = ("the bias of the projection is missing: apply the whole Linear layer, self.proj(patches) "
                       "(x @ self.proj.weight.T, or F.linear without the bias, leaves it out).")
            variants = [
                (no_bias, lambda: _layout(images, p, ("h", "w", "p1", "p2", "c")) @ proj.weight.T),
                *_layout_variants(lambda order: proj(_layout(images, p, order))),
                *[(f"two mistakes at once. First, {no_bias} Second, {hint}",
                   lambda v=variant: v() - proj.bias) for hint, variant in
                  _layout_variants(lambda order: proj(_layout(images, p, order)))[:6]],
                *_strided_variants(lambda split: proj(_layout(images, p, ("h", "w", "p1", "p2", "c"), split))),
            ]
            diagnose(got, ref(images), variants, what)

    one(12, 4, 3, 10)
    if only == "values":
        passed("check_patch_embedding", "the values: matches vitedu.PatchEmbedding (a Conv2d with kernel = "
               "stride = 4) on 12x12 images")
        return
    other_sizes("12x12 images, P=4, 3 channels", "10x10 images, P=5, 2 channels", lambda: one(10, 5, 2, 6))
    passed("check_patch_embedding", "matches vitedu.PatchEmbedding (a Conv2d with kernel = stride = P) for P = 4 "
           "and 5")


def check_unfold_embedding(embed: Callable[[Tensor, nn.Conv2d], Tensor], device=None,
                           only: str | None = None) -> None:
    """Check ``embed(images, conv)``: the patch embedding of ``conv`` (any kernel and stride, overlapping or
    not) computed with ``F.unfold`` and one matrix product instead of the convolution.

    (batch, C, H, W) -> (batch, N, D), equal to ``conv(images).flatten(2).transpose(1, 2)``.
    ``only="patches"``: kernel = stride (non-overlapping patches) only; without it also overlapping windows.
    """
    only = aspect(only, ("patches",), "check_unfold_embedding")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(12), "embed_with_unfold(images, conv)"

    def one(chans: int, size: int, kernel: int, stride: int, dim: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12)
            conv = nn.Conv2d(chans, dim, kernel, stride=stride).to(device)
        images = randn(gen, 2, chans, size, size, device=device)
        with torch.no_grad():
            got = tensor_out(run_student(embed, images, conv, what=what), what)
            side = (size - kernel) // stride + 1
            n, n_plain, n_one = side * side, (size // kernel) ** 2, (size - kernel + 1) ** 2
            check_shape(got, (2, n, dim), ("batch", "patches", "embed_dim"), what, hints={
                (2, dim, n): "Tokens and features are swapped: unfold gives (batch, C*P*P, patches); "
                "transpose(1, 2) to (batch, patches, C*P*P) before the matrix product.",
                (2, n_plain, dim): f"You cut {n_plain} non-overlapping patches, but this convolution has stride "
                f"{stride} < kernel {kernel} (overlapping windows): pass stride=conv.stride to F.unfold.",
                (2, n_one, dim): f"You cut {n_one} windows, one at every pixel: F.unfold's stride defaults to 1. "
                "Pass stride=conv.stride.",
            })
            windows = torch.nn.functional.unfold(images, kernel, stride=stride).transpose(1, 2)  # (b, n, c*p*p)
            weight = conv.weight
            variants = [
                ("F.unfold flattens each window in (channel, row, column) order, the order of the convolution "
                 "kernel itself; you reordered the kernel to (row, column, channel). Use conv.weight.flatten(1) "
                 "(shape (D, C*P*P)) as it is.",
                 lambda: windows @ rearrange(weight, "d c p1 p2 -> d (p1 p2 c)").T + conv.bias),
                *[(f"F.unfold flattens each window in (channel, row, column) order, the order of the convolution "
                   f"kernel itself; you flattened the kernel in the order {pattern}. Use conv.weight.flatten(1) "
                   "(shape (D, C*P*P)) as it is.",
                   lambda pattern=pattern: windows @ rearrange(weight, f"d c p1 p2 -> d {pattern}").T + conv.bias)
                  for pattern in ("(c p2 p1)", "(p2 p1 c)", "(p1 c p2)", "(p2 c p1)")],
                ("the bias is missing: add conv.bias after the matrix product.",
                 lambda: windows @ weight.flatten(1).T),
                ("the kernel was reshaped, not transposed: conv.weight.reshape(C*P*P, D) reads the same numbers in "
                 "another order. Flatten it to (D, C*P*P) and transpose: conv.weight.flatten(1).T.",
                 lambda: windows @ weight.reshape(-1, weight.shape[0]) + conv.bias),
                ("the windows were reshaped, not transposed: unfold gives (batch, C*P*P, windows), and a reshape "
                 "to (batch, windows, C*P*P) mixes windows and features. Use .transpose(1, 2).",
                 lambda: windows.transpose(1, 2).reshape(windows.shape) @ weight.flatten(1).T + conv.bias),
            ]
            diagnose(got, conv(images).flatten(2).transpose(1, 2), variants, what)

    one(3, 12, 4, 4, 10)
    if only == "patches":
        passed("check_unfold_embedding", "non-overlapping patches: equals the convolution with kernel = stride = 4")
        return
    other_sizes("kernel 4, stride 4 (patches)", "kernel 3, stride 2 (overlapping windows), 2 channels",
                lambda: one(2, 11, 3, 2, 6))
    passed("check_unfold_embedding", "equals the convolution for non-overlapping and overlapping windows")


def _randomise(module: nn.Module, gen: torch.Generator) -> None:
    """Give every parameter a random value of a size that matters, so that every mistake shows.

    [CLS] and positions get unit size (their usual 0.02 would hide a missing position), LayerNorms a
    random gain and shift, Linear weights std 1/sqrt(fan_in) so that attention and MLP really mix the
    tokens instead of adding a tiny correction to the residual stream.
    """
    with torch.no_grad():
        for name, param in module.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if name in ("cls_token", "pos_embed"):
                param.copy_(noise)
            elif "norm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.5 * noise)
            elif param.dim() == 2:  # Linear weights (out, in)
                param.copy_(noise / param.shape[1] ** 0.5)
            else:  # biases, the patch convolution
                param.copy_(0.1 * noise if param.dim() == 1 else noise / param[0].numel() ** 0.5)


# The ways to wire one branch of the block (sub-layer f, its LayerNorm n, the other branch's LayerNorm o):
# (what is wrong, as a phrase, or None when right; the computation). {f}, {n}, {o} name the layers.
_BRANCH_FORMS: dict[str, tuple[str | None, Callable]] = {
    "pre-norm": (None, lambda x, f, n, o: x + f(n(x))),
    "no residual": ("the residual connection is missing: x = x + {f}({n}(x)), not {f}({n}(x))",
                    lambda x, f, n, o: f(n(x))),
    "post-norm": ("the LayerNorm comes after the residual sum, {n}(x + {f}(x)) (post-norm); ViT normalises the "
                  "branch's input: x + {f}({n}(x))", lambda x, f, n, o: n(x + f(x))),
    "post-norm, normalised input": ("the LayerNorm is applied twice, before {f} and after the sum; pre-norm applies "
                                    "it once, to the branch's input: x + {f}({n}(x))",
                                    lambda x, f, n, o: n(x + f(n(x)))),
    "norm on the output": ("the LayerNorm is applied to the branch's output, x + {n}({f}(x)); pre-norm applies it "
                           "to the branch's *input*: x + {f}({n}(x))", lambda x, f, n, o: x + n(f(x))),
    "no norm": ("the LayerNorm is missing: x + {f}({n}(x)), not x + {f}(x)", lambda x, f, n, o: x + f(x)),
    "normalised skip": ("the skip connection carries the normalised tokens, {n}(x) + {f}({n}(x)); it must carry x "
                        "itself: x + {f}({n}(x))", lambda x, f, n, o: n(x) + f(n(x))),
    "other norm": ("{f} gets the other LayerNorm, {o}; each sub-layer has its own: x + {f}({n}(x))",
                   lambda x, f, n, o: x + f(o(x))),
}


def _block_family(x: Tensor, attn: Callable, mlp: Callable, n1: nn.Module, n2: nn.Module) -> Variants:
    """Every wiring of the two branches (one or both wrong), lazily, each with its hint."""
    forms = list(_BRANCH_FORMS.values())
    for (a_hint, a_fn), (m_hint, m_fn) in itertools.product(forms, forms):
        if a_hint is None and m_hint is None:
            continue
        parts = []
        if a_hint:
            parts.append("in the attention branch, " + a_hint.format(f="attn", n="norm1", o="norm2"))
        if m_hint:
            parts.append("in the MLP branch, " + m_hint.format(f="mlp", n="norm2", o="norm1"))
        hint = ("; and ".join(parts) if len(parts) == 1 else "two mistakes at once: " + "; and ".join(parts)) + \
            ". The block is x = x + attn(norm1(x)), then x = x + mlp(norm2(x))."
        yield hint, lambda a=a_fn, m=m_fn: m(a(x, attn, n1, n2), mlp, n2, n1)


def check_encoder_block(cls: Callable[..., nn.Module], device=None, only: str | None = None) -> None:
    """Check a pre-norm encoder block ``cls(dim, num_heads)`` with layers norm1, attn, norm2, mlp.

    forward: (batch, tokens, dim) -> (batch, tokens, dim), x = x + attn(norm1(x)); x = x + mlp(norm2(x)).
    The check copies a randomised ``vitedu.Block``'s weights into the student's module. ``only``: "attention
    branch" (the MLP switched off: its last layer's weights and bias zero, so the block must be
    x + attn(norm1(x))), "MLP branch" (attention switched off: the block must be x + mlp(norm2(x))); without
    it the whole block.
    """
    only = aspect(only, ("attention branch", "MLP branch"), "check_encoder_block")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(9), "your encoder block"
    dim, heads = 16, 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(9)
        ref = Block(dim, heads).eval()
    _randomise(ref, gen)
    switched_off = {"attention branch": ref.mlp.fc2, "MLP branch": ref.attn.proj}.get(only)
    if switched_off is not None:
        with torch.no_grad():
            switched_off.weight.zero_()
            switched_off.bias.zero_()
    module = build_student(cls, ref, what, device, dim=dim, num_heads=heads)
    ref = ref.to(device)
    x = randn(gen, 2, 5, dim, device=device)
    n1, n2, mlp = ref.norm1, ref.norm2, ref.mlp

    def attn(t: Tensor) -> Tensor:
        return ref.attn(t)[0]

    with torch.no_grad():
        got = tensor_out(run_student(module, x, what=what), what)
        check_shape(got, (2, 5, dim), ("batch", "tokens", "dim"), what)
        variants = [
            ("you normalised after the residual sum (post-norm, as in the original Transformer). ViT is "
             "pre-norm: normalise the *input* of each branch, x = x + attn(norm1(x)), then x = x + mlp(norm2(x)).",
             lambda: n2((y := n1(x + attn(x))) + mlp(y))),
            ("the residual connection around attention is missing: x = x + attn(norm1(x)), not attn(norm1(x)).",
             lambda: (y := attn(n1(x))) + mlp(n2(y))),
            ("the residual connection around the MLP is missing: x = x + mlp(norm2(x)), not mlp(norm2(x)).",
             lambda: mlp(n2(x + attn(n1(x))))),
            ("both residual connections are missing: each sub-layer *adds* its output to x.",
             lambda: mlp(n2(attn(n1(x))))),
            ("the skip connection carries the normalised tokens; it must carry x itself: "
             "x = x + attn(norm1(x)) (not norm1(x) + attn(norm1(x))).",
             lambda: (y := n1(x) + attn(n1(x))) + mlp(n2(y))),
            ("you used norm1 before the MLP; each sub-layer has its own LayerNorm: x = x + mlp(norm2(x)).",
             lambda: (y := x + attn(n1(x))) + mlp(n1(y))),
            ("the MLP sees the block's input, not the output of the attention step: first x = x + attn(norm1(x)), "
             "then x = x + mlp(norm2(x)) on that updated x.",
             lambda: x + attn(n1(x)) + mlp(n2(x))),
            ("you applied norm2 to the MLP's output, x + norm2(mlp(x)). Pre-norm applies the norm to the "
             "branch's *input*: x = x + mlp(norm2(x)).",
             lambda: (y := x + attn(n1(x))) + n2(mlp(y))),
            ("you applied norm1 to the attention's output, x + norm1(attn(x)). Pre-norm applies the norm to the "
             "branch's *input*: x = x + attn(norm1(x)).",
             lambda: (y := x + n1(attn(x))) + mlp(n2(y))),
            ("you applied the LayerNorms to the outputs of the branches, x + norm1(attn(x)) and "
             "x + norm2(mlp(x)). Pre-norm applies them to the branches' *inputs*: x = x + attn(norm1(x)), "
             "then x = x + mlp(norm2(x)).",
             lambda: (y := x + n1(attn(x))) + n2(mlp(y))),
            ("the LayerNorms are missing: normalise the input of each branch, attn(norm1(x)) and mlp(norm2(x)).",
             lambda: (y := x + attn(x)) + mlp(y)),
            *_block_family(x, attn, mlp, n1, n2),
        ]
        diagnose(got, ref(x)[0], variants, what)
    detail = {"attention branch": "the attention branch: with the MLP switched off, x + attn(norm1(x))",
              "MLP branch": "the MLP branch: with attention switched off, x + mlp(norm2(x))",
              None: f"matches vitedu.Block (dim={dim}, heads={heads}), pre-norm with residuals"}[only]
    passed("check_encoder_block", detail)


def check_vit_forward(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a ViT ``cls(img_size, patch_size, in_chans, num_classes, embed_dim, depth, num_heads)`` with
    timm's layer names (patch_embed, cls_token, pos_embed, blocks, norm, head).

    forward: (batch, C, H, W) -> logits (batch, num_classes). The check copies a randomised
    ``vitedu.VisionTransformer``'s weights ([CLS] and positions of unit size) into the student's model.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(10), "your ViT"
    config = dict(img_size=12, patch_size=4, in_chans=3, num_classes=5, embed_dim=16, depth=2, num_heads=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10)
        ref = VisionTransformer(**config).eval()
    _randomise(ref, gen)
    model = build_student(cls, ref, what, device, **config)
    ref = ref.to(device)
    images = randn(gen, 2, 3, 12, 12, device=device)

    def forward(cls_at_end: bool = False, pos: str = "all", pool: str = "first", norm: str = "after",
                blocks: bool | str = True, cls: bool | str = True) -> Tensor:
        x = ref.patch_embed(images)  # (batch, patches, dim)
        cls_token = ref.cls_token.expand(x.shape[0], -1, -1) * (0 if cls == "zeros" else 1)
        if pos in ("patches-only", "shifted"):  # positions added to the patches before [CLS] is prepended
            x = x + (ref.pos_embed[:, 1:] if pos == "patches-only" else ref.pos_embed[:, :-1])
        if cls:
            x = torch.cat([x, cls_token] if cls_at_end else [cls_token, x], dim=1)
        if pos in ("all", "twice"):
            x = x + ref.pos_embed * (2 if pos == "twice" else 1)
        x = ref.norm(x) if norm == "before" else x
        run = {True: ref.blocks, False: [], "first": ref.blocks[:1], "last": ref.blocks[-1:]}[blocks]
        for block in run:
            x = block(x)[0]
        x = ref.norm(x) if norm == "after" else x
        pooled = {"first": x[:, 0], "last": x[:, -1], "mean": x.mean(dim=1), "second": x[:, 1]}[pool]
        return ref.head(pooled)

    n = ref.patch_embed.num_patches
    with torch.no_grad():
        try:
            got = tensor_out(run_student(model, images, what=what), what)
        except CheckFailed as err:
            sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", str(err))
            if sizes and sorted(map(int, sizes.groups())) == [n, n + 1]:
                raise CheckFailed(
                    f"{what}: the tokens and the position embeddings differ by one ({sizes[1]} against "
                    f"{sizes[2]}): the image has N = {n} patches and self.pos_embed has N + 1 = {n + 1} rows, row "
                    "0 for [CLS] and rows 1...N for the patches. Prepend [CLS] first, then add all of "
                    "self.pos_embed: x = torch.cat([cls, x], dim=1) + self.pos_embed.\n"
                    f"(The error: {err.__cause__})") from None
            raise
        check_shape(got, (2, config["num_classes"]), ("batch", "num_classes"), what, hints={
            (2, n + 1, config["num_classes"]): "You return logits for every token: classify the [CLS] token, "
            "x[:, 0].",
            (2, n, config["num_classes"]): "You return logits for every patch: prepend [CLS] and classify x[:, 0]."})
        cls_end = ("the [CLS] token is at the wrong end: you appended it after the patches. Prepend it, "
                   "torch.cat([cls, x], dim=1), so that it is token 0, the one the head reads (x[:, 0]) and the "
                   "one pos_embed[:, 0] belongs to.")
        variants = [
            ("the encoder blocks never run: the tokens go from the embedding straight to the final norm and "
             "the head, so no token ever attends to another and [CLS] knows nothing of the image. Run every "
             "block in order, `for block in self.blocks: x, _ = block(x)`, before the final norm.",
             lambda: forward(blocks=False)),
            ("you applied the final LayerNorm before the blocks. It is the *final* norm: it normalises the "
             "output of the last block, so apply self.norm after the loop over self.blocks, then the head.",
             lambda: forward(norm="before")),
            (cls_end, lambda: forward(cls_at_end=True, pool="last")),
            (cls_end, lambda: forward(cls_at_end=True, pool="first")),
            ("the position embeddings are not added: without them the model cannot tell where a patch came from. "
             "Add self.pos_embed to the tokens after prepending [CLS].",
             lambda: forward(pos="none")),
            ("the [CLS] token gets no position: prepend [CLS] first, then add all N + 1 rows of self.pos_embed.",
             lambda: forward(pos="patches-only")),
            ("the positions are off by one: you added rows 0...N-1 of self.pos_embed to the N patches, so patch i "
             "got the row of the token before it (row 0 is [CLS]'s) and [CLS] got none. Prepend [CLS] first, "
             "then add all N + 1 rows: x = torch.cat([cls, x], dim=1) + self.pos_embed.",
             lambda: forward(pos="shifted")),
            ("there is no [CLS] token: you classify the first patch. Prepend self.cls_token (expanded to the "
             "batch) as token 0, add all N + 1 rows of self.pos_embed, and classify x[:, 0].",
             lambda: forward(pos="patches-only", cls=False)),
            ("you averaged all tokens; this ViT classifies from the [CLS] token alone: self.head(x[:, 0]).",
             lambda: forward(pool="mean")),
            ("the final LayerNorm is missing: apply self.norm to the tokens after the last block.",
             lambda: forward(norm="none")),
            ("only the first block runs: run every block in order, `for block in self.blocks: x, _ = block(x)` "
             "(a `return` or `break` inside the loop stops it after one block).", lambda: forward(blocks="first")),
            ("only the last block runs (the loop variable is used after the loop, or the blocks' outputs are not "
             "fed forward): each block takes the previous one's output, `for block in self.blocks: "
             "x, _ = block(x)`.", lambda: forward(blocks="last")),
            ("the position embeddings are added twice: add self.pos_embed once, after prepending [CLS].",
             lambda: forward(pos="twice")),
            ("you classify token 1, the first patch; the head reads the [CLS] token, token 0: self.head(x[:, 0]).",
             lambda: forward(pool="second")),
            ("you prepended zeros instead of the learned [CLS] token: prepend self.cls_token, expanded to the batch, "
             "self.cls_token.expand(x.shape[0], -1, -1).", lambda: forward(cls="zeros")),
        ]
        diagnose(got, ref(images), variants, what)
    passed("check_vit_forward", "logits match vitedu.VisionTransformer ([CLS] first, positions added, final norm)")
