"""Assignment 2: patches, the patch embedding, the encoder block and the whole forward pass (chapters 4-6).

See ``vitedu.checks`` for what each check diagnoses by name."""

from __future__ import annotations

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


def check_patchify(patchify_fn: Callable[[Tensor, int], Tensor], device=None) -> None:
    """Check ``patchify(images, patch_size)``: (batch, C, H, W) -> (batch, N, P * P * C), N = HW / P^2.

    Patches row by row; inside a patch the numbers are ordered (row, column, channel), as vitedu.patchify.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(7), "patchify(images, patch_size)"
    batch, chans, height, width, p = 2, 3, 8, 12, 4  # a 2 x 3 grid: not square, so orders are visible
    images = randn(gen, batch, chans, height, width, device=device)
    n, d = height * width // p**2, p * p * chans
    got = tensor_out(run_student(patchify_fn, images, p, what=what), what)
    check_shape(got, (batch, n, d), ("batch", "patches", "patch_size*patch_size*channels"), what, hints={
        (batch, d, n): "Patches and features are swapped: return (batch, patches, features), e.g. with "
        "'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
        (batch, height // p, width // p, d): "Flatten the grid of patches into one axis of N tokens: '(h w)'.",
        (batch, n, chans, p, p): "Flatten each patch into one vector of P * P * C numbers: '(p1 p2 c)'."})
    variants = [
        (_COLUMN_MAJOR, lambda: rearrange(images, "b c (h p1) (w p2) -> b (w h) (p1 p2 c)", p1=p, p2=p)),
        ("the numbers inside each patch are ordered (channel, row, column) - this is also what F.unfold "
         "returns; vitedu and timm order them (row, column, channel): '(p1 p2 c)'.",
         lambda: rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p)),
        ("rows and columns inside each patch are swapped: flatten a patch row by row, '(p1 p2 c)' with p1 the "
         "row inside the patch.",
         lambda: rearrange(images, "b c (h p1) (w p2) -> b (h w) (p2 p1 c)", p1=p, p2=p)),
        ("a plain reshape cuts the image into runs of consecutive pixels, not P x P squares. Split height and "
         "width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
         lambda: images.reshape(batch, n, d)),
        ("a reshape of the channels-last image cuts it into runs of consecutive pixels, not P x P squares. "
         "Split height and width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
         lambda: images.permute(0, 2, 3, 1).reshape(batch, n, d)),
    ]
    diagnose(got, patchify(images, p), variants, what)
    passed("check_patchify", f"{tuple(images.shape)} with P={p} -> {tuple(got.shape)}, row-major like vitedu")


def check_patch_embedding(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a patch embedding ``cls(img_size, patch_size, in_chans, embed_dim)`` with a Linear ``proj``
    of shape (P * P * C -> embed_dim): forward (batch, C, H, W) -> (batch, N, embed_dim).

    The reference is ``vitedu.PatchEmbedding`` (a Conv2d) with the student's Linear weights reshaped into
    the convolution kernel: the two are the same map.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(8), "your patch embedding"
    img, p, chans, dim = 12, 4, 3, 10
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(8)
        module = run_student(cls, img, p, chans, dim, what="creating your patch embedding")
    proj = getattr(module, "proj", None)
    if not isinstance(proj, nn.Linear) or tuple(proj.weight.shape) != (dim, p * p * chans):
        raise CheckFailed(
            f"{what} needs the layer `proj = nn.Linear(patch_size * patch_size * in_chans, embed_dim)` of the given "
            f"__init__ (here Linear({p * p * chans}, {dim})); got {proj!r}. Keep the __init__ and write only forward()."
        )
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

        def embed(pattern: str) -> Tensor:
            return proj(rearrange(images, f"b c (h p1) (w p2) -> {pattern}", p1=p, p2=p))

        variants = [
            (_COLUMN_MAJOR, lambda: embed("b (w h) (p1 p2 c)")),
            ("the numbers inside each patch are ordered (channel, row, column); order them (row, column, channel), "
             "'(p1 p2 c)', as vitedu.patchify does, so that self.proj sees the layout it expects.",
             lambda: embed("b (h w) (c p1 p2)")),
            ("the bias of the projection is missing: apply the whole Linear layer, self.proj(patches).",
             lambda: embed("b (h w) (p1 p2 c)") - proj.bias),
        ]
        diagnose(got, ref(images), variants, what)
    passed("check_patch_embedding", f"matches vitedu.PatchEmbedding (a Conv2d with kernel = stride = {p})")


def check_unfold_embedding(embed: Callable[[Tensor, nn.Conv2d], Tensor], device=None) -> None:
    """Check ``embed(images, conv)``: the patch embedding of ``conv`` (any kernel and stride, overlapping or
    not) computed with ``F.unfold`` and one matrix product instead of the convolution.

    (batch, C, H, W) -> (batch, N, D), equal to ``conv(images).flatten(2).transpose(1, 2)``.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(12), "embed_with_unfold(images, conv)"

    def one(chans: int, size: int, kernel: int, stride: int, dim: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12)
            conv = nn.Conv2d(chans, dim, kernel, stride=stride).to(device)
        images = randn(gen, 2, chans, size, size, device=device)
        with torch.no_grad():
            got = tensor_out(run_student(embed, images, conv, what=what), what)
            side = (size - kernel) // stride + 1
            n, n_plain = side * side, (size // kernel) ** 2
            check_shape(got, (2, n, dim), ("batch", "patches", "embed_dim"), what, hints={
                (2, dim, n): "Tokens and features are swapped: unfold gives (batch, C*P*P, patches); "
                "transpose(1, 2) to (batch, patches, C*P*P) before the matrix product.",
                (2, n_plain, dim): f"You cut {n_plain} non-overlapping patches, but this convolution has stride "
                f"{stride} < kernel {kernel} (overlapping windows): pass stride=conv.stride to F.unfold.",
            })
            windows = torch.nn.functional.unfold(images, kernel, stride=stride).transpose(1, 2)  # (b, n, c*p*p)
            variants = [
                ("F.unfold flattens each window in (channel, row, column) order, the order of the convolution "
                 "kernel itself; you reordered the kernel to (row, column, channel). Use conv.weight.flatten(1) "
                 "(shape (D, C*P*P)) as it is.",
                 lambda: windows @ rearrange(conv.weight, "d c p1 p2 -> d (p1 p2 c)").T + conv.bias),
                ("the bias is missing: add conv.bias after the matrix product.",
                 lambda: windows @ conv.weight.flatten(1).T),
            ]
            diagnose(got, conv(images).flatten(2).transpose(1, 2), variants, what)

    one(3, 12, 4, 4, 10)
    other_sizes("kernel 4, stride 4 (patches)", "kernel 4, stride 2 (overlapping windows), 2 channels",
                 lambda: one(2, 10, 4, 2, 6))
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


def check_encoder_block(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a pre-norm encoder block ``cls(dim, num_heads)`` with layers norm1, attn, norm2, mlp.

    forward: (batch, tokens, dim) -> (batch, tokens, dim), x = x + attn(norm1(x)); x = x + mlp(norm2(x)).
    The check copies a randomised ``vitedu.Block``'s weights into the student's module.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(9), "your encoder block"
    dim, heads = 16, 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(9)
        ref = Block(dim, heads).eval()
    _randomise(ref, gen)
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
        ]
        diagnose(got, ref(x)[0], variants, what)
    passed("check_encoder_block", f"matches vitedu.Block (dim={dim}, heads={heads}), pre-norm with residuals")


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
                blocks: bool = True, cls: bool = True) -> Tensor:
        x = ref.patch_embed(images)  # (batch, patches, dim)
        cls_token = ref.cls_token.expand(x.shape[0], -1, -1)
        if pos in ("patches-only", "shifted"):  # positions added to the patches before [CLS] is prepended
            x = x + (ref.pos_embed[:, 1:] if pos == "patches-only" else ref.pos_embed[:, :-1])
        if cls:
            x = torch.cat([x, cls_token] if cls_at_end else [cls_token, x], dim=1)
        if pos == "all":
            x = x + ref.pos_embed
        x = ref.norm(x) if norm == "before" else x
        for block in ref.blocks if blocks else []:
            x = block(x)[0]
        x = ref.norm(x) if norm == "after" else x
        pooled = {"first": x[:, 0], "last": x[:, -1], "mean": x.mean(dim=1)}[pool]
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
        ]
        diagnose(got, ref(images), variants, what)
    passed("check_vit_forward", "logits match vitedu.VisionTransformer ([CLS] first, positions added, final norm)")
