"""Looking inside a ViT: attention rollout, attention distance, position similarity, filter components.

Plain functions on tensors, so they work on any ViT whose attention maps you can get, e.g.
``model.attention_maps(images)`` -> (layers, batch, heads, tokens, tokens), the same type for every vitedu model
(ViT, DeiT, CaiT, ConViT; a layer that does not see every token has zeros there, see
``ClassTokenClassifier.attention_maps``). The three panels of Figure 7 of
the ViT paper (Dosovitskiy et al., 2021) are :func:`patch_embed_components` (left),
:func:`pos_embed_similarity` (centre) and :func:`mean_attention_distance` (right);
:func:`attention_rollout` is Abnar & Zuidema (2020). Tokens are ordered as in the model: first the
``num_prefix_tokens`` extra tokens ([CLS]), then the patches row by row, so patch i sits at
(i // grid_w, i % grid_w).

Probes that can come out either way (high-norm tokens, rows versus columns at matched distances, position
similarity on a shared colour scale, similarity against distance) are in :mod:`vitedu.probes`.

A caution that applies to every function here: they *describe* what the weights do, they do not prove
why the model decides. A map on random weights is a map too; compare with an untrained model.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .patching import pair

_FUSIONS = ("mean", "max", "min")


def _check_maps(maps: Tensor, name: str = "maps") -> None:
    if not isinstance(maps, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(maps).__name__}")
    if maps.dim() != 5 or maps.shape[-1] != maps.shape[-2]:
        hint = " Stack one layer into a depth axis with maps.unsqueeze(0)." if maps.dim() == 4 else ""
        raise ValueError(
            f"expected attention maps of shape (depth, batch, heads, tokens, tokens), as returned by "
            f"model.attention_maps (every vitedu model), got shape {tuple(maps.shape)}.{hint}"
        )


def _check_tokens(num_tokens: int, grid_size: tuple[int, int], num_prefix_tokens: int) -> None:
    grid_h, grid_w = grid_size
    if num_tokens != num_prefix_tokens + grid_h * grid_w:
        raise ValueError(
            f"the maps have {num_tokens} tokens, but a {grid_h}x{grid_w} grid with {num_prefix_tokens} prefix "
            f"token(s) has {num_prefix_tokens + grid_h * grid_w}. Pass the model's patch_embed.grid_size and "
            f"num_prefix_tokens (1 with a [CLS] token, 0 with mean pooling)."
        )


def attention_rollout(maps: Tensor, head_fusion: str = "mean", residual: bool = True) -> Tensor:
    """How much each input token flows into each output token, through all layers (Abnar & Zuidema, 2020).

    (depth, batch, heads, tokens, tokens) -> (batch, tokens, tokens)

    One layer mixes tokens with its attention matrix A (rows sum to 1). The heads are fused into one matrix
    (their mean, or elementwise max/min), and, because every block adds its input back (x + attn(x)), the
    residual path is modelled as attending to oneself: A' = (A + I) / 2, rows renormalised to sum to 1.
    Chaining the layers multiplies these matrices: rollout = A'_L ... A'_2 A'_1. Row i of the result is
    how the final token i is made of the input tokens; row 0 with a [CLS] token is the usual "rollout map".
    This ignores the values, the MLPs and the norms: it is a model of information flow, not an explanation.
    """
    _check_maps(maps)
    if head_fusion not in _FUSIONS:
        raise ValueError(f"head_fusion must be one of {_FUSIONS}, got {head_fusion!r}")
    if head_fusion == "mean":
        fused = maps.mean(dim=2)  # (depth, batch, tokens, tokens)
    else:
        fused = maps.amax(dim=2) if head_fusion == "max" else maps.amin(dim=2)
    if residual:
        eye = torch.eye(maps.shape[-1], dtype=maps.dtype, device=maps.device)
        fused = (fused + eye) / 2
    # max/min fusion breaks the row sums; restore them (a row that is all zeros stays zero)
    fused = fused / fused.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(fused.dtype).tiny)
    rollout = fused[0]  # (batch, tokens, tokens)
    for layer in fused[1:]:
        rollout = layer @ rollout  # the later layer mixes what the earlier ones produced
    return rollout


def patch_distances(grid_size: int | tuple[int, int], patch_size: int, device=None) -> Tensor:
    """Euclidean distance in pixels between the centres of every pair of patches.

    -> (num_patches, num_patches); neighbours are ``patch_size`` apart, diagonal neighbours patch_size * sqrt(2).
    """
    grid_h, grid_w = pair(grid_size)
    rows, cols = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    centres = torch.stack([rows.flatten(), cols.flatten()], dim=-1).float() * patch_size  # (patches, 2)
    return torch.cdist(centres, centres).to(device)


def mean_attention_distance(
    maps: Tensor, grid_size: int | tuple[int, int], patch_size: int, num_prefix_tokens: int = 1
) -> Tensor:
    """How far, in pixels, each head looks: the ViT paper's "attention distance" (Figure 7 right, Figure 11).

    (depth, batch, heads, tokens, tokens) -> (depth, heads)

    For a query patch, the attention-weighted average of its pixel distance to every key patch, like a
    receptive-field size; then averaged over query patches and images. Prefix tokens ([CLS]) have no
    position, so they are left out as queries and as keys, and each query's weights on the patches are
    renormalised to sum to 1 (the distance is "given that it looks at a patch"). A head that attends only
    to itself has distance 0; one that spreads evenly over an n x n grid of P-pixel patches has about
    0.52 * n * P (the mean distance between two random points of a square).
    """
    _check_maps(maps)
    grid = pair(grid_size)
    _check_tokens(maps.shape[-1], grid, num_prefix_tokens)
    patches = maps[..., num_prefix_tokens:, num_prefix_tokens:]  # (depth, batch, heads, patches, patches)
    patches = patches / patches.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(maps.dtype).tiny)
    distance = patch_distances(grid, patch_size, device=maps.device).to(maps.dtype)  # (patches, patches)
    per_query = (patches * distance).sum(dim=-1)  # (depth, batch, heads, patches)
    return per_query.mean(dim=(1, 3))  # (depth, heads)


def _model_grid(model: nn.Module) -> tuple[tuple[int, int], int]:
    for attr in ("pos_embed", "patch_embed", "num_prefix_tokens"):
        if not hasattr(model, attr):
            raise TypeError(
                f"expected a vitedu VisionTransformer (with pos_embed, patch_embed and num_prefix_tokens), "
                f"got a {type(model).__name__} without {attr!r}"
            )
    return tuple(model.patch_embed.grid_size), model.num_prefix_tokens


def pos_embed_similarity(model: nn.Module) -> Tensor:
    """Cosine similarity between the position embedding of every patch and every other (Figure 7 centre).

    model -> (grid_h, grid_w, grid_h, grid_w); entry [i, j, k, l] compares patch (i, j) with patch (k, l).

    The model is never told that patches lie on a grid: learned position embeddings start random. If
    training discovers the 2-D layout, each patch's embedding is most similar to itself, then to its row,
    column and neighbours; ``similarity[i, j]`` drawn as an image shows that as a bright spot at (i, j).
    The prefix tokens' embeddings ([CLS]) are left out.
    """
    (grid_h, grid_w), num_prefix = _model_grid(model)
    pos = model.pos_embed.detach()[0, num_prefix:]  # (patches, dim)
    pos = pos / pos.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (pos @ pos.T).reshape(grid_h, grid_w, grid_h, grid_w)


def patch_embed_components(model_or_weight: nn.Module | Tensor, num_components: int | None = None):
    """Principal components of the patch-embedding filters (Figure 7 left).

    model, or a patch_embed.proj weight (dim, channels, P, P) -> (components, explained_variance_ratio):
    components (num_components, channels, P, P), each of unit norm; ratios (num_components,).

    Each of the D rows of the embedding matrix is a P x P filter that the patch is compared with. PCA treats
    the D filters as D samples: subtract the mean filter, take the SVD  W - mean = U S V^T; the rows of V^T
    are the directions (patch-shaped images) along which the filters vary most, and S^2 / sum(S^2) is the
    share of the variance each one explains. The sign of a component is arbitrary; we fix it so that its
    largest-magnitude pixel (the first one, row by row, if several tie) is positive. Trained ViTs show smooth,
    low-frequency "basis functions" here.
    """
    weight = model_or_weight.patch_embed.proj.weight if isinstance(model_or_weight, nn.Module) else model_or_weight
    if not isinstance(weight, Tensor) or weight.dim() != 4:
        raise ValueError(
            "expected a model with patch_embed.proj, or its weight of shape (dim, channels, P, P), got "
            f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    dim, channels, ph, pw = weight.shape
    filters = weight.detach().reshape(dim, -1).double()  # (dim, channels * P * P)
    centred = filters - filters.mean(dim=0, keepdim=True)
    _, singular, vh = torch.linalg.svd(centred, full_matrices=False)  # vh: (rank, channels * P * P)
    k = vh.shape[0] if num_components is None else num_components
    if not 1 <= k <= vh.shape[0]:
        raise ValueError(f"num_components must be between 1 and {vh.shape[0]} (min(dim, C*P*P)), got {k}")
    vh = vh[:k]
    # The first pixel (row by row) whose magnitude is the largest, up to rounding: ties are common (e.g. a
    # checkerboard), and a plain argmax would pick among them by rounding noise.
    largest = vh.abs() >= vh.abs().amax(dim=1, keepdim=True) * (1 - 1e-9)  # (k, pixels)
    signs = torch.sign(vh.gather(1, largest.double().argmax(dim=1, keepdim=True)))  # (k, 1)
    ratio = singular**2 / (singular**2).sum()
    return (vh * signs).reshape(k, channels, ph, pw).to(weight.dtype), ratio[:k].to(weight.dtype)


def cls_attention(attention: Tensor, num_prefix_tokens: int = 1) -> Tensor:
    """Where the [CLS] token looks, as a distribution over the patches.

    (batch, tokens, tokens) or (batch, heads, tokens, tokens) -> (batch, num_patches) or (batch, heads, patches)

    Takes row 0 (the [CLS] query) of one layer's attention or of a rollout, drops the prefix columns and
    renormalises to sum to 1, so maps from different layers and models share one scale: a uniform map is
    1 / num_patches everywhere.
    """
    if num_prefix_tokens < 1:
        raise ValueError(
            "cls_attention needs a [CLS] token (num_prefix_tokens >= 1); a mean-pooled model has none - "
            "average the rows of the patch queries instead"
        )
    if attention.dim() not in (3, 4):
        raise ValueError(
            f"expected (batch, tokens, tokens) or (batch, heads, tokens, tokens), got {tuple(attention.shape)}; "
            "pick one layer of attention_maps (e.g. maps[-1]) or pass attention_rollout(maps)"
        )
    row = attention[..., 0, num_prefix_tokens:]
    return row / row.sum(dim=-1, keepdim=True)


def token_map_to_image(values: Tensor, grid_size: int | tuple[int, int], patch_size: int) -> Tensor:
    """Turn one value per patch into an image-sized map, each patch's value filling its P x P pixels.

    (..., num_patches) -> (..., grid_h * P, grid_w * P)

    Nearest-neighbour on purpose: a smooth upsampling would draw detail the model does not have. Overlay the
    result on the image with an explicit colour range (``vmin=0`` and a colour bar).
    """
    grid_h, grid_w = pair(grid_size)
    if values.shape[-1] != grid_h * grid_w:
        raise ValueError(
            f"expected {grid_h * grid_w} values per map (a {grid_h}x{grid_w} grid, prefix tokens removed), "
            f"got {values.shape[-1]}; use cls_attention(...) to get one value per patch"
        )
    grid = values.reshape(*values.shape[:-1], grid_h, grid_w)
    return grid.repeat_interleave(patch_size, dim=-2).repeat_interleave(patch_size, dim=-1)


def box_coverage(boxes: Tensor, grid_size: int | tuple[int, int], patch_size: int) -> Tensor:
    """Share of each patch's pixels that lie inside a box of pixels, one box per image.

    boxes (batch, 4) as (top, left, height, width) in pixels -> (batch, num_patches), values in [0, 1]

    A patch entirely inside the box gets 1, a patch half inside 0.5, a patch outside 0. Multiplying a
    per-patch distribution by this and summing gives the share of it that falls in the box
    (:func:`mass_in_boxes`); it works for any map over the patches, e.g. every row of a patch-to-patch
    attention map at once.
    """
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"expected boxes of shape (batch, 4) as (top, left, height, width), got {tuple(boxes.shape)}")
    grid_h, grid_w = pair(grid_size)
    top, left, height, width = boxes.unbind(-1)  # (batch,) each
    starts_y = torch.arange(grid_h, device=boxes.device) * patch_size  # (grid_h,) first pixel row of each patch
    starts_x = torch.arange(grid_w, device=boxes.device) * patch_size  # (grid_w,)
    # Overlap of [start, start + P) with [top, top + height) along each axis, in pixels.
    rows = ((starts_y + patch_size).minimum((top + height)[:, None]) - starts_y.maximum(top[:, None])).clamp(min=0)
    cols = ((starts_x + patch_size).minimum((left + width)[:, None]) - starts_x.maximum(left[:, None])).clamp(min=0)
    inside = rows[:, :, None] * cols[:, None, :] / patch_size**2  # (batch, grid_h, grid_w)
    return inside.flatten(1).float()  # (batch, num_patches), patches row by row


def mass_in_boxes(values: Tensor, boxes: Tensor, grid_size: int | tuple[int, int], patch_size: int) -> Tensor:
    """Share of a per-patch distribution that falls inside a box of pixels, one box per image.

    values (batch, num_patches), boxes (batch, 4) as (top, left, height, width) in pixels -> (batch,)

    Each patch's weight is spread evenly over its P x P pixels, so a patch half inside the box counts half
    (:func:`box_coverage`). A uniform distribution gives exactly the box's share of the image,
    height * width / (H * W): the baseline that a map "looking at the object" must beat.
    """
    if boxes.dim() != 2 or boxes.shape[-1] != 4 or boxes.shape[0] != values.shape[0]:
        raise ValueError(
            f"expected one box per image, (batch={values.shape[0]}, 4) as (top, left, height, width), "
            f"got {tuple(boxes.shape)}"
        )
    grid_h, grid_w = pair(grid_size)
    if values.shape[-1] != grid_h * grid_w:
        raise ValueError(
            f"expected {grid_h * grid_w} values per map (a {grid_h}x{grid_w} grid, prefix tokens removed), "
            f"got {values.shape[-1]}; use cls_attention(...) to get one value per patch"
        )
    coverage = box_coverage(boxes.to(values.device), grid_size, patch_size)  # (batch, num_patches)
    return (values * coverage).sum(dim=-1) / values.sum(dim=-1)


def show_overlay(ax, image: Tensor, heat: Tensor, vmax: float | None = None, alpha: float = 0.6, title: str = ""):
    """Draw a grey image with a heat map on top, on an explicit colour scale starting at 0.

    image (H, W) or (1, H, W); heat (H, W), e.g. from :func:`token_map_to_image`. Returns the heat map's
    image, for ``plt.colorbar``. Pass the same ``vmax`` to every panel you compare; the default is the
    map's own maximum, which you should then print or show on a colour bar.
    """
    image = image.detach().cpu().reshape(image.shape[-2], image.shape[-1])
    heat = heat.detach().cpu()
    if heat.shape != image.shape:
        raise ValueError(f"heat map {tuple(heat.shape)} and image {tuple(image.shape)} must have the same size")
    ax.imshow(image.numpy(), cmap="gray")  # matplotlib wants arrays (a tensor draws, with a DeprecationWarning)
    shown = ax.imshow(heat.numpy(), cmap="inferno", alpha=alpha, vmin=0.0,
                      vmax=float(heat.max()) if vmax is None else vmax)
    ax.set_title(title)
    ax.axis("off")
    return shown


__all__ = [
    "attention_rollout", "box_coverage", "cls_attention", "mass_in_boxes", "mean_attention_distance", "patch_distances",
    "patch_embed_components", "pos_embed_similarity", "show_overlay", "token_map_to_image",
]
