"""The masked autoencoder shipped with vitedu, whole: the encoder and the decoder trained beside it (chapter 10).

    from vitedu.shipped_mae import load_shipped_mae
    mae = load_shipped_mae()           # MaskedAutoencoder, eval mode
    # normalised canvases, as the encoder's pretrained_cfg says
    loss, pred, mask = mae(canvases)

``vitedu.create_model("vit_cluttered_digits_mae", pretrained=True)`` gives the encoder alone, as the official MAE
checkpoints ship it; this module adds the decoder, which only reconstructions need.
"""

from __future__ import annotations

import json
from importlib import resources

from safetensors.torch import load

from .mae import MaskedAutoencoder
from .shipped import SHIPPED_WEIGHTS, load_shipped_weights, shipped_metadata
from .state_dicts import load_checked


def load_shipped_mae(name: str = "vit_cluttered_digits_mae") -> MaskedAutoencoder:
    """The whole shipped MAE, encoder and decoder, in eval mode: what reconstructs hidden patches (chapter 10).

    ``vitedu.create_model(name, pretrained=True)`` gives the encoder alone, as the official MAE checkpoints ship
    it. The decoder trained beside it ships in its own file, which the encoder file's metadata names
    ("decoder"), with the ``MaskedAutoencoder``'s keyword arguments ("mae_kwargs"). Inputs are canvases normalised
    as the encoder's ``pretrained_cfg`` says (``vitedu.constants.CLUTTERED_MEAN`` / ``CLUTTERED_STD``).
    """
    meta = shipped_metadata(name)  # an unknown or unshipped name is explained there
    if "decoder" not in meta or "mae_kwargs" not in meta:
        with_decoder = [n for n in sorted(SHIPPED_WEIGHTS) if "decoder" in shipped_metadata(n)]
        raise ValueError(
            f"the weights shipped for {name!r} are not a masked autoencoder's: their file's metadata does not "
            f"name both a decoder file and the MAE's arguments ('decoder', 'mae_kwargs'). "
            f"MAEs shipped with vitedu: {', '.join(with_decoder) or 'none'}. For the model alone use "
            f"vitedu.create_model({name!r}, pretrained=True)."
        )
    model = MaskedAutoencoder(**json.loads(meta["mae_kwargs"]))
    decoder = load(resources.files("vitedu").joinpath("assets", meta["decoder"]).read_bytes())
    load_checked(model, {**load_shipped_weights(name), **decoder}, f"the shipped MAE {name!r} and its decoder")
    return model.eval()
