"""The table of timm checkpoint families (python tools/checkpoint_table.py): which ones vitedu loads exactly.

``FAMILIES`` lists one representative timm architecture per family with the outcome that tests/test_timm_hub.py
checks against timm itself; tests/test_pretrained_files.py checks that book/api.md ("Checkpoint families") holds exactly this table. The
reasons of a refusal are vitedu's own (``vitedu.timm_configs.name_reasons``), so the table says what a user sees.
"""

from __future__ import annotations

from vitedu.timm_configs import name_reasons

# One representative timm architecture per family: (family, timm architecture, loads exactly?, what vitedu lacks).
# The tests build each one with timm (small width and depth), save it in timm's hub format and check the outcome.
FAMILIES: list[tuple[str, str, bool, str]] = [
    ("ViT (augreg, original, MAE, DINO tags)", "vit_base_patch16_224", True, ""),
    ("ViT without qkv bias (MIIL)", "vit_base_patch16_224_miil", True, ""),
    ("ViT-B+ with LayerScale", "vit_base_patch16_plus_240", True, ""),
    ("DINOv2 without registers", "vit_small_patch14_dinov2", True, ""),
    ("DeiT", "deit_small_patch16_224", True, ""),
    ("ViT-giant (mlp_ratio 48/11)", "vit_giant_patch14_224", True, ""),
    ("DeiT-distilled (distillation token)", "deit_small_distilled_patch16_224", True, ""),
    ("CaiT (class attention, talking heads)", "cait_xxs24_224", True, ""),
    ("ConViT (gated positional attention)", "convit_tiny", True, ""),
    ("DeiT III", "deit3_small_patch16_224", False, "no_embed_class"),
    ("DINOv2 with registers", "vit_small_patch14_reg4_dinov2", False, "register tokens"),
    ("ViT with registers (reg4)", "vit_medium_patch16_reg4_gap_256", False, "register tokens"),
    ("relative-position ViT", "vit_relpos_small_patch16_224", False, "relative position"),
    ("residual post-norm ViT", "vit_base_patch16_rpn_224", False, "post-norm"),
    ("BEiT", "beit_base_patch16_224", False, "q_bias"),
    ("EVA-02 (rotary, SwiGLU)", "eva02_small_patch14_224", False, "rotary"),
    ("SigLIP (attention-pool head)", "vit_base_patch16_siglip_224", False, "attention-pool"),
    ("global-average-pool ViT", "vit_base_patch16_gap_224", False, "average pooling after the final LayerNorm"),
    ("CLIP image tower", "vit_base_patch16_clip_224", False, "norm_pre"),
    ("DINOv2-giant (SwiGLU)", "vit_giant_patch14_dinov2", False, "SwiGLU"),
]


def support_table() -> str:
    """The table of checkpoint families in book/api.md, from ``FAMILIES`` (which the tests check against timm)."""
    lines = ["| family | example timm architecture | vitedu |", "|---|---|---|"]
    for family, arch, exact, _ in FAMILIES:
        outcome = "loads, identical logits" if exact else "refused: " + "; ".join(name_reasons(arch))
        lines.append(f"| {family} | `{arch}` | {outcome} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(support_table())
