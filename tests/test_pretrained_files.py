"""from_pretrained on the files users actually have: broken files, local paths vs hub ids, training-script
wrappers, a Hugging Face weights file passed directly, odd MLP widths; the resolution caveat; the API page's table."""

import json
import pathlib
import sys
import time
import warnings

import pytest
import torch
from safetensors.torch import save_file
from tools_loader import load_tool

import vitedu
from vitedu import hf_configs, pretrained, state_dicts
from vitedu.hf_configs import exact_mlp_ratio
from vitedu.pretrained import from_pretrained

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency")
SMALL = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)
HF = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
          intermediate_size=96, num_labels=5)
IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


@pytest.fixture
def vit():
    return vitedu.VisionTransformer(**SMALL).eval()


def _load_quietly(path, **kwargs):
    with pytest.warns(UserWarning, match="bare state_dict"):  # width 48 records no heads: passed explicitly
        return from_pretrained(path, num_heads=3, **kwargs)


def _hf_dir(tmp_path, **config):
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(transformers.ViTConfig(**config)).eval()
    model.save_pretrained(tmp_path)
    return model


# ---- broken files: one ValueError naming the file ----

def _zero(path):
    path.write_bytes(b"")


def _truncated(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _corrupt(path):
    path.write_bytes(bytes(range(256)) * 8)


@pytest.mark.parametrize("damage", [_zero, _truncated, _corrupt], ids=["zero-byte", "truncated", "corrupt"])
@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_broken_weights_file(tmp_path, vit, damage, suffix):
    path = tmp_path / f"vit{suffix}"
    save_file(vit.state_dict(), path) if suffix == ".safetensors" else torch.save(vit.state_dict(), path)
    damage(path)
    with pytest.raises(ValueError, match="empty|truncated or corrupt") as err:
        from_pretrained(path, num_heads=3)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("content", [b"", b'{"architecture": "vit_', b"[1, 2]", b"\xff\xfe\x00garbage"],
                         ids=["zero-byte", "truncated", "not-an-object", "binary"])
def test_broken_config_json(tmp_path, content):
    _hf_dir(tmp_path, **HF)
    config = tmp_path / "config.json"
    config.write_bytes(content)
    with pytest.raises(ValueError, match="JSON") as err:
        from_pretrained(tmp_path)
    assert str(config) in str(err.value)


def test_pickled_file_that_is_not_a_state_dict(tmp_path):
    path = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(ValueError, match="holds a list, not a dict of tensors"):
        from_pretrained(path)


# ---- local paths are never sent to the hub ----

@pytest.mark.parametrize("name", ["runs/vit.pth", "vit.safetensors", "./runs/vit", "runs/a/b", "~/nope/x.pth", "./vit",
                                  ".hidden/vit", "owner\\x/vit", pathlib.Path("owner/vit"), "runs/"])
def test_missing_local_path_fails_at_once(monkeypatch, tmp_path, name):
    def no_hub(hub_id):
        raise AssertionError(f"the hub was asked for {hub_id!r}")

    monkeypatch.setattr(pretrained, "_download", no_hub)
    monkeypatch.chdir(tmp_path)  # missing wherever the tests run: a checkout that trained something has runs/
    start = time.perf_counter()
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        from_pretrained(name)
    assert time.perf_counter() - start < 1.0


def test_missing_path_object_and_existing_parent(monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "_download", lambda hub_id: pytest.fail("the hub was asked"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        from_pretrained(tmp_path / "missing")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(FileNotFoundError, match="no such file"):  # 'runs/vit' has the form of a hub id
        from_pretrained("runs/vit")


@pytest.mark.parametrize("hub_id", ["google/vit-base-patch16-224", "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"])
def test_hub_ids_go_to_the_hub(monkeypatch, hub_id):
    asked = []

    def fake_download(name):
        asked.append(name)
        raise OSError("offline")

    monkeypatch.setattr(pretrained, "_download", fake_download)
    with pytest.raises(OSError, match="offline"):
        from_pretrained(hub_id)
    assert asked == [hub_id]


# ---- training-script wrappers and prefixes ----

@pytest.mark.parametrize("wrap", [
    lambda s: {"state_dict": s, "epoch": 3, "optimizer": {"lr": 0.1}},
    lambda s: {"model": s, "args": {"lr": 0.1}},
    lambda s: {"model_ema": s},
    lambda s: {f"module.{k}": v for k, v in s.items()},
    lambda s: {"model": {f"module.{k}": v for k, v in s.items()}},
    lambda s: {f"_orig_mod.{k}": v for k, v in s.items()},
], ids=["state_dict", "model", "model_ema", "ddp-prefix", "model+ddp", "torch.compile"])
def test_wrappers_and_prefixes_are_unwrapped(tmp_path, vit, wrap):
    path = tmp_path / "ckpt.pth"
    torch.save(wrap(vit.state_dict()), path)
    torch.testing.assert_close(_load_quietly(path)(IMAGES), vit(IMAGES), rtol=0, atol=0)


def test_model_and_ema_must_be_chosen(tmp_path, vit):
    ema = vitedu.VisionTransformer(**SMALL).eval()
    path = tmp_path / "ckpt.pth"
    torch.save({"model": vit.state_dict(), "model_ema": ema.state_dict(), "epoch": 9}, path)
    with pytest.raises(ValueError, match=r"several sets of weights \['model', 'model_ema'\].*checkpoint_key="):
        from_pretrained(path, num_heads=3)
    torch.testing.assert_close(_load_quietly(path, checkpoint_key="model_ema")(IMAGES), ema(IMAGES))
    with pytest.raises(ValueError, match="no state_dict under 'ema'"):
        from_pretrained(path, num_heads=3, checkpoint_key="ema")


def test_unknown_wrapper_is_named(tmp_path, vit):
    path = tmp_path / "ckpt.pth"
    torch.save({"weights": vit.state_dict(), "step": 5}, path)
    with pytest.raises(ValueError, match=r"its entries: \{'weights': '\w*[dD]ict', 'step': 'int'\}"):
        from_pretrained(path)


def test_timm_train_checkpoint_records_its_arch(tmp_path):
    """timm's train.py saves {"arch": ..., "state_dict": ...}: the name pins the model, no warning."""
    model = vitedu.create_model("vit_tiny_patch16_224", depth=1, img_size=32, num_classes=5).eval()
    path = tmp_path / "checkpoint-9.pth.tar"
    torch.save({"arch": "vit_tiny_patch16_224", "epoch": 9, "state_dict": model.state_dict()}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = from_pretrained(path)
    torch.testing.assert_close(ours(IMAGES), model(IMAGES), rtol=0, atol=0)


# ---- Hugging Face weights passed directly ----

def test_hf_model_safetensors_passed_directly(tmp_path):
    theirs = _hf_dir(tmp_path, **HF)
    ours = from_pretrained(tmp_path / "model.safetensors")  # its config.json is beside it
    with torch.no_grad():
        torch.testing.assert_close(ours(IMAGES), theirs(pixel_values=IMAGES).logits, atol=1e-5, rtol=1e-5)
    moved = tmp_path / "elsewhere.safetensors"
    (tmp_path / "model.safetensors").rename(moved)
    with pytest.raises(ValueError, match="Hugging Face ViT state_dict.*Pass the directory"):
        from_pretrained(moved)


@pytest.mark.parametrize("intermediate", [201, 240, 490])
def test_hf_mlp_width_is_carried_exactly(tmp_path, intermediate):
    theirs = _hf_dir(tmp_path, **{**HF, "hidden_size": 100, "num_attention_heads": 4,
                                  "intermediate_size": intermediate})
    ours = from_pretrained(tmp_path)
    assert ours.blocks[0].mlp.fc1.out_features == intermediate
    with torch.no_grad():
        torch.testing.assert_close(ours(IMAGES), theirs(pixel_values=IMAGES).logits, atol=1e-5, rtol=1e-5)


def test_exact_mlp_ratio():
    assert int(100 * (201 / 100)) == 200  # the rounding trap
    for dim in (48, 100, 384, 1408):
        for hidden in range(dim, 6 * dim, 7):
            assert int(dim * exact_mlp_ratio(hidden, dim)) == hidden


def test_hf_config_missing_fields_is_a_value_error(tmp_path):
    _hf_dir(tmp_path, **HF)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="needs \\['hidden_size'\\]"):
        from_pretrained(tmp_path)


# ---- resolution: antialiased resampling (timm) vs transformers' interpolate_pos_encoding ----

def test_resampling_differs_from_transformers_by_the_documented_amount():
    from transformers.models.vit.modeling_vit import ViTEmbeddings

    config = transformers.ViTConfig(image_size=224, patch_size=16, hidden_size=48)
    embeddings = ViTEmbeddings(config)
    torch.manual_seed(0)
    with torch.no_grad():
        embeddings.position_embeddings.copy_(torch.randn_like(embeddings.position_embeddings) * 0.02)
    table = embeddings.position_embeddings.detach()
    gaps = {}
    for size in (384, 160):
        grid = size // 16
        with torch.no_grad():
            theirs = embeddings.interpolate_pos_encoding(torch.zeros(1, grid * grid + 1, 48), size, size)
        ours = vitedu.resample_pos_embed(table, grid, 14, num_prefix_tokens=1)
        gaps[size] = (theirs - ours).abs().mean().item()
    assert 5e-4 < gaps[384] < 2e-3, gaps  # "about 1e-3", as vitedu.pretrained's docstring says
    assert 3e-3 < gaps[160] < 1.2e-2, gaps  # "about 6e-3"


# ---- the API page's table is the tested one ----

def test_api_page_table_is_generated_from_the_tested_families():
    api = (pathlib.Path(__file__).resolve().parents[1] / "book" / "api.md").read_text()
    table = load_tool("checkpoint_table").support_table()
    assert table in api, "regenerate it with: python tools/checkpoint_table.py (book/api.md)"


# ---- never a raw KeyError/TypeError/IndexError ----

@pytest.mark.integration
def test_every_damaged_tensor_gives_a_value_error(tmp_path, vit):
    """Drop each tensor, or give it a wrong number of axes: always a ValueError naming the file."""
    path = tmp_path / "damaged.safetensors"
    state = vit.state_dict()
    for key in state:
        for damaged in ({k: v for k, v in state.items() if k != key},
                        *({**state, key: bad} for bad in (torch.zeros(()), torch.zeros(1), torch.zeros(2, 3, 4, 5)))):
            save_file(damaged, path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(ValueError, match=str(path)):
                    from_pretrained(path, num_heads=3)


@pytest.mark.parametrize("config, field", [
    ({"architecture": 5}, "architecture=5"),
    ({"architecture": "vit_tiny_patch16_224", "model_args": [1]}, "model_args"),
    ({"architecture": "vit_tiny_patch16_224", "pretrained_cfg": {"input_size": 7}}, "input_size"),
    ({"architecture": "vit_tiny_patch16_224", "num_classes": "x"}, "num_classes"),
    ({"model_type": "vit", "hidden_size": "a", "num_hidden_layers": 1, "num_attention_heads": 3}, "hidden_size"),
    ({"model_type": "vit", "hidden_size": 48, "num_hidden_layers": 1, "num_attention_heads": 3, "id2label": 5},
     "id2label"),
    ({"model_type": "vit", "hidden_size": 48, "num_hidden_layers": "1", "num_attention_heads": 3},
     "num_hidden_layers"),
    ({"model_type": "vit", "hidden_size": 48, "num_hidden_layers": 1, "num_attention_heads": 3.0},
     "num_attention_heads"),
])
def test_config_fields_of_the_wrong_type(tmp_path, vit, config, field):
    save_file(vit.state_dict(), tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=field):
        from_pretrained(tmp_path)


# ---- behaviours found by mutation testing ----

def test_hf_config_without_model_type_is_a_vit():
    """transformers writes model_type, but a hand-written config.json that leaves it out still describes a ViT."""
    config = {k: v for k, v in HF.items() if k != "num_labels"}
    assert hf_configs.hf_config_to_kwargs(config)["embed_dim"] == 48
    assert hf_configs.hf_config_to_kwargs({**config, "model_type": "vit"}) == hf_configs.hf_config_to_kwargs(config)
    with pytest.raises(ValueError, match="model_type 'deit'"):
        hf_configs.hf_config_to_kwargs({**config, "model_type": "deit"})


def test_hf_config_fields_left_out_take_transformers_defaults():
    """A config.json holds only what differs from ViTConfig's defaults when written by hand: the rest is
    transformers' default (224 pixels, 16-pixel patches, RGB, MLP 4x, qkv bias, eps 1e-12), not ours."""
    minimal = {"hidden_size": 768, "num_hidden_layers": 2, "num_attention_heads": 12}
    ours = hf_configs.hf_config_to_kwargs(minimal)
    theirs = hf_configs.hf_config_to_kwargs(transformers.ViTConfig(**minimal).to_dict())
    fields = ("img_size", "patch_size", "in_chans", "mlp_ratio", "qkv_bias", "norm_eps")
    assert {k: ours[k] for k in fields} == {k: theirs[k] for k in fields}
    assert (ours["img_size"], ours["patch_size"], ours["in_chans"]) == (224, 16, 3)


def test_hf_config_fields_that_differ_from_the_defaults_are_all_honoured():
    """Every field a ViTConfig records reaches the model: grayscale input, no qkv bias, another eps, a
    headless ViTModel (no classifier, whatever id2label says)."""
    config = {"model_type": "vit", "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
              "intermediate_size": 96, "image_size": 32, "patch_size": 8, "num_channels": 1,
              "id2label": {"0": "cat", "1": "dog"}, "layer_norm_eps": 1e-6, "qkv_bias": False,
              "architectures": ["ViTForImageClassification"]}
    assert hf_configs.hf_config_to_kwargs(config) == dict(
        img_size=32, patch_size=8, in_chans=1, num_classes=2, embed_dim=48, depth=2, num_heads=3, mlp_ratio=2.0,
        qkv_bias=False, norm_eps=1e-6)
    assert hf_configs.hf_config_to_kwargs({**config, "architectures": ["ViTModel"]})["num_classes"] == 0


def test_hf_state_dict_conversion_drops_the_pooler_anywhere_and_names_unknown_keys():
    theirs = transformers.ViTForImageClassification(transformers.ViTConfig(**HF)).state_dict()
    converted = hf_configs.convert_hf_state_dict(theirs)
    assert "blocks.1.attn.qkv.weight" in converted and not any(".query." in k for k in converted)
    pooler = {"vit.pooler.dense.weight": torch.zeros(48, 48), "vit.pooler.dense.bias": torch.zeros(48)}
    first = hf_configs.convert_hf_state_dict({**pooler, **theirs})  # ViTModel's pooler, here before everything else
    assert first.keys() == converted.keys()
    assert all(torch.equal(first[k], v) for k, v in converted.items())
    with pytest.raises(ValueError, match=r"unrecognised keys \['encoder.layer.0.attention.attention.q_bias'\]"):
        hf_configs.convert_hf_state_dict({**theirs, "vit.encoder.layer.0.attention.attention.q_bias": torch.zeros(48)})


def test_overrides_compare_floats_with_a_tolerance(tmp_path):
    """A float the checkpoint records (an MLP ratio of 201 / 100, an eps) may be repeated as the user writes it;
    any other value, or None against a number, is a conflict."""
    _hf_dir(tmp_path, **{**HF, "hidden_size": 100, "num_attention_heads": 4, "intermediate_size": 201})
    assert from_pretrained(tmp_path, mlp_ratio=2.01, norm_eps=1e-12).blocks[0].mlp.fc1.out_features == 201
    for conflict in (dict(mlp_ratio=2.0), dict(norm_eps=1e-6), dict(norm_eps=None)):
        with pytest.raises(ValueError, match="the checkpoint has"):
            from_pretrained(tmp_path, **conflict)
    same = pretrained._same
    assert same(3, 3.0 + 1e-12, "mlp_ratio") and same(3.0 + 1e-12, 3, "mlp_ratio")  # an int against a float
    assert not same(None, 1e-6, "norm_eps") and not same(1e-6, None, "norm_eps") and not same(4.0, 2.0, "mlp_ratio")
    assert same(1e-6, 1e-5, "init_values") and not same(None, 1e-5, "init_values")  # LayerScale on or off


class _FakeHub:
    """huggingface_hub's list_repo_files and hf_hub_download for one repository, without the network."""

    def __init__(self, root, files):
        self.root, self.files, self.downloaded = root, files, []

    def list_repo_files(self, hub_id):
        assert hub_id == "owner/model"
        return list(self.files)

    def hf_hub_download(self, hub_id, filename):
        assert hub_id == "owner/model" and filename in self.files
        self.downloaded.append(filename)
        (self.root / filename).write_text("{}")
        return str(self.root / filename)


@pytest.mark.parametrize("files, fetched", [
    (["config.json", "model.safetensors", "pytorch_model.bin", "README.md"], ["model.safetensors", "config.json"]),
    (["config.json", "pytorch_model.bin"], ["pytorch_model.bin", "config.json"]),
    (["config.json", "model.safetensors", "preprocessor_config.json"],  # Hugging Face's record of the normalisation
     ["model.safetensors", "preprocessor_config.json", "config.json"]),
    (["config.json", "README.md"], None),
    (["model.safetensors"], None),
])
def test_hub_download_fetches_config_and_one_weights_file(tmp_path, monkeypatch, files, fetched):
    """safetensors is preferred; the pickled .bin only when there is no safetensors; both needed files or an error."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    hub = _FakeHub(tmp_path, files)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", hub.list_repo_files)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub.hf_hub_download)
    if fetched is None:
        with pytest.raises(ValueError, match="has no config.json with model.safetensors"):
            pretrained._download("owner/model")
        assert hub.downloaded == []
    else:
        assert pretrained._download("owner/model") == tmp_path
        assert hub.downloaded == fetched


def test_hub_errors_become_os_errors(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def offline(hub_id):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(huggingface_hub, "list_repo_files", offline)
    with pytest.raises(OSError, match="could not fetch 'owner/model'.*ConnectionError: no route to host"):
        pretrained._download("owner/model")


def test_img_size_override_rebuilds_hf_and_bare_checkpoints(tmp_path, vit):
    _hf_dir(tmp_path / "hf", **HF)
    big = torch.randn(1, 3, 64, 64)
    assert from_pretrained(tmp_path / "hf", img_size=64)(big).shape == (1, 5)
    save_file(vit.state_dict(), tmp_path / "bare.safetensors")
    assert _load_quietly(tmp_path / "bare.safetensors", img_size=64)(big).shape == (1, 5)


def test_another_image_size_is_refused_unless_asked_as_in_timm(tmp_path):
    _hf_dir(tmp_path / "hf", **HF)
    big = torch.randn(1, 3, 64, 64)
    with pytest.raises(ValueError, match=r"this batch is 64x64.*dynamic_img_size=True"):
        from_pretrained(tmp_path / "hf")(big)
    assert from_pretrained(tmp_path / "hf", dynamic_img_size=True)(big).shape == (1, 5)
    with pytest.raises(TypeError, match="dynamic_img_size is True"):
        from_pretrained(tmp_path / "hf", dynamic_img_size=1)


def test_hf_class_names_follow_the_numeric_label_order(tmp_path):
    """id2label's keys are strings in config.json: label 10 comes after label 9, not after label 1."""
    labels = {i: f"class {i}" for i in range(12)}
    _hf_dir(tmp_path, **{**HF, "num_labels": 12, "id2label": labels, "label2id": {v: k for k, v in labels.items()}})
    assert from_pretrained(tmp_path).class_names == [f"class {i}" for i in range(12)]


def test_mismatch_errors_fold_block_numbers(tmp_path, vit):
    state = {k.replace(".attn.qkv.", ".attn.fused."): v for k, v in vit.state_dict().items()}
    with pytest.raises(ValueError, match=r"blocks\.N\.attn\.fused\.weight") as err:
        state_dicts.load_checked(vitedu.VisionTransformer(**SMALL), state)
    assert "blocks.0.attn.fused" not in str(err.value) and "blocks.1.attn.fused" not in str(err.value)


# ---- behaviours found by mutation testing, by function of vitedu.pretrained ----

def _save(model_or_state, path):
    save_file(model_or_state if isinstance(model_or_state, dict) else model_or_state.state_dict(), path)
    return path


def _timm_hub_dir(path, model, architecture="vit_tiny_patch16_224", **model_args):
    """timm's hub layout written from a vitedu model: config.json naming the architecture, model.safetensors."""
    path.mkdir(exist_ok=True)
    _save(model, path / "model.safetensors")
    args = dict(embed_dim=model.embed_dim, num_classes=model.num_classes, depth=len(model.blocks),
                img_size=list(model.patch_embed.img_size), patch_size=model.patch_embed.patch_size[0])
    config = {"architecture": architecture, "model_args": {**args, **model_args}}
    (path / "config.json").write_text(json.dumps(config))
    return path


def _tiny_timm_vit(**kwargs):
    """Width 192 and 16-pixel patches, those of vit_tiny_patch16_224, on a 2x2 grid, one block."""
    return vitedu.VisionTransformer(**{**dict(img_size=32, patch_size=16, embed_dim=192, depth=1, num_heads=3,
                                              num_classes=5), **kwargs}).eval()


def _caller_frames(frame):
    """``frame`` and its callers, outwards, without mutmut's trampolines: under `make mutation` every call of a
    vitedu function passes through two frames in mutmut's package, which no stacklevel can count."""
    frames = []
    while frame is not None:
        if "mutmut" not in pathlib.Path(frame.f_code.co_filename).parts:
            frames.append(frame)
        frame = frame.f_back
    return frames


# _from_state_dict_file

@pytest.mark.parametrize("prefix", ["embeddings.", "vit.embeddings.", "encoder.layer."])
def test_hugging_face_keys_in_a_bare_file_ask_for_its_directory(tmp_path, prefix):
    """ViTModel's keys start with embeddings./encoder.layer., ViTForImageClassification's with vit.: each alone
    shows a Hugging Face state_dict, whose configuration is in a config.json."""
    path = _save({f"{prefix}0.weight": torch.zeros(2)}, tmp_path / "weights.safetensors")
    with pytest.raises(ValueError, match="holds a Hugging Face ViT state_dict.*save_pretrained"):
        from_pretrained(path)


def test_an_unsupported_arch_names_what_the_weights_show(tmp_path, vit):
    """The refusal of a timm name vitedu lacks adds what the tensors reveal, for a bare file and a hub directory."""
    state = {**vit.state_dict(), "blocks.0.attn.q_norm.weight": torch.ones(16)}
    bare = _save(state, tmp_path / "weights.safetensors")
    shows = r"post-norm blocks.*Its weights show normalised queries and keys \('q_norm'/'k_norm'"
    with pytest.raises(ValueError, match=shows):
        from_pretrained(bare, arch="vit_base_patch16_rpn_224")
    (tmp_path / "hub").mkdir()
    _save(state, tmp_path / "hub" / "model.safetensors")
    (tmp_path / "hub" / "config.json").write_text(json.dumps({"architecture": "vit_base_patch16_rpn_224"}))
    with pytest.raises(ValueError, match=shows):
        from_pretrained(tmp_path / "hub")


def test_an_arch_of_another_width_names_the_architecture_and_the_way_out(tmp_path, vit):
    """The tag is not the architecture; a plain ViT can be loaded unpinned, a CaiT needs its own class."""
    from vitedu.cait import Cait

    bare = _save(vit, tmp_path / "vit.safetensors")
    with pytest.raises(ValueError, match=r"is not a vit_small_patch16_224: its tensors have embed_dim 48 \(a "
                                         r"vit_small_patch16_224 has 384\).*or leave arch out and pass num_heads="):
        from_pretrained(bare, arch="vit_small_patch16_224.augreg_in21k")
    cait = _save(Cait(img_size=32, patch_size=16, embed_dim=48, depth=1, num_heads=4), tmp_path / "cait.safetensors")
    with pytest.raises(ValueError, match=r"is not a cait_xxs24_224: .*or build a Cait and use load_state_dict$"):
        from_pretrained(cait, arch="cait_xxs24_224")


@pytest.mark.parametrize("pool, pooling", [("cls", "[CLS] pooling"),
                                           ("mean", "mean pooling with the final LayerNorm after it")])
def test_bare_state_dict_warning_names_every_assumption(tmp_path, pool, pooling):
    path = _save(_tiny_timm_vit(pool=pool), tmp_path / "weights.safetensors")
    with pytest.warns(UserWarning, match="bare state_dict") as record:
        from_pretrained(path)
    assumed = (f"vitedu assumed num_heads=3 (timm's usual count for width 192), exact GELU, pre-norm blocks, "
               f"LayerNorm eps 1e-6, {pooling}, as in timm's plain ViT")
    assert assumed in str(record[0].message)


def test_bare_state_dict_warning_points_at_the_callers_line(tmp_path, monkeypatch, vit):
    """stacklevel: the warning shows the user's own line, not vitedu's internals. Checked on the stacklevel given to
    warnings.warn (mutmut's trampolines, see _caller_frames, would move the frame the real warning shows)."""
    from types import SimpleNamespace

    path = _save(vit, tmp_path / "weights.safetensors")
    pointed = []

    def warn(message, category=None, stacklevel=1):
        frame = _caller_frames(sys._getframe(1))[stacklevel - 1]  # stacklevel 1: the function that warns
        pointed.append((frame.f_code.co_filename, frame.f_lineno))

    monkeypatch.setattr(pretrained, "warnings", SimpleNamespace(warn=warn))
    line = sys._getframe().f_lineno + 1
    from_pretrained(path, num_heads=3)
    assert pointed == [(__file__, line)]


def test_a_contradicting_override_names_the_file_in_every_format(tmp_path, vit):
    bare = _save(vit, tmp_path / "weights.safetensors")
    _hf_dir(tmp_path / "hf", **HF)
    hub = _timm_hub_dir(tmp_path / "timm", _tiny_timm_vit())
    for source, weights in ((bare, bare), (tmp_path / "hf", tmp_path / "hf" / "model.safetensors"),
                            (hub, hub / "model.safetensors")):
        with warnings.catch_warnings(), pytest.raises(ValueError, match=r"num_classes=7 \(the checkpoint has") as err:
            warnings.simplefilter("ignore")  # the bare file's assumptions
            from_pretrained(source, num_heads=3, num_classes=7)
        assert str(err.value).startswith(f"{weights}: num_classes=7")


def test_a_variant_state_dict_checks_overrides_against_its_own_class(tmp_path):
    from vitedu.cait import Cait

    path = _save(Cait(img_size=32, patch_size=16, embed_dim=192, depth=1, num_heads=4, num_classes=5),
                 tmp_path / "cait.safetensors")
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['pool'\]; Cait accepts"):
        from_pretrained(path, arch="cait_xxs24_224", pool="mean")


# _infer_timm_kwargs

@pytest.mark.parametrize("change", [dict(in_chans=1), dict(mlp_ratio=2.0), dict(num_classes=0),
                                    dict(init_values=1e-5), dict(pool="mean"), dict(qkv_bias=False)],
                         ids=["grayscale", "mlp-2x", "headless", "layerscale", "mean-pool", "no-qkv-bias"])
def test_a_bare_state_dict_gives_what_its_shapes_record(tmp_path, change):
    model = vitedu.VisionTransformer(**{**SMALL, "depth": 1, **change}).eval()
    path = _save(model, tmp_path / "weights.safetensors")
    images = torch.randn(2, change.get("in_chans", 3), 32, 32)
    torch.testing.assert_close(_load_quietly(path)(images), model(images), rtol=0, atol=0)


def test_layerscale_is_structural_but_its_starting_value_is_not(tmp_path):
    """init_values only sets gamma before training; a file's trained gammas replace it. So any value loads the same
    weights, while init_values=None (no LayerScale at all) contradicts a file that has it."""
    model = vitedu.VisionTransformer(**{**SMALL, "depth": 1, "init_values": 0.1}).eval()
    path = _save(model, tmp_path / "weights.safetensors")
    images = torch.randn(2, 3, 32, 32)
    loaded = _load_quietly(path, init_values=1e-6)
    torch.testing.assert_close(loaded(images), model(images), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"init_values=None \(the checkpoint has init_values=1e-05\)"):
        _load_quietly(path, init_values=None)


def test_a_distilled_state_dict_counts_its_grid_after_both_prefix_tokens(tmp_path):
    """[CLS] and [DIST] have positions but are no patches. With a single patch the count shows: 3 positions are a
    1x1 grid (16 pixels), not 2x2."""
    from vitedu.deit import VisionTransformerDistilled

    theirs = VisionTransformerDistilled(img_size=16, patch_size=16, embed_dim=192, depth=1, num_heads=3,
                                        num_classes=5).eval()
    ours = from_pretrained(_save(theirs, tmp_path / "deit.safetensors"), arch="deit_tiny_distilled_patch16_224")
    images = torch.randn(2, 3, 16, 16)
    assert ours.patch_embed.img_size == (16, 16)
    torch.testing.assert_close(ours(images), theirs(images), rtol=0, atol=0)


# _model_class

def test_family_keys_without_a_patch_embedding_are_named(tmp_path):
    path = _save({"dist_token": torch.zeros(1, 1, 8), "cls_token": torch.zeros(1, 1, 8)}, tmp_path / "w.safetensors")
    with pytest.raises(ValueError, match=r"holds a DeiT-distilled state_dict \(it has 'dist_token'\)"):
        from_pretrained(path)


def test_a_variant_arch_names_the_key_the_file_has_or_lacks(tmp_path):
    from vitedu.cait import Cait

    vit = _save(_tiny_timm_vit(), tmp_path / "vit.safetensors")
    with pytest.raises(ValueError, match=r"not a cait_xxs24_224: its keys are those of a ViT \(it has none of "
                                         r"'dist_token', 'blocks_token_only', 'gating_param'\): pass arch='"):
        from_pretrained(vit, arch="cait_xxs24_224")
    cait = _save(Cait(img_size=32, patch_size=16, embed_dim=192, depth=1, num_heads=4), tmp_path / "cait.safetensors")
    with pytest.raises(ValueError, match=r"not a convit_tiny: its keys are those of a CaiT \(it has "
                                         r"'blocks_token_only\.0\.[\w.]+'\): pass arch='cait_xxs24_224'"):
        from_pretrained(cait, arch="convit_tiny")


# _build

@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_img_size_resamples_learned_positions_after_the_prefix_tokens(tmp_path, pool):
    """A mean-pooled ViT has no [CLS]: all of its positions are the grid's."""
    model = vitedu.VisionTransformer(**{**SMALL, "depth": 1, "pool": pool})
    ours = _load_quietly(_save(model, tmp_path / "weights.safetensors"), img_size=64)
    assert ours.patch_embed.img_size == (64, 64)
    expected = vitedu.resample_pos_embed(model.pos_embed.detach(), 8, old_grid=4, num_prefix_tokens=int(pool == "cls"))
    torch.testing.assert_close(ours.pos_embed.detach(), expected, rtol=0, atol=0)


def test_img_size_resamples_a_non_square_grid(tmp_path):
    """timm's config.json may record a non-square input; its 2x4 grid cannot be guessed from 8 positions."""
    model = vitedu.VisionTransformer(**{**SMALL, "depth": 1, "img_size": (16, 32)})
    hub = _timm_hub_dir(tmp_path, model, num_heads=3)
    ours = from_pretrained(hub, img_size=32)
    expected = vitedu.resample_pos_embed(model.pos_embed.detach(), 4, old_grid=(2, 4), num_prefix_tokens=1)
    torch.testing.assert_close(ours.pos_embed.detach(), expected, rtol=0, atol=0)


def test_img_size_gives_a_fixed_sincos_model_the_new_grid_s_own_table(tmp_path):
    """Fixed 2-D sin-cos positions are not resampled: the model at the new size computes its own table. (Before
    this test the old grid's table was loaded as it was, and the loading failed on its shape.)"""
    model = vitedu.VisionTransformer(**{**SMALL, "depth": 1, "pos_embed": "sincos"}).eval()
    ours = _load_quietly(_save(model, tmp_path / "weights.safetensors"), pos_embed="sincos", img_size=64)
    bigger = vitedu.VisionTransformer(**{**SMALL, "depth": 1, "pos_embed": "sincos", "img_size": 64}).eval()
    bigger.load_state_dict({**model.state_dict(), "pos_embed": bigger.pos_embed})
    images = torch.randn(2, 3, 64, 64)
    torch.testing.assert_close(ours.pos_embed, bigger.pos_embed, rtol=0, atol=0)
    torch.testing.assert_close(ours(images), bigger(images), rtol=0, atol=0)


def test_a_head_count_that_does_not_divide_the_width_is_named_at_any_img_size(tmp_path, vit):
    path = _save(vit, tmp_path / "weights.safetensors")
    for resize in ({}, {"img_size": 64}):
        with pytest.warns(UserWarning, match="bare state_dict"):
            with pytest.raises(ValueError, match="cannot build a VisionTransformer from") as err:
                from_pretrained(path, num_heads=5, **resize)
        assert str(err.value).startswith(str(path))


# _from_directory

def test_a_hugging_face_config_without_model_type_loads(tmp_path):
    theirs = _hf_dir(tmp_path, **HF)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["model_type"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path)(IMAGES), theirs(pixel_values=IMAGES).logits)


def test_a_config_json_of_neither_format_names_its_keys(tmp_path, vit):
    _save(vit, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"labels": ["cat", "dog"]}))
    with pytest.raises(ValueError, match=r"is neither a Hugging Face config .* its keys: \['labels'\]"):
        from_pretrained(tmp_path)


def test_hugging_face_weights_that_do_not_fit_the_config_name_the_file(tmp_path):
    _hf_dir(tmp_path, **HF)
    config = json.loads((tmp_path / "config.json").read_text())
    config["id2label"] = {"0": "cat", "1": "dog", "2": "owl"}  # 3 classes; the weights have 5
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"head.weight: checkpoint \(5, 48\) vs model \(3, 48\)") as err:
        from_pretrained(tmp_path)
    assert str(err.value).startswith(f"the model does not match {tmp_path / 'model.safetensors'}:")


def test_hugging_face_img_size_rebuilds_the_model(tmp_path):
    _hf_dir(tmp_path, **HF)
    assert from_pretrained(tmp_path, img_size=64).patch_embed.img_size == (64, 64)


def test_hugging_face_labels_reach_class_names_and_the_cfg_and_no_labels_give_none(tmp_path):
    labels = {i: name for i, name in enumerate(["cat", "dog", "owl", "fox", "elk"])}
    _hf_dir(tmp_path / "labelled", **{**HF, "id2label": labels, "label2id": {v: k for k, v in labels.items()}})
    model = from_pretrained(tmp_path / "labelled")
    assert model.class_names == list(labels.values()) and model.pretrained_cfg["label_names"] == tuple(labels.values())
    torch.manual_seed(0)  # a headless ViTModel whose config.json has no id2label at all
    transformers.ViTModel(transformers.ViTConfig(**HF), add_pooling_layer=False).save_pretrained(tmp_path / "bare")
    config = json.loads((tmp_path / "bare" / "config.json").read_text())
    (tmp_path / "bare" / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                               if k not in ("id2label", "label2id")}))
    model = from_pretrained(tmp_path / "bare")
    assert model.num_classes == 0 and model.class_names is None and model.pretrained_cfg["label_names"] is None


# from_pretrained

def test_a_weights_file_passed_directly_keeps_the_arch_check(tmp_path):
    _hf_dir(tmp_path, **HF)
    with pytest.raises(ValueError, match=r"arch='vit_tiny_patch16_224' applies to timm checkpoints"):
        from_pretrained(tmp_path / "model.safetensors", arch="vit_tiny_patch16_224")


def test_the_weights_file_passed_is_the_one_loaded(tmp_path):
    """A directory with both formats: the directory means model.safetensors, pytorch_model.bin means that file."""
    torch.manual_seed(0)
    first, second = _tiny_timm_vit(), _tiny_timm_vit()
    hub = _timm_hub_dir(tmp_path, first)
    torch.save(second.state_dict(), hub / "pytorch_model.bin")
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(from_pretrained(hub)(images), first(images), rtol=0, atol=0)
    torch.testing.assert_close(from_pretrained(hub / "pytorch_model.bin")(images), second(images), rtol=0, atol=0)


# _from_timm_config

def test_timm_weights_that_do_not_fit_the_config_name_the_file(tmp_path):
    hub = _timm_hub_dir(tmp_path, _tiny_timm_vit(), num_classes=7)
    with pytest.raises(ValueError, match=r"head.weight: checkpoint \(5, 192\) vs model \(7, 192\)") as err:
        from_pretrained(hub)
    assert str(err.value).startswith(f"the model does not match {hub / 'model.safetensors'}:")
