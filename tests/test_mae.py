"""The masked autoencoder: random masking, the loss on hidden patches, the paper's layout, timm's encoder keys."""

import math

import pytest
import torch
from tools_loader import load_benchmark

from vitedu.mae import MaskedAutoencoder, mae_sincos_pos_embed_2d, random_masking

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
needs_timm = pytest.mark.skipif(timm is None, reason="timm is not installed (pip install --no-deps timm)")

# 32x32 images, 8x8 patches: a 4x4 grid of 16 patches; a 2-block encoder, a 1-block decoder
TINY = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, decoder_embed_dim=32, decoder_depth=1,
            decoder_num_heads=2)


def _tokens(batch: int, patches: int, dim: int = 3) -> torch.Tensor:
    """(batch, patches, dim) with token i of sample b filled with 1000 * b + i: each token says who it is."""
    ids = 1000 * torch.arange(batch)[:, None] + torch.arange(patches)[None, :]
    return ids[..., None].float().expand(batch, patches, dim).clone()


@pytest.mark.parametrize("patches, mask_ratio", [(16, 0.75), (196, 0.75), (10, 0.9), (10, 0.7), (7, 0.5), (16, 0.0)])
def test_masking_keeps_round_n_times_one_minus_ratio(patches, mask_ratio):
    x = _tokens(4, patches)
    x_visible, mask, ids_restore = random_masking(x, mask_ratio)
    kept = round(patches * (1 - mask_ratio))
    assert x_visible.shape == (4, kept, 3) and mask.shape == ids_restore.shape == (4, patches)
    assert (mask.sum(dim=1) == patches - kept).all()  # the same count for every sample
    for b in range(4):  # the visible tokens are exactly those with mask 0 (in shuffled order), each once
        visible_ids = sorted(int(t) - 1000 * b for t in x_visible[b, :, 0])
        assert visible_ids == torch.nonzero(mask[b] == 0).flatten().tolist()


def test_ten_patches_at_ninety_percent_keep_one():
    # The paper's code counts int(10 * (1 - 0.9)) = int(0.999...) = 0 kept patches; rounding keeps 1.
    assert int(10 * (1 - 0.9)) == 0
    assert random_masking(_tokens(2, 10), 0.9)[0].shape[1] == 1


def test_masks_differ_between_samples():
    _, mask, _ = random_masking(_tokens(8, 64), 0.75, generator=torch.Generator().manual_seed(0))
    assert len({tuple(row.tolist()) for row in mask}) == 8  # C(64, 16) subsets: eight different draws


def test_ids_restore_inverts_the_shuffle():
    x = _tokens(3, 16)
    # nothing hidden: the shuffled tokens, gathered with ids_restore, are the original sequence
    shuffled, mask, ids_restore = random_masking(x, 0.0)
    assert not torch.equal(shuffled, x)  # the encoder's tokens come shuffled
    torch.testing.assert_close(torch.gather(shuffled, 1, ids_restore[..., None].expand(-1, -1, 3)), x)
    assert mask.sum() == 0
    # 75 % hidden: visible tokens then placeholders (the decoder's mask tokens), gathered back, land in place
    x_visible, mask, ids_restore = random_masking(x, 0.75)
    placeholders = torch.full((3, 12, 3), -1.0)
    restored = torch.gather(torch.cat([x_visible, placeholders], 1), 1, ids_restore[..., None].expand(-1, -1, 3))
    visible = mask == 0
    torch.testing.assert_close(restored[visible], x[visible])
    assert (restored[~visible] == -1).all() and (mask[~visible] == 1).all()  # mask is 1 on the removed tokens


def test_generator_makes_the_masks_reproducible():
    draw = lambda seed: random_masking(_tokens(2, 16), 0.5, torch.Generator().manual_seed(seed))[1]  # noqa: E731
    assert torch.equal(draw(1), draw(1)) and not torch.equal(draw(1), draw(2))


@pytest.mark.parametrize("mask_ratio", [1.0, -0.1, 1.5, True, "0.75"])
def test_a_bad_mask_ratio_is_explained(mask_ratio):
    with pytest.raises(ValueError, match=r"must be a number in \[0, 1\).*mask_ratio=0.75"):
        random_masking(_tokens(1, 16), mask_ratio)


def test_a_ratio_that_keeps_nothing_is_explained():
    with pytest.raises(ValueError, match=r"keeps round\(4 \* \(1 - 0.9\)\) = 0 of 4 patches.*at most 0.750"):
        random_masking(_tokens(1, 4), 0.9)
    with pytest.raises(ValueError, match=r"\(batch, patches, dim\)"):
        random_masking(torch.zeros(16, 3), 0.5)


def test_encoder_sees_only_the_visible_tokens():
    model = MaskedAutoencoder(**TINY)
    seen = {}
    model.encoder.blocks[0].register_forward_pre_hook(lambda m, args: seen.__setitem__("encoder", args[0].shape))
    model.decoder_blocks[0].register_forward_pre_hook(lambda m, args: seen.__setitem__("decoder", args[0].shape))
    model(torch.rand(2, 3, 32, 32), mask_ratio=0.75)
    assert seen["encoder"] == (2, 1 + 4, 48)  # [CLS] + 4 of 16 patches
    assert seen["decoder"] == (2, 1 + 16, 32)  # [CLS] + every patch (12 of them mask tokens)


def test_with_nothing_masked_the_encoder_path_is_forward_features(device):
    model = MaskedAutoencoder(**TINY).to(device).eval()
    with torch.no_grad():  # any positions, [CLS]'s too (the sin-cos table gives it zeros; a checkpoint may not)
        model.encoder.pos_embed.normal_()
    images = torch.rand(2, 3, 32, 32, device=device)
    latent, mask, ids_restore = model.forward_encoder(images, mask_ratio=0.0)
    patches = torch.gather(latent[:, 1:], 1, ids_restore[..., None].expand(-1, -1, 48))  # back to row-major order
    expected = model.encoder.forward_features(images)  # (batch, 1 + 16, 48)
    torch.testing.assert_close(latent[:, 0], expected[:, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(patches, expected[:, 1:], atol=1e-5, rtol=1e-5)
    loss, pred, mask = model(images, mask_ratio=0.0)
    assert mask.sum() == 0 and loss == 0  # nothing hidden, nothing to reconstruct


def test_mask_tokens_learn_their_place_from_the_decoder_positions():
    # Every hidden patch enters the decoder as the same mask token: only decoder_pos_embed tells them apart.
    model = MaskedAutoencoder(**TINY).eval()
    with torch.no_grad():
        _, pred, mask = model(torch.rand(1, 3, 32, 32))
        hidden = pred[0][mask[0] == 1]  # (12, 192): the predictions for the hidden patches
        assert not torch.allclose(hidden[0], hidden[1])
        model.decoder_pos_embed.zero_()
        _, pred, mask = model(torch.rand(1, 3, 32, 32))
        hidden = pred[0][mask[0] == 1]
        torch.testing.assert_close(hidden, hidden[:1].expand_as(hidden))  # without positions: all the same


def test_decoder_puts_every_token_back_in_its_place():
    model = MaskedAutoencoder(**TINY).eval()
    seen = {}
    model.decoder_blocks[0].register_forward_pre_hook(lambda m, args: seen.__setitem__("x", args[0]))
    with torch.no_grad():
        latent, mask, ids_restore = model.forward_encoder(torch.rand(2, 3, 32, 32))  # the default ratio, 0.75
        assert latent.shape == (2, 1 + 4, 48)
        model.forward_decoder(latent, ids_restore)
        embedded = model.decoder_embed(latent)  # (batch, 1 + kept, 32): [CLS], then the kept patches, shuffled
        for b in range(2):
            torch.testing.assert_close(seen["x"][b, 0], embedded[b, 0] + model.decoder_pos_embed[0, 0])
            for i in range(16):  # patch i was put at place ids_restore[b, i] of the shuffled order
                token = model.mask_token[0, 0] if mask[b, i] == 1 else embedded[b, 1 + ids_restore[b, i]]
                torch.testing.assert_close(seen["x"][b, 1 + i], token + model.decoder_pos_embed[0, 1 + i])


def test_forward_with_a_generator_is_reproducible():
    model = MaskedAutoencoder(**TINY).eval()
    images = torch.rand(2, 3, 32, 32)
    run = lambda seed: model(images, generator=torch.Generator().manual_seed(seed))  # noqa: E731
    (loss1, pred1, mask1), (loss2, pred2, mask2), (_, _, mask3) = run(3), run(3), run(4)
    assert torch.equal(mask1, mask2) and torch.equal(pred1, pred2) and torch.equal(loss1, loss2)
    assert not torch.equal(mask1, mask3)


def test_defaults_are_the_papers_vit_b_with_its_decoder():
    with torch.device("meta"):  # no memory is allocated for the weights
        model = MaskedAutoencoder()
    encoder = 86_567_656 - (768 * 1000 + 1000)  # ViT-B/16 (ViT paper, Table 1, timm) without its 1000-class head
    block = 12 * 512**2 + 13 * 512  # a Transformer block of width 512
    decoder = (768 * 512 + 512) + 512 + 197 * 512 + 8 * block + 2 * 512 + (512 * 16 * 16 * 3 + 16 * 16 * 3)
    assert sum(p.numel() for p in model.encoder.parameters()) == encoder
    assert sum(p.numel() for p in model.parameters()) == encoder + decoder  # 111,907,840
    assert model.img_size == (224, 224) and model.patch_size == 16 and len(model.decoder_blocks) == 8
    assert model.decoder_blocks[0].attn.num_heads == 16 and model.encoder.blocks[0].attn.num_heads == 12


def test_mlp_ratio_and_norm_eps_reach_encoder_and_decoder():
    model = MaskedAutoencoder(**TINY, mlp_ratio=2.0, norm_eps=1e-4)
    assert {b.mlp.fc1.out_features for b in model.encoder.blocks} == {96}
    assert {b.mlp.fc1.out_features for b in model.decoder_blocks} == {64}
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-4}
    assert all(b.attn.qkv.bias is not None for b in [*model.encoder.blocks, *model.decoder_blocks])  # as the paper's


def test_forward_shapes_and_encoder_alone():
    model = MaskedAutoencoder(**TINY)
    loss, pred, mask = model(torch.rand(2, 3, 32, 32))
    assert loss.shape == () and pred.shape == (2, 16, 8 * 8 * 3) and mask.shape == (2, 16)
    assert model.unpatchify(pred).shape == (2, 3, 32, 32)
    assert model.encoder.forward_features(torch.rand(2, 3, 32, 32)).shape == (2, 17, 48)
    assert model.encoder.forward_features(torch.rand(2, 3, 48, 48)).shape == (2, 37, 48)  # positions resample
    gray = MaskedAutoencoder(**TINY | {"in_chans": 1})
    loss, pred, mask = gray(torch.rand(2, 1, 32, 32))
    assert pred.shape == (2, 16, 8 * 8) and gray.encoder.patch_embed.proj.in_channels == 1


def _change_patch(model, images, sample, patch):
    target = model.patchify(images)
    target[sample, patch, 0] += 1.0  # one pixel: a shift of the whole patch would not change a normalised target
    return model.unpatchify(target)


@pytest.mark.parametrize("norm_pix_loss", [False, True])
def test_loss_counts_only_the_masked_patches(norm_pix_loss):
    model = MaskedAutoencoder(**TINY, norm_pix_loss=norm_pix_loss)
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        loss, pred, mask = model(images, generator=torch.Generator().manual_seed(0))
        visible, hidden = int(torch.nonzero(mask[0] == 0)[0]), int(torch.nonzero(mask[0] == 1)[0])
        same = model.forward_loss(_change_patch(model, images, 0, visible), pred, mask)
        changed = model.forward_loss(_change_patch(model, images, 0, hidden), pred, mask)
    torch.testing.assert_close(same, loss)
    assert not torch.isclose(changed, loss)


def test_norm_pix_loss_matches_a_hand_computation():
    # 1 channel, 4x4 images, 2x2 patches: 4 patches of 4 pixels each, in row-major order
    model = MaskedAutoencoder(img_size=4, patch_size=2, in_chans=1, embed_dim=8, depth=1, num_heads=2,
                              decoder_embed_dim=8, decoder_depth=1, decoder_num_heads=2)
    images = torch.rand(2, 1, 4, 4)
    images[1, 0, 2:, 2:] = 0.5  # a flat patch: variance 0, and the 1e-6 keeps its normalised target finite (0)
    pred = torch.randn(2, 4, 4)
    mask = torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 1]])
    plain, normalised = [], []
    for b in range(2):
        for i in range(2):
            for j in range(2):
                if mask[b, 2 * i + j] == 0:
                    continue
                pixels = images[b, 0, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].flatten().tolist()
                mean = sum(pixels) / 4
                var = sum((v - mean) ** 2 for v in pixels) / 3  # unbiased, as the paper's code (torch.var)
                target = [(v - mean) / math.sqrt(var + 1e-6) for v in pixels]
                guess = pred[b, 2 * i + j].tolist()
                plain.append(sum((g - v) ** 2 for g, v in zip(guess, pixels)) / 4)
                normalised.append(sum((g - t) ** 2 for g, t in zip(guess, target)) / 4)
    assert len(plain) == 5
    torch.testing.assert_close(model.forward_loss(images, pred, mask), torch.tensor(sum(plain) / 5))
    model = MaskedAutoencoder(img_size=4, patch_size=2, in_chans=1, embed_dim=8, depth=1, num_heads=2,
                              decoder_embed_dim=8, decoder_depth=1, decoder_num_heads=2, norm_pix_loss=True)
    torch.testing.assert_close(model.forward_loss(images, pred, mask), torch.tensor(sum(normalised) / 5))
    one = torch.tensor([[0.0, 0, 0, 0], [0, 0, 0, 1]])  # a single hidden patch: the loss is its error alone
    torch.testing.assert_close(model.forward_loss(images, pred, one), torch.tensor(normalised[-1]))


def test_gradients_reach_encoder_and_decoder(device):
    model = MaskedAutoencoder(**TINY).to(device)
    loss, _, _ = model(torch.rand(2, 3, 32, 32, device=device), generator=torch.Generator(device).manual_seed(0))
    loss.backward()
    for name, param in model.named_parameters():
        if param.requires_grad:
            assert param.grad is not None and param.grad.abs().sum() > 0, name
    frozen = {name for name, param in model.named_parameters() if not param.requires_grad}
    assert frozen == {"encoder.pos_embed", "decoder_pos_embed"}  # the fixed sin-cos tables


def _mae_code_sincos(embed_dim: int, grid: int) -> torch.Tensor:
    """The paper's code's 2-D sin-cos table, written out: [sin, cos] of the column, then [sin, cos] of the row, at
    frequencies 1 / 10000^(k / (embed_dim / 4)); a zero row first for [CLS]."""
    omega = 1.0 / 10000 ** (torch.arange(embed_dim // 4, dtype=torch.float64) / (embed_dim // 4))
    rows = []
    for r in range(grid):
        for c in range(grid):
            rows.append(torch.cat([(c * omega).sin(), (c * omega).cos(), (r * omega).sin(), (r * omega).cos()]))
    return torch.cat([torch.zeros(1, embed_dim, dtype=torch.float64), torch.stack(rows)]).float()[None]


def test_positions_are_the_paper_codes_sincos_tables():
    torch.testing.assert_close(mae_sincos_pos_embed_2d(48, 4), _mae_code_sincos(48, 4))
    model = MaskedAutoencoder(**TINY)
    torch.testing.assert_close(model.encoder.pos_embed.data, _mae_code_sincos(48, 4))
    torch.testing.assert_close(model.decoder_pos_embed.data, _mae_code_sincos(32, 4))


def _block_shapes(prefix: str, dim: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.norm1.weight": (dim,), f"{prefix}.norm1.bias": (dim,),
        f"{prefix}.attn.qkv.weight": (3 * dim, dim), f"{prefix}.attn.qkv.bias": (3 * dim,),
        f"{prefix}.attn.proj.weight": (dim, dim), f"{prefix}.attn.proj.bias": (dim,),
        f"{prefix}.norm2.weight": (dim,), f"{prefix}.norm2.bias": (dim,),
        f"{prefix}.mlp.fc1.weight": (4 * dim, dim), f"{prefix}.mlp.fc1.bias": (4 * dim,),
        f"{prefix}.mlp.fc2.weight": (dim, 4 * dim), f"{prefix}.mlp.fc2.bias": (dim,),
    }


def _official_layout() -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """The keys and shapes of models_mae.py's MaskedAutoencoderViT for TINY, written out by hand: the encoder's
    (also the layout of the fine-tuning checkpoints, mae_pretrain_vit_*.pth), and the decoder's."""
    d, dd, n = 48, 32, 16
    encoder = {"cls_token": (1, 1, d), "pos_embed": (1, 1 + n, d), "patch_embed.proj.weight": (d, 3, 8, 8),
               "patch_embed.proj.bias": (d,)}
    for i in range(2):
        encoder |= _block_shapes(f"blocks.{i}", d)
    encoder |= {"norm.weight": (d,), "norm.bias": (d,)}
    decoder = {"mask_token": (1, 1, dd), "decoder_pos_embed": (1, 1 + n, dd), "decoder_embed.weight": (dd, d),
               "decoder_embed.bias": (dd,)} | _block_shapes("decoder_blocks.0", dd)
    decoder |= {"decoder_norm.weight": (dd,), "decoder_norm.bias": (dd,), "decoder_pred.weight": (8 * 8 * 3, dd),
                "decoder_pred.bias": (8 * 8 * 3,)}
    return encoder, decoder


def test_an_official_pretraining_checkpoint_loads_strictly():
    encoder_keys, decoder_keys = _official_layout()
    state = {key: torch.randn(shape) for key, shape in (encoder_keys | decoder_keys).items()}
    model = MaskedAutoencoder(**TINY)
    model.load_state_dict(state, strict=True)
    assert torch.equal(model.encoder.blocks[1].attn.qkv.weight, state["blocks.1.attn.qkv.weight"])
    assert torch.equal(model.encoder.cls_token, state["cls_token"])
    assert torch.equal(model.encoder.norm.bias, state["norm.bias"])
    assert torch.equal(model.decoder_blocks[0].mlp.fc2.weight, state["decoder_blocks.0.mlp.fc2.weight"])
    assert torch.equal(model.mask_token, state["mask_token"])
    # and the model saves in that layout: its state_dict is the checkpoint it loaded
    saved = model.state_dict()
    assert {k: tuple(v.shape) for k, v in saved.items()} == encoder_keys | decoder_keys
    assert all(torch.equal(saved[key], state[key]) for key in state)
    # the encoder-only layout of the fine-tuning checkpoints loads into the encoder alone
    model.encoder.load_state_dict({key: state[key] for key in encoder_keys}, strict=True)
    # a key from elsewhere is still refused under strict=True
    with pytest.raises(RuntimeError, match="head.weight"):
        model.load_state_dict(state | {"head.weight": torch.zeros(10, 48)}, strict=True)


@needs_timm
def test_encoder_is_timms_vision_transformer():
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    model = MaskedAutoencoder(**TINY).eval()
    theirs = TimmViT(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=0).eval()
    ours_sd, theirs_sd = model.encoder.state_dict(), theirs.state_dict()
    assert {k: v.shape for k, v in ours_sd.items()} == {k: v.shape for k, v in theirs_sd.items()}
    assert set(ours_sd) == set(_official_layout()[0])
    model.encoder.load_state_dict(theirs_sd, strict=True)
    images = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(model.encoder.forward_features(images), theirs.forward_features(images),
                               atol=1e-5, rtol=1e-5)


def test_wrong_images_are_explained():
    model = MaskedAutoencoder(**TINY)
    with pytest.raises(ValueError, match=r"built for 32x32 images .* got 48x48.*img_size=\(48, 48\)"):
        model(torch.rand(1, 3, 48, 48))
    with pytest.raises(ValueError, match="expects 3 channel"):
        model(torch.rand(1, 1, 32, 32))
    with pytest.raises(ValueError, match="4-D batch"):
        model(torch.rand(3, 32, 32))
    with pytest.raises(ValueError, match=r"pred must have the targets' shape \(1, 16, 192\)"):
        model.forward_loss(torch.rand(1, 3, 32, 32), torch.zeros(1, 16, 64), torch.ones(1, 16))
    with pytest.raises(TypeError, match="square patches"):
        MaskedAutoencoder(**TINY | {"patch_size": (8, 8)})


def test_a_few_steps_on_random_images_reduce_the_loss():
    model = MaskedAutoencoder(img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2, decoder_embed_dim=32,
                              decoder_depth=1, decoder_num_heads=2)
    images = torch.rand(8, 3, 16, 16)
    evaluate = lambda: model(images, generator=torch.Generator().manual_seed(0))[0].item()  # noqa: E731
    before = evaluate()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(10):
        loss, _, _ = model(images, generator=torch.Generator().manual_seed(step + 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert evaluate() < 0.5 * before


def test_initialisation_is_the_paper_codes():
    model = MaskedAutoencoder(**TINY)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 2 * 4 + 4 * 1 + 2  # 4 per encoder block, 4 per decoder block, decoder_embed, decoder_pred
    proj = model.encoder.patch_embed.proj.weight.flatten(1)  # initialised as the Linear layer it is
    for weight in [m.weight for m in linears] + [proj]:
        fan_out, fan_in = weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))  # Xavier-uniform: U(-bound, bound)
        assert weight.abs().max() <= bound and weight.abs().max() > 0.9 * bound
    assert all((m.bias == 0).all() for m in linears)
    for token in (model.encoder.cls_token, model.mask_token):  # N(0, 0.02^2)
        assert 0.01 < token.std() < 0.03
