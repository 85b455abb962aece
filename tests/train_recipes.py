"""The tiny training recipes shared by the tests of vitedu.train, vitedu.checkpoints and vitedu.data.make_loaders,
and of the MAE tools: runs of about a second on the CPU."""

from __future__ import annotations

from dataclasses import replace

from vitedu.config import PRESETS

# A tiny, quick recipe: 2 epochs of the digits with a small model.
TINY = replace(PRESETS["digits"], model="vit_digits_patch2_8", model_kwargs={"embed_dim": 32, "depth": 1},
               epochs=2, batch_size=128, warmup_epochs=0.5, teacher_epochs=0, distill_alpha=0.0)
# A digits run of one batch per epoch (126 training images): fast enough to run fit several times in a test.
SMALL = replace(TINY, train_fraction=0.1, augment="none")


# vitedu.mae_pretrain.MAEConfig fields for an MAE of 16 wide, one block: 2 epochs of 64 canvases.
MAE_TINY = dict(epochs=2, batch_size=32, canvases_per_epoch=64, base_lr=0.08, warmup_epochs=0.5,
                encoder=dict(embed_dim=16, depth=1, num_heads=2, mlp_ratio=2.0),
                decoder=dict(decoder_embed_dim=8, decoder_depth=1, decoder_num_heads=2))


def quiet(_: str) -> None:
    pass
