"""Checkpoint loading against Hugging Face ``transformers`` and timm, and the safety of loading."""

import json
import os
import socket

import pytest
import torch
from safetensors.torch import save_file
from tools_loader import load_benchmark

import vitedu
from vitedu.pretrained import from_pretrained

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency")
HF_CONFIG = dict(
    image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
    intermediate_size=96, num_labels=5, hidden_act="gelu", layer_norm_eps=1e-12,
)


@pytest.fixture(scope="module")
def hf_model():
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(transformers.ViTConfig(**HF_CONFIG)).eval()
    with torch.no_grad():  # HF initialises LayerNorms to (1, 0) and [CLS] to zero: randomise everything
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _hf_logits(model, images):
    with torch.no_grad():
        return model(pixel_values=images).logits


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_hugging_face_round_trip_gives_identical_logits(hf_model, tmp_path, weights):
    hf_model.save_pretrained(tmp_path)
    if weights == "bin":  # the older checkpoint format: a pickled state_dict
        from safetensors.torch import load_file

        torch.save(load_file(tmp_path / "model.safetensors"), tmp_path / "pytorch_model.bin")
        os.remove(tmp_path / "model.safetensors")
    ours = from_pretrained(tmp_path)
    images = torch.randn(4, 3, 32, 32)
    diff = (ours(images) - _hf_logits(hf_model, images)).abs().max().item()
    assert diff <= 1e-4, f"max abs logit difference {diff:.2e}"
    assert ours.blocks[0].norm1.eps == 1e-12  # HF's layer_norm_eps is carried over
    assert ours.class_names == [f"LABEL_{i}" for i in range(5)]
    assert not ours.training


def test_hugging_face_attention_weights_match(hf_model, tmp_path):
    hf_model.save_pretrained(tmp_path)
    ours = from_pretrained(tmp_path)
    images = torch.randn(2, 3, 32, 32)
    hf_model.config._attn_implementation = "eager"  # the implementation that can return weights
    with torch.no_grad():
        expected = torch.stack(hf_model(pixel_values=images, output_attentions=True).attentions)
    torch.testing.assert_close(ours.attention_maps(images), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_timm_state_dict_file(tmp_path, suffix):
    timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
    if timm is None:
        pytest.skip("timm is not installed")
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    theirs = TimmViT(img_size=32, patch_size=8, embed_dim=384, depth=2, num_heads=6, num_classes=7).eval()
    path = tmp_path / f"vit{suffix}"
    if suffix == ".safetensors":
        save_file(theirs.state_dict(), path)
    else:
        torch.save({"model": theirs.state_dict(), "epoch": 3}, path)  # a training-script checkpoint
    with pytest.warns(UserWarning, match=r"assumed num_heads=6 \(timm's usual count for width 384\)"):
        ours = from_pretrained(path)
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(ours(images), theirs(images), atol=1e-5, rtol=1e-5)


def test_mismatched_checkpoint_names_every_problem(tmp_path):
    model = vitedu.VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)
    state = model.state_dict()
    state.pop("norm.weight")
    state["head.weight"] = torch.zeros(7, 48)
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(ValueError) as err:
        vitedu.state_dicts.load_checked(model, state)
    message = str(err.value)
    assert "missing from checkpoint: ['norm.weight']" in message
    assert "unexpected in checkpoint: ['extra.weight']" in message
    assert "head.weight: checkpoint (7, 48) vs model (5, 48)" in message


TINY = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)


def _tiny(**kwargs):
    return vitedu.VisionTransformer(**{**TINY, **kwargs})


def test_mismatch_without_a_source_names_the_checkpoint_and_only_its_problems():
    """No source: "the checkpoint" (not "None"); no missing/unexpected line when nothing is missing or unexpected;
    the last line says how to fix it."""
    state = {**_tiny().state_dict(), "head.weight": torch.zeros(7, 48)}
    with pytest.raises(ValueError) as err:
        vitedu.state_dicts.load_checked(_tiny(), state)
    lines = str(err.value).splitlines()
    assert lines[0] == "the model does not match the checkpoint:"
    assert lines[1:-1] == ["  shape mismatch: head.weight: checkpoint (7, 48) vs model (5, 48)"]
    assert lines[-1].startswith("Build the model with the checkpoint's configuration (patch size, width, depth")


def test_mismatch_lists_at_most_eight_shapes():
    """A checkpoint of another width mismatches every tensor: the first 8 are enough to see what is wrong."""
    with pytest.raises(ValueError, match=r"^the model does not match weights\.pth:") as err:
        vitedu.state_dicts.load_checked(_tiny(), _tiny(embed_dim=24).state_dict(), "weights.pth")
    assert str(err.value).count("shape mismatch") == 8 < len(_tiny().state_dict())


def test_vit_specific_reasons_are_given_for_a_plain_vit_only():
    """BEiT's q_bias is something vitedu's ViT lacks; for a DeiT-distilled model the mismatch is named, but the
    ViT's reason is not claimed."""
    from vitedu.deit import VisionTransformerDistilled

    reason = "which vitedu's ViT does not implement"
    for model, hinted in ((_tiny(), True), (VisionTransformerDistilled(**TINY), False)):
        state = {**model.state_dict(), "blocks.0.attn.q_bias": torch.zeros(48)}
        with pytest.raises(ValueError, match=r"unexpected in checkpoint: \['blocks.N.attn.q_bias'\]") as err:
            vitedu.state_dicts.load_checked(model, state)
        assert (reason in str(err.value)) is hinted and ("'q_bias'/'v_bias' are BEiT-style" in str(err.value)) is hinted


def test_hugging_face_config_with_other_activation_is_refused(hf_model, tmp_path):
    hf_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="exact GELU"):
        from_pretrained(tmp_path)


class _Exploit:  # a pickle that would run code when unpickled by an unsafe loader
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_loading_never_runs_pickled_code(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    torch.save({"patch_embed.proj.weight": _Exploit(str(marker))}, path)  # a real torch checkpoint file
    with pytest.raises(ValueError, match=r"holds Python objects besides tensors \(e.g. io.open\)"):
        from_pretrained(path)
    assert not marker.exists()


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        from_pretrained(tmp_path / "missing")


def _hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.network
def test_google_vit_base_from_the_hub():
    if not _hub_reachable():
        pytest.skip("the Hugging Face hub (huggingface.co:443) is unreachable from this machine")
    from matplotlib import cbook
    from PIL import Image

    ours = from_pretrained("google/vit-base-patch16-224")
    theirs = transformers.ViTForImageClassification.from_pretrained("google/vit-base-patch16-224").eval()
    with cbook.get_sample_data("grace_hopper.jpg") as f:
        photo = Image.open(f).convert("RGB").resize((224, 224), Image.BILINEAR)
    pixels = torch.tensor(list(photo.getdata()), dtype=torch.float32).reshape(1, 224, 224, 3) / 255
    images = (pixels.permute(0, 3, 1, 2) - 0.5) / 0.5
    ours_logits = ours(images)
    diff = (ours_logits - _hf_logits(theirs, images)).abs().max().item()
    assert diff <= 1e-4, f"max abs logit difference {diff:.2e}"
    assert ours.class_names[ours_logits.argmax().item()] == theirs.config.id2label[ours_logits.argmax().item()]


def test_in_memory_transformers_state_dict_converts(hf_model):
    """transformers >= 5 names parameters differently in memory (q_proj, o_proj, mlp.fc1) than on disk."""
    ours = vitedu.VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5,
                                    mlp_ratio=2.0, norm_eps=1e-12).eval()
    vitedu.state_dicts.load_checked(ours, vitedu.hf_configs.convert_hf_state_dict(hf_model.state_dict()))
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(ours(images), _hf_logits(hf_model, images), atol=1e-5, rtol=1e-5)
