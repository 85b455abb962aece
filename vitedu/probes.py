"""Probes that can come out either way: high-norm tokens, rows versus columns, position geometry.

Each function here measures an effect that a trained ViT may or may not show, and each has a test that plants
the effect and checks that the function finds it (and finds nothing on a model without it), so a "no" from it
means something:

- :func:`token_norms` and :func:`high_norm_tokens`: the few tokens whose norm explodes in the middle and late
  blocks of large ViTs, Darcet et al. (2024), "Vision Transformers Need Registers".
- :func:`row_column_similarity` (and :func:`position_row_column`, :func:`attention_row_column`): is a matrix
  over patch pairs (cosine similarity of position embeddings, or attention) larger for pairs in the same row
  than for pairs in the same column *at the same distance*?
- :func:`position_similarity` and :func:`shared_limits`: the similarity mosaic of Figure 7 (centre) of the
  ViT paper, with one colour scale for several models, taken from the data.
- :func:`position_distance_correlation`: how strongly position-embedding similarity falls with grid distance.

Position embeddings are passed as the model's ``pos_embed`` (1, tokens, dim), as (tokens, dim), or as the model;
patches are ordered row by row after ``num_prefix_tokens`` extra tokens ([CLS]), so patch i sits at
(i // grid_w, i % grid_w), as in :mod:`vitedu.interpret`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .patching import pair

# --- 1. high-norm tokens (Darcet et al., 2024) ------------------------------------------------------------------


def block_outputs(model: nn.Module, images: Tensor) -> Tensor:
    """The residual stream after every block: what each block hands to the next.

    model, images (batch, channels, H, W) -> (blocks, batch, tokens, dim)

    A forward hook on each of ``model.blocks`` records its output (the first element when a block returns
    ``(x, attention_weights)``, as vitedu's ``Block`` does), during one forward pass under ``torch.no_grad``.
    These are the tokens *before* the final LayerNorm: the norm that makes the last layer's tokens comparable
    is exactly what would hide a token whose norm has exploded. Put the model in ``.eval()`` first, or dropout
    makes the result random. The hooks are removed even if the forward pass fails.
    """
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
        raise TypeError(
            f"expected a ViT whose encoder blocks are in model.blocks (an nn.ModuleList), as in "
            f"vitedu.VisionTransformer; got a {type(model).__name__} without one"
        )
    if not isinstance(images, Tensor) or images.dim() != 4:
        got = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(
            f"expected a batch of images of shape (batch, channels, H, W), got {got}; "
            "add a batch axis to one image with image.unsqueeze(0)"
        )
    outputs: list[Tensor] = []

    def record(module, inputs, output):
        outputs.append((output[0] if isinstance(output, tuple) else output).detach())

    handles = [block.register_forward_hook(record) for block in blocks]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(outputs)  # (blocks, batch, tokens, dim)


def token_norms(model: nn.Module, images: Tensor) -> Tensor:
    """The L2 norm of every token after every block (Darcet et al., 2024, Figure 3).

    model, images (batch, channels, H, W) -> (blocks, batch, tokens), tokens in the model's order
    ([CLS] first, then the patches row by row).

    Darcet et al. found that large trained ViTs (DINOv2, OpenCLIP, DeiT-III) put a few tokens, on uninformative
    background patches, at about ten times the norm of the others from the middle blocks on, and use them as
    scratch space for global information. A histogram of the norms then has a second, clearly separated mode.
    Histogram-ready: ``norms[b, :, k:].flatten()`` is every patch token of block b (leave out the k prefix
    tokens), and ``plt.hist(norms[b, :, k:].flatten(), bins=50, log=True)`` shows whether that mode is there.
    """
    return block_outputs(model, images).norm(dim=-1)  # (blocks, batch, tokens)


def high_norm_tokens(norms: Tensor, factor: float = 3.0, num_prefix_tokens: int = 0) -> Tensor:
    """Flag the tokens whose norm is far above the typical token's: the high-norm outliers, if any.

    norms (..., tokens), e.g. (blocks, batch, tokens) from :func:`token_norms` -> bool mask (..., tokens)

    A token is flagged when its norm exceeds ``factor`` times the median norm of the patch tokens of the same
    image and block. The median is robust: a handful of outliers do not move it, so they cannot hide by raising
    the bar. The criterion is scale-free, so it works for any width and depth. Why a factor of about 3: in
    Darcet et al.'s histograms the outliers form a separate mode several times (about ten times) the bulk's
    norm, while the bulk itself spreads over much less than a factor of 2; a factor of 3 sits in the empty gap.
    Look at the histogram before trusting any threshold. Prefix tokens ([CLS], registers) are neither used for
    the median nor flagged (they are never background patches); their mask entries are False.
    """
    if not isinstance(norms, Tensor) or norms.dim() < 1 or norms.is_complex() or norms.dtype == torch.bool:
        raise ValueError(
            "expected real token norms of shape (..., tokens), e.g. (blocks, batch, tokens) from token_norms, got "
            f"{tuple(norms.shape) if isinstance(norms, Tensor) else type(norms).__name__}"
        )
    if factor <= 1:
        raise ValueError(f"factor must be above 1 (a multiple of the median norm), got {factor}; try 3")
    if not 0 <= num_prefix_tokens < norms.shape[-1]:
        raise ValueError(
            f"num_prefix_tokens must be between 0 and tokens - 1 = {norms.shape[-1] - 1}, got {num_prefix_tokens}"
        )
    patches = norms[..., num_prefix_tokens:]  # (..., patches)
    median = patches.median(dim=-1, keepdim=True).values  # (..., 1)
    flags = torch.zeros_like(norms, dtype=torch.bool)
    flags[..., num_prefix_tokens:] = patches > factor * median
    return flags


# --- position embeddings as (patches, dim) ----------------------------------------------------------------------


def _positions(source: nn.Module | Tensor, grid_size, num_prefix_tokens: int) -> tuple[Tensor, tuple[int, int]]:
    """A model or a pos_embed -> (patches, dim) and the grid; the prefix rows removed."""
    if isinstance(source, nn.Module):
        if not hasattr(source, "pos_embed") or not hasattr(source, "patch_embed"):
            raise TypeError(f"expected a ViT with pos_embed and patch_embed, got a {type(source).__name__}")
        pos, grid, num_prefix_tokens = source.pos_embed, source.patch_embed.grid_size, source.num_prefix_tokens
    else:
        pos, grid = source, grid_size
    if not isinstance(pos, Tensor) or pos.dim() not in (2, 3) or (pos.dim() == 3 and pos.shape[0] != 1):
        got = tuple(pos.shape) if isinstance(pos, Tensor) else type(pos).__name__
        raise ValueError(f"expected position embeddings of shape (1, tokens, dim) or (tokens, dim), got {got}")
    if grid is None:
        raise ValueError("pass grid_size (e.g. model.patch_embed.grid_size) with a pos_embed tensor")
    grid_h, grid_w = pair(grid)
    pos = pos.detach().reshape(pos.shape[-2], pos.shape[-1])  # (tokens, dim)
    if pos.shape[0] != num_prefix_tokens + grid_h * grid_w:
        raise ValueError(
            f"the position embeddings have {pos.shape[0]} rows, but a {grid_h}x{grid_w} grid with "
            f"{num_prefix_tokens} prefix token(s) needs {num_prefix_tokens + grid_h * grid_w}. Pass the model's "
            f"patch_embed.grid_size and num_prefix_tokens (1 with a [CLS] token, 0 with mean pooling)."
        )
    return pos[num_prefix_tokens:], (grid_h, grid_w)  # (patches, dim)


def _cosine(pos: Tensor) -> Tensor:
    """(patches, dim) -> (patches, patches) cosine similarity, in float64."""
    pos = pos.double()
    pos = pos / pos.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return pos @ pos.T


# --- 2. rows versus columns at matched distances -----------------------------------------------------------------


def row_column_similarity(pair_values: Tensor, grid_size: int | tuple[int, int]) -> dict[str, Tensor]:
    """Compare patch pairs in the same row with pairs in the same column, distance by distance.

    pair_values (..., patches, patches), e.g. a cosine similarity of position embeddings or an attention map
    with the prefix tokens removed -> a dict of

      distance      (D,)     d = 1 .. min(grid_h, grid_w) - 1, in patches
      row_mean      (..., D) mean over the pairs (r, c), (r, c + d):
                             same row, d apart
      column_mean   (..., D) mean over the pairs (r, c), (r + d, c):
                             same column, d apart
      row_count     (D,)     grid_h * (grid_w - d) pairs
      column_count  (D,)     grid_w * (grid_h - d) pairs

    Why match the distance: nearer patches are more alike, so "rows are more alike than columns" is only a
    claim about rows and columns if both sides are compared at the same d; a plain mean over "same row" and
    "same column" pairs mixes in whatever distances each happens to have. Only the distances that both a row
    and a column contain are returned (on a non-square grid the longer side's extra distances have no partner).
    The matrix need not be symmetric (attention is not): each unordered pair counts once, with the mean of its
    two directions, (M[i, j] + M[j, i]) / 2. Leading axes (layers, heads, ...) are kept.
    """
    grid_h, grid_w = pair(grid_size)
    patches = grid_h * grid_w
    if not isinstance(pair_values, Tensor) or pair_values.dim() < 2 or pair_values.shape[-2:] != (patches, patches):
        got = tuple(pair_values.shape) if isinstance(pair_values, Tensor) else type(pair_values).__name__
        raise ValueError(
            f"expected (..., patches, patches) with patches = {grid_h}x{grid_w} = {patches}, got {got}. Drop the "
            f"prefix tokens first (maps[..., k:, k:] with k = num_prefix_tokens), and check grid_size."
        )
    grid = pair_values.reshape(*pair_values.shape[:-2], grid_h, grid_w, grid_h, grid_w)  # (..., r, c, r', c')
    distances = range(1, min(grid_h, grid_w))
    row_mean, column_mean, row_count, column_count = [], [], [], []
    rows, cols = torch.arange(grid_h), torch.arange(grid_w)
    for d in distances:
        # same row r, columns c and c + d: M[r, c, r, c + d] and back
        r, c = torch.meshgrid(rows, cols[: grid_w - d], indexing="ij")
        there, back = grid[..., r, c, r, c + d], grid[..., r, c + d, r, c]  # (..., grid_h, grid_w - d)
        row_mean.append(((there + back) / 2).flatten(-2).mean(dim=-1))
        row_count.append(r.numel())
        # same column c, rows r and r + d
        r, c = torch.meshgrid(rows[: grid_h - d], cols, indexing="ij")
        there, back = grid[..., r, c, r + d, c], grid[..., r + d, c, r, c]  # (..., grid_h - d, grid_w)
        column_mean.append(((there + back) / 2).flatten(-2).mean(dim=-1))
        column_count.append(r.numel())
    if not row_mean:
        raise ValueError(f"a {grid_h}x{grid_w} grid has no two patches in a row and a column; need at least 2x2")
    return {
        "distance": torch.tensor(list(distances)),
        "row_mean": torch.stack(row_mean, dim=-1),
        "column_mean": torch.stack(column_mean, dim=-1),
        "row_count": torch.tensor(row_count),
        "column_count": torch.tensor(column_count),
    }


def position_row_column(
    pos_embed: nn.Module | Tensor, grid_size: int | tuple[int, int] | None = None, num_prefix_tokens: int = 0
) -> dict[str, Tensor]:
    """:func:`row_column_similarity` of the cosine similarity of position embeddings.

    model, or pos_embed (1, tokens, dim) / (tokens, dim) with its grid_size -> the dict of
    :func:`row_column_similarity` (row_mean and column_mean of shape (D,)).

    2-D sin-cos embeddings (:func:`vitedu.patching.sincos_pos_embed_2d`) give the row and the column the same
    number of channels and frequencies, so both means are equal at every d: a trained model's difference is
    its own. For attention maps use :func:`attention_row_column`.
    """
    pos, grid = _positions(pos_embed, grid_size, num_prefix_tokens)
    return row_column_similarity(_cosine(pos), grid)


def attention_row_column(
    maps: Tensor, grid_size: int | tuple[int, int], num_prefix_tokens: int = 1
) -> dict[str, Tensor]:
    """:func:`row_column_similarity` of attention: does a head look along rows more than along columns?

    maps (depth, batch, heads, tokens, tokens), as returned by ``model.attention_maps(images)`` -> the dict of
    :func:`row_column_similarity` with row_mean and column_mean of shape (depth, heads, D).

    The prefix tokens ([CLS]) are dropped as queries and as keys, and each query's weights on the patches are
    renormalised to sum to 1 (as in :func:`vitedu.interpret.mean_attention_distance`), then averaged over the
    images. A row_mean above column_mean at the same d means the head gives more weight to a patch d steps
    along its row than to one d steps along its column. Uniform attention gives equal means at every d.
    """
    if not isinstance(maps, Tensor) or maps.dim() != 5 or maps.shape[-1] != maps.shape[-2]:
        got = tuple(maps.shape) if isinstance(maps, Tensor) else type(maps).__name__
        one_layer = isinstance(maps, Tensor) and maps.dim() == 4
        hint = " Stack one layer into a depth axis with maps.unsqueeze(0)." if one_layer else ""
        raise ValueError(
            f"expected attention maps of shape (depth, batch, heads, tokens, tokens), as returned by "
            f"model.attention_maps, got {got}.{hint}"
        )
    grid_h, grid_w = pair(grid_size)
    if maps.shape[-1] != num_prefix_tokens + grid_h * grid_w:
        raise ValueError(
            f"the maps have {maps.shape[-1]} tokens, but a {grid_h}x{grid_w} grid with {num_prefix_tokens} prefix "
            f"token(s) has {num_prefix_tokens + grid_h * grid_w}. Pass the model's patch_embed.grid_size and "
            f"num_prefix_tokens (1 with a [CLS] token, 0 with mean pooling)."
        )
    patches = maps[..., num_prefix_tokens:, num_prefix_tokens:].double()  # (depth, batch, heads, patches, patches)
    patches = patches / patches.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    return row_column_similarity(patches.mean(dim=1), (grid_h, grid_w))  # mean over images: (depth, heads, P, P)


# --- 3. the similarity mosaic on one colour scale ---------------------------------------------------------------


def position_similarity(
    pos_embed: nn.Module | Tensor, grid_size: int | tuple[int, int] | None = None, num_prefix_tokens: int = 0
) -> Tensor:
    """Cosine similarity of every patch's position embedding with every other's, as a mosaic.

    model, or pos_embed (1, tokens, dim) / (tokens, dim) with its grid_size -> (grid_h, grid_w, grid_h, grid_w);
    entry [i, j, k, l] compares patch (i, j) with patch (k, l), so ``similarity[i, j]`` is a (grid_h, grid_w)
    image with a bright spot at (i, j). The same as :func:`vitedu.interpret.pos_embed_similarity`, but it also
    takes a bare tensor (a sin-cos table, an embedding saved from before training). Float64.
    """
    pos, (grid_h, grid_w) = _positions(pos_embed, grid_size, num_prefix_tokens)
    return _cosine(pos).reshape(grid_h, grid_w, grid_h, grid_w)


def shared_limits(*arrays: Tensor, include_self: bool = True, symmetric: bool = False) -> tuple[float, float]:
    """One (vmin, vmax) for several heatmaps, from the data, so equal colours mean equal values.

    any number of tensors or arrays of any shapes -> (vmin, vmax) as floats

    Each panel stretched to its own range makes a 0.9 to 1.0 map look as contrasted as a -1 to 1 one; a fixed
    -1 to 1 range washes out models whose similarities all lie in 0.5 to 1. The honest middle: the smallest and
    largest value over all the panels you put side by side, passed as ``vmin=..., vmax=...`` to every
    ``imshow``, with one colour bar. ``include_self=False`` treats the arrays as similarity mosaics
    (grid_h, grid_w, grid_h, grid_w) and leaves out each patch's similarity with itself, 1 for every model by
    construction; those pixels then sit at (or above) vmax, so say so in the caption. ``symmetric=True``
    returns (-m, m) with m the largest magnitude, for a diverging colour map centred on 0.
    """
    if not arrays:
        raise ValueError("pass at least one array, e.g. shared_limits(sim_a, sim_b)")
    lows, highs = [], []
    for index, array in enumerate(arrays):
        values = torch.as_tensor(array).detach().double()
        if not include_self:
            if values.dim() != 4 or values.shape[:2] != values.shape[2:]:
                raise ValueError(
                    f"include_self=False expects similarity mosaics (grid_h, grid_w, grid_h, grid_w); argument "
                    f"{index} has shape {tuple(values.shape)}"
                )
            patches = values.shape[0] * values.shape[1]
            values = values.reshape(patches, patches)[~torch.eye(patches, dtype=torch.bool)]
        values = values[torch.isfinite(values)]
        if values.numel() == 0:
            raise ValueError(f"argument {index} has no finite values to take limits from")
        lows.append(values.min())
        highs.append(values.max())
    low, high = float(min(lows)), float(max(highs))
    if symmetric:
        m = max(abs(low), abs(high))
        return -m, m
    return low, high


# --- 4. similarity against distance -----------------------------------------------------------------------------


def _average_ranks(values: Tensor) -> Tensor:
    """Ranks 0 .. n-1, ties sharing the mean of their ranks (as scipy.stats.rankdata, minus 1)."""
    ordered, order = values.sort()
    _, inverse, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()  # one past the last rank of each group of ties
    mean_rank = ends - (counts.double() + 1) / 2  # (groups,)
    ranks = torch.empty_like(values, dtype=torch.float64)
    ranks[order] = mean_rank[inverse]
    return ranks


def _pearson(x: Tensor, y: Tensor) -> float:
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x.norm() * y.norm()).clamp_min(1e-300))


def position_distance_correlation(
    pos_embed: nn.Module | Tensor, grid_size: int | tuple[int, int] | None = None, num_prefix_tokens: int = 0
) -> dict[str, float]:
    """How strongly the similarity of two position embeddings falls with the distance between their patches.

    model, or pos_embed (1, tokens, dim) / (tokens, dim) with its grid_size -> a dict of floats

      pearson   the correlation between cosine similarity and Euclidean grid
                distance (in patches)
      spearman  the same on ranks (ties averaged): any monotone fall scores -1,
                not only a straight line
      pairs     the number of pairs used: every unordered pair of distinct
                patches, P (P - 1) / 2

    -1 means "the further apart, the less alike", a map of the grid; 0 means no relation, as for random
    embeddings. The number is a baseline question before it is a finding: fixed 2-D sin-cos embeddings score
    strongly negative before any training, so a learned model's score says something only next to the
    sin-cos start and a random start of the same size.
    """
    pos, (grid_h, grid_w) = _positions(pos_embed, grid_size, num_prefix_tokens)
    patches = grid_h * grid_w
    if patches < 3:
        raise ValueError(f"a correlation needs at least 3 patches (3 pairs), got a {grid_h}x{grid_w} grid")
    rows, cols = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    centres = torch.stack([rows.flatten(), cols.flatten()], dim=-1).double()  # (patches, 2)
    upper = torch.triu_indices(patches, patches, offset=1)  # (2, pairs)
    similarity = _cosine(pos)[upper[0], upper[1]]  # (pairs,)
    distance = torch.cdist(centres, centres)[upper[0], upper[1]]  # (pairs,)
    return {
        "pearson": _pearson(similarity, distance),
        "spearman": _pearson(_average_ranks(similarity), _average_ranks(distance)),
        "pairs": int(upper.shape[1]),
    }


__all__ = [
    "attention_row_column", "block_outputs", "high_norm_tokens", "position_distance_correlation", "position_row_column",
    "position_similarity", "row_column_similarity", "shared_limits", "token_norms",
]
