"""The masked autoencoder (He et al., 2022, "Masked Autoencoders Are Scalable Vision Learners").

    image -> patches + positions -> hide 75 % at random
          -> ViT encoder on the visible 25 % only
          -> light decoder: visible tokens + one shared [MASK] token per
             hidden patch, its own positions
          -> a prediction of every patch's pixels
          -> mean squared error on the *hidden* patches only

Nothing is labelled: the image is its own target. The encoder never sees a mask token, so it processes a quarter
of the tokens (a quarter of the cost of its linear layers, a sixteenth of attention's), and what it learns is what
fine-tuning and ``forward_features`` use; the decoder is thrown away after pre-training.

The encoder *is* vitedu's ``VisionTransformer`` (``num_classes=0``, fixed 2-D sin-cos positions): its state_dict
has timm's keys and shapes, the layout of the official MAE encoder checkpoints (``mae_pretrain_vit_base.pth``), and
``model.encoder.forward_features(images)`` -> (batch, tokens, dim) is the encoder alone on whole images. The decoder
parts carry the names of the paper's code (facebookresearch/mae, ``models_mae.py``): ``decoder_embed``,
``mask_token``, ``decoder_pos_embed``, ``decoder_blocks``, ``decoder_norm``, ``decoder_pred``. The code keeps the
encoder's parameters at the top level (``cls_token``, ``blocks.0...``); vitedu keeps them in ``encoder`` so the
encoder can be used alone, and translates on ``state_dict`` / ``load_state_dict`` (see ``MaskedAutoencoder``).
"""

from __future__ import annotations

import torch
from einops import repeat
from torch import Tensor, nn

from .blocks import Block
from .patching import check_images, pair, patchify, sincos_pos_embed_2d, unpatchify
from .vit import VisionTransformer


def random_masking(
    x: Tensor, mask_ratio: float, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Hide a random ``mask_ratio`` of each sample's tokens, a different subset per sample.

    x: (batch, patches, dim) -> x_visible (batch, kept, dim), mask (batch, patches), ids_restore (batch, patches)

    kept = round(patches * (1 - mask_ratio)). Step by step, for one sample of 4 tokens [t0 t1 t2 t3], ratio 0.5:

    1. noise = [0.7, 0.1, 0.9, 0.4]: one uniform number per token.
    2. ids_shuffle = argsort(noise) = [1, 3, 0, 2]: the tokens in the order of their noise, a random permutation.
    3. Keep the first ``kept`` of that order: ids_keep = [1, 3], x_visible = [t1 t3]. Sorting random noise and
       taking a prefix draws ``kept`` tokens without replacement, each subset equally likely; a batch of noise
       rows gives every sample its own subset in one tensor operation, and every sample keeps the same count, so
       the batch stays one rectangular tensor.
    4. ids_restore = argsort(ids_shuffle) = [2, 0, 3, 1]: the inverse permutation. Position i of the original
       order is found at ids_restore[i] in the shuffled order (t0 was put 3rd, index 2). The decoder appends its
       mask tokens to the visible ones (shuffled order) and gathers with ids_restore to put each back in place.
    5. mask = [0, 0, 1, 1] in shuffled order, gathered with ids_restore -> [1, 0, 1, 0] in the original order:
       1 where the token was removed, 0 where it is visible, the weights of the loss.

    The paper's code counts kept = int(patches * (1 - mask_ratio)); rounding gives the same 49 of 196 at 0.75 but
    does not lose a token to floating point (int(10 * (1 - 0.9)) is 0). ``generator`` (a ``torch.Generator`` on the
    device of ``x``) makes the draw reproducible.
    """
    if isinstance(mask_ratio, bool) or not isinstance(mask_ratio, (int, float)) or not 0.0 <= mask_ratio < 1.0:
        raise ValueError(
            f"mask_ratio is the fraction of patches hidden from the encoder, so it must be a number in [0, 1); got "
            f"{mask_ratio!r}. The paper hides 75 % (mask_ratio=0.75); 1 would leave the encoder nothing to see."
        )
    if x.dim() != 3:
        raise ValueError(f"random_masking expects tokens of shape (batch, patches, dim), got {tuple(x.shape)}")
    batch, patches, dim = x.shape
    kept = round(patches * (1 - mask_ratio))
    if kept == 0:
        raise ValueError(
            f"mask_ratio={mask_ratio} keeps round({patches} * (1 - {mask_ratio})) = 0 of {patches} patches: the "
            f"encoder would see no patch at all. Lower mask_ratio (at most {(patches - 1) / patches:.3f} keeps one)."
        )
    noise = torch.rand(batch, patches, generator=generator, device=x.device)  # (batch, patches)
    ids_shuffle = torch.argsort(noise, dim=1)  # (batch, patches): small noise first, kept
    ids_restore = torch.argsort(ids_shuffle, dim=1)  # (batch, patches): the inverse permutation
    ids_keep = ids_shuffle[:, :kept]  # (batch, kept)
    x_visible = torch.gather(x, 1, repeat(ids_keep, "b n -> b n d", d=dim))  # (batch, kept, dim)
    mask = x.new_ones(batch, patches)  # (batch, patches) in shuffled order: the first `kept` are visible
    mask[:, :kept] = 0
    mask = torch.gather(mask, 1, ids_restore)  # (batch, patches) in the original order, 1 = removed
    return x_visible, mask, ids_restore


def mae_sincos_pos_embed_2d(embed_dim: int, grid_size: int | tuple[int, int], num_prefix_tokens: int = 1) -> Tensor:
    """The fixed 2-D sin-cos positions of the paper's code: the column half of the channels first, then the row half.

    -> (1, num_prefix_tokens + grid_h * grid_w, embed_dim), zeros for the prefix ([CLS]) rows

    The same frequencies as ``vitedu.patching.sincos_pos_embed_2d``, whose layout puts the row half first; the
    two halves are swapped so that a model built here starts with the very tables the official checkpoints store.
    """
    pos = sincos_pos_embed_2d(embed_dim, grid_size, num_prefix_tokens=num_prefix_tokens)  # rows, then columns
    half = embed_dim // 2
    return torch.cat([pos[..., half:], pos[..., :half]], dim=-1)  # columns, then rows


class MaskedAutoencoder(nn.Module):
    """MAE pre-training: a ViT encoder on the visible patches, a light Transformer decoder that predicts the pixels.

    images: (batch, in_chans, height, width)
    -> loss (), pred (batch, patches, patch_size * patch_size * in_chans), mask (batch, patches): 1 where hidden

    The defaults are the paper's ViT-B/16 with its 512-wide, 8-block decoder. ``norm_pix_loss=True`` predicts every
    patch normalised by its own mean and standard deviation (the paper's better-representations option: the
    target is local contrast, not absolute brightness). ``encoder`` is the ViT alone (``forward_features`` on whole
    images, at any size its positions resample to); the masked forward needs the ``img_size`` it was built for.

    ``state_dict()`` has the paper's code's layout: the encoder's keys at the top level (``cls_token``,
    ``pos_embed``, ``patch_embed.proj.weight``, ``blocks.0.attn.qkv.weight``, ``norm.weight``) beside the decoder's;
    ``load_state_dict`` takes that layout (an official pre-training checkpoint) and the ``encoder.``-prefixed one.
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        decoder_embed_dim: int = 512,
        decoder_depth: int = 8,
        decoder_num_heads: int = 16,
        mlp_ratio: float = 4.0,
        norm_pix_loss: bool = False,
        norm_eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if not isinstance(patch_size, int):
            raise TypeError(f"MAE predicts square patches: patch_size must be an int, got {patch_size!r}")
        self.patch_size = patch_size
        self.img_size = pair(img_size)
        self.norm_pix_loss = norm_pix_loss
        self.encoder = VisionTransformer(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, num_classes=0, embed_dim=embed_dim,
            depth=depth, num_heads=num_heads, mlp_ratio=mlp_ratio, norm_eps=norm_eps, pos_embed="sincos",
        )
        grid = self.encoder.patch_embed.grid_size
        self.decoder_embed = nn.Linear(embed_dim, decoder_embed_dim)  # the encoder's width -> the decoder's
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_embed_dim))  # one learned vector per hidden patch
        self.decoder_pos_embed = nn.Parameter(mae_sincos_pos_embed_2d(decoder_embed_dim, grid), requires_grad=False)
        self.decoder_blocks = nn.ModuleList(
            Block(decoder_embed_dim, decoder_num_heads, mlp_ratio=mlp_ratio, norm_eps=norm_eps)
            for _ in range(decoder_depth)
        )
        self.decoder_norm = nn.LayerNorm(decoder_embed_dim, eps=norm_eps)
        self.decoder_pred = nn.Linear(decoder_embed_dim, patch_size**2 * in_chans)  # a token -> its patch's pixels
        self.initialize_weights()
        self._encoder_names = {key.split(".")[0] for key in self.encoder.state_dict()}  # cls_token, blocks, ...
        self.register_state_dict_post_hook(_flatten_encoder_keys)
        self.register_load_state_dict_pre_hook(_nest_encoder_keys)

    def initialize_weights(self) -> None:
        """The paper's code's initialisation: MAE's sin-cos tables, Xavier-uniform Linear weights (the patch
        embedding too, as the Linear layer it is), zero biases, [CLS] and [MASK] from N(0, 0.02^2)."""
        grid = self.encoder.patch_embed.grid_size
        self.encoder.pos_embed.data.copy_(mae_sincos_pos_embed_2d(self.encoder.embed_dim, grid))
        proj = self.encoder.patch_embed.proj.weight  # (embed_dim, in_chans, patch, patch)
        nn.init.xavier_uniform_(proj.data.view(proj.shape[0], -1))
        nn.init.normal_(self.encoder.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def patchify(self, images: Tensor) -> Tensor:
        """The pixel targets, patch by patch.

        (batch, in_chans, height, width) -> (batch, patches, patch_size * patch_size * in_chans)
        """
        return patchify(images, self.patch_size)

    def unpatchify(self, patches: Tensor) -> Tensor:
        """Patches back to images, e.g. to show ``pred``.

        (batch, patches, patch_size * patch_size * in_chans) -> (batch, in_chans, height, width)
        """
        return unpatchify(patches, self.patch_size, self.img_size)

    def _check_images(self, images: Tensor) -> None:
        check_images(images, self.patch_size)  # a 4-D batch; the channels are patch_embed's to check
        (h, w), (_, _, H, W) = self.img_size, images.shape
        if (H, W) != (h, w):
            raise ValueError(
                f"this MaskedAutoencoder was built for {h}x{w} images (its fixed position tables cover a "
                f"{h // self.patch_size}x{w // self.patch_size} patch grid), got {H}x{W}. Resize the images to "
                f"{h}x{w}, or build MaskedAutoencoder(img_size=({H}, {W}), ...). The encoder alone "
                f"(model.encoder.forward_features) accepts other sizes: it resamples its positions."
            )

    def forward_encoder(
        self, images: Tensor, mask_ratio: float = 0.75, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The encoder on the visible patches only, with the encoder's own modules.

        images: (batch, in_chans, height, width)
        -> latent (batch, 1 + kept, embed_dim), mask (batch, patches), ids_restore (batch, patches)

        ``latent`` has [CLS] first and comes after the encoder's final norm; ``mask`` and ``ids_restore`` are
        those of ``random_masking``.
        """
        self._check_images(images)
        encoder = self.encoder
        x = encoder.patch_embed(images)  # (batch, patches, embed_dim)
        x = x + encoder.pos_embed[:, 1:]  # positions *before* masking: a kept token still knows where it was
        x, mask, ids_restore = random_masking(x, mask_ratio, generator)  # (batch, kept, embed_dim)
        cls = encoder.cls_token + encoder.pos_embed[:, :1]  # (1, 1, embed_dim)
        x = encoder.pos_drop(torch.cat([cls.expand(x.shape[0], 1, -1), x], dim=1))  # (batch, 1 + kept, embed_dim)
        for block in encoder.blocks:
            x, _ = block(x)
        return encoder.norm(x), mask, ids_restore

    def forward_decoder(self, latent: Tensor, ids_restore: Tensor) -> Tensor:
        """Mask tokens fill the hidden places; the decoder predicts every patch's pixels.

        latent: (batch, 1 + kept, embed_dim), ids_restore: (batch, patches)
        -> pred (batch, patches, patch_size * patch_size * in_chans)
        """
        x = self.decoder_embed(latent)  # (batch, 1 + kept, decoder_dim)
        batch, patches = ids_restore.shape
        hidden = patches - (x.shape[1] - 1)
        x_patches = torch.cat([x[:, 1:], self.mask_token.expand(batch, hidden, -1)], dim=1)  # shuffled order
        x_patches = torch.gather(x_patches, 1, repeat(ids_restore, "b n -> b n d", d=x.shape[2]))  # original order
        x = torch.cat([x[:, :1], x_patches], dim=1) + self.decoder_pos_embed  # (batch, 1 + patches, decoder_dim)
        for block in self.decoder_blocks:
            x, _ = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]  # (batch, patches, patch_size**2 * in_chans), no [CLS]

    def forward_loss(self, images: Tensor, pred: Tensor, mask: Tensor) -> Tensor:
        """Mean squared error per patch, averaged over the removed patches only (mask == 1).

        images: (batch, in_chans, height, width), pred: (batch, patches, patch_size * patch_size * in_chans)
        mask: (batch, patches) -> loss ()

        A visible patch costs nothing: copying it back would be no task. With ``norm_pix_loss`` each target patch
        is first normalised by its own mean and (unbiased, as the paper's code) variance:
        (patch - mean) / sqrt(var + 1e-6). Nothing masked gives 0: nothing to reconstruct.
        """
        target = self.patchify(images)  # (batch, patches, patch_size * patch_size * in_chans)
        if pred.shape != target.shape or mask.shape != target.shape[:2]:
            raise ValueError(
                f"pred must have the targets' shape {tuple(target.shape)} and mask {tuple(target.shape[:2])} "
                f"(batch, patches); got pred {tuple(pred.shape)} and mask {tuple(mask.shape)}"
            )
        if self.norm_pix_loss:
            mean = target.mean(dim=-1, keepdim=True)  # (batch, patches, 1)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** 0.5
        loss = ((pred - target) ** 2).mean(dim=-1)  # (batch, patches): one error per patch
        return (loss * mask).sum() / mask.sum().clamp(min=1)

    def forward(
        self, images: Tensor, mask_ratio: float = 0.75, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Encode the visible patches, decode every patch, score the hidden ones.

        images: (batch, in_chans, height, width)
        -> loss (), pred (batch, patches, patch_size * patch_size * in_chans), mask (batch, patches)

        ``generator`` makes the random masks reproducible.
        """
        latent, mask, ids_restore = self.forward_encoder(images, mask_ratio, generator)
        pred = self.forward_decoder(latent, ids_restore)
        return self.forward_loss(images, pred, mask), pred, mask


def _flatten_encoder_keys(module: MaskedAutoencoder, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    """state_dict hook: "encoder.blocks.0..." -> "blocks.0...", the layout of the paper's code (order kept)."""
    nested = prefix + "encoder."
    items = list(state_dict.items())
    state_dict.clear()
    for key, value in items:
        state_dict[prefix + key[len(nested):] if key.startswith(nested) else key] = value


def _nest_encoder_keys(module: MaskedAutoencoder, state_dict: dict, prefix: str, *args) -> None:
    """load_state_dict hook: an encoder key at the top level ("blocks.0...", "cls_token") -> "encoder.blocks.0..."."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        if key[len(prefix):].split(".")[0] in module._encoder_names:
            state_dict[prefix + "encoder." + key[len(prefix):]] = state_dict.pop(key)
