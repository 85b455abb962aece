"""The convnet baseline and teacher (vitedu.cnn): the strided stem, and weight files that rebuild themselves."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from train_recipes import SMALL, quiet

from vitedu import train as T
from vitedu.cnn import ConvTeacher, load_conv_teacher, save_conv_teacher
from vitedu.utils import count_parameters


def test_a_strided_stem_keeps_the_parameters_and_quarters_the_positions():
    plain, strided = ConvTeacher(1, 10, width=40), ConvTeacher(1, 10, width=40, stride=2)
    assert count_parameters(plain) == count_parameters(strided) == 139_930
    x = torch.rand(2, 1, 32, 32)
    assert plain[0](x).shape == (2, 40, 32, 32) and strided[0](x).shape == (2, 40, 16, 16)
    assert strided(x).shape == (2, 10)


@pytest.mark.parametrize("half", [False, True])
def test_a_saved_teacher_loads_as_the_same_network(tmp_path, half):
    torch.manual_seed(0)
    model = ConvTeacher(1, 10, width=8, stride=2).eval()
    save_conv_teacher(tmp_path / "cnn.safetensors", model, half=half)
    loaded = load_conv_teacher(tmp_path / "cnn.safetensors")
    assert (loaded.width, loaded.stride, loaded.training) == (8, 2, False)
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    x = torch.rand(3, 1, 32, 32)
    torch.testing.assert_close(loaded(x), model(x), atol=0 if not half else 1e-2, rtol=0 if not half else 1e-2)


def test_a_file_without_the_arguments_is_refused_with_the_fix(tmp_path):
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in ConvTeacher(1, 10, width=8).state_dict().items()},
              str(tmp_path / "bare.safetensors"))
    with pytest.raises(ValueError, match="no in_chans, num_classes, width, stride.*save_conv_teacher"):
        load_conv_teacher(tmp_path / "bare.safetensors")


def test_fit_distils_a_teacher_from_its_file_instead_of_training_one(tmp_path):
    torch.manual_seed(1)
    teacher = ConvTeacher(1, 10, width=8, stride=2)
    save_conv_teacher(tmp_path / "teacher.safetensors", teacher)
    plain = replace(SMALL, epochs=1, distill_alpha=0.5, distill_temperature=0.0)
    lines = []
    result = T.fit(replace(plain, teacher_path=str(tmp_path / "teacher.safetensors")), device="cpu",
                   log=lines.append)
    assert not any(line.startswith("teacher:") for line in lines)  # nothing was trained for it
    assert result.teacher is not None and not result.teacher.training
    for mine, theirs in zip(result.teacher.state_dict().values(), teacher.state_dict().values()):
        assert torch.equal(mine, theirs)
    without = T.fit(plain, device="cpu", log=quiet)
    assert without.teacher is None  # and the teacher's targets changed what the student learned:
    assert not torch.equal(result.model.head.weight, without.model.head.weight)
