"""The switches that take one idea out of CaiT or ConViT (chapter 9's ablations): each removes exactly
its idea, and the defaults build the paper's model unchanged (the timm-exact tests check the numerics)."""

import torch

from vitedu import create_model
from vitedu.attention import MultiHeadSelfAttention
from vitedu.cait import ClassAttentionBlock, TalkingHeadAttention


def _keys(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_cait_defaults_have_talking_heads_layerscale_and_class_attention():
    model = create_model("cait_cluttered_digits")
    assert all(type(b.attn) is TalkingHeadAttention for b in model.blocks)
    assert all(isinstance(b, ClassAttentionBlock) for b in model.blocks_token_only)
    assert "blocks.0.gamma_1" in _keys(model) and model.class_attention


def test_cait_without_talking_heads_loses_only_the_head_mixing():
    base, ablated = create_model("cait_cluttered_digits"), create_model("cait_cluttered_digits", talking_heads=False)
    assert all(type(b.attn) is MultiHeadSelfAttention for b in ablated.blocks)
    removed = set(_keys(base)) - set(_keys(ablated))
    assert removed and all(".proj_l." in k or ".proj_w." in k for k in removed)
    assert set(_keys(ablated)) <= set(_keys(base))


def test_cait_without_layerscale_loses_only_the_gammas():
    base, ablated = create_model("cait_cluttered_digits"), create_model("cait_cluttered_digits", layer_scale=False)
    removed = set(_keys(base)) - set(_keys(ablated))
    assert removed and all(k.endswith(("gamma_1", "gamma_2")) for k in removed)
    assert set(_keys(ablated)) <= set(_keys(base))
    ablated.load_state_dict(ablated.state_dict())  # the timm-name hooks cope with blocks without LayerScale


def test_cait_without_class_attention_lets_cls_join_ordinary_self_attention():
    torch.manual_seed(0)
    base = create_model("cait_cluttered_digits").eval()
    ablated = create_model("cait_cluttered_digits", class_attention=False).eval()
    assert sum(p.numel() for p in base.parameters()) == sum(p.numel() for p in ablated.parameters())
    last = ablated.blocks_token_only[0]
    assert type(last.attn) is MultiHeadSelfAttention  # no talking heads there, as in class attention
    x = torch.randn(2, 1, 32, 32)
    maps = ablated.attention_maps(x)  # (layers, batch, heads, 1 + patches, 1 + patches)
    assert maps[-1][:, :, 1:].abs().sum() > 0  # the patches query in the last layer too
    assert base.attention_maps(x)[-1][:, :, 1:].abs().sum() == 0  # in class attention only [CLS] asks
    # everything before the last stage is the same module, with the same keys
    shared = {k for k in _keys(base) if not k.startswith("blocks_token_only")}
    assert shared == {k for k in _keys(ablated) if not k.startswith("blocks_token_only")}


def test_convit_defaults_start_local_with_learned_gates():
    model = create_model("convit_cluttered_digits")
    attn = model.blocks[0].attn
    assert torch.equal(attn.v.weight, torch.eye(attn.v.weight.shape[0])) and attn.gating_param.requires_grad
    assert torch.allclose(model.gates(), torch.sigmoid(torch.tensor(1.0)).expand(2, 4))


def test_convit_content_only_gates_use_content_attention_alone_and_never_train():
    torch.manual_seed(0)
    model = create_model("convit_cluttered_digits", content_only=True)
    attn = model.blocks[0].attn
    assert not attn.gating_param.requires_grad and torch.equal(model.gates(), torch.zeros(2, 4))
    tokens = torch.randn(2, 64, 64)  # (batch, patches, dim)
    q, k, v = attn.project(tokens)
    _, weights = attn.attend(q, k, v)
    content = ((q @ k.transpose(-2, -1)) * attn.scale).softmax(-1)
    assert torch.allclose(weights, content)
    model.train()(torch.randn(2, 1, 32, 32)).sum().backward()
    assert attn.gating_param.grad is None and attn.pos_proj.weight.grad is None  # position plays no part
    assert torch.equal(attn.v.weight.detach(), torch.eye(64))  # the rest of the start is the parent's
    assert _keys(model) == _keys(create_model("convit_cluttered_digits"))


def test_convit_without_locality_init_starts_from_timms_random_weights():
    torch.manual_seed(0)
    model = create_model("convit_cluttered_digits", locality_init=False)
    attn = model.blocks[0].attn
    assert not torch.equal(attn.v.weight, torch.eye(64))
    local = create_model("convit_cluttered_digits").blocks[0].attn.pos_proj.weight
    assert not torch.allclose(attn.pos_proj.weight, local) and attn.gating_param.requires_grad
    assert _keys(model) == _keys(create_model("convit_cluttered_digits"))
