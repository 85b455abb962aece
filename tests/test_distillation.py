"""Knowledge distillation: the losses of vitedu.deit (soft and hard distillation, the distillation-token loss) and
the teacher they learn from, vitedu.cnn.ConvTeacher."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vitedu.cnn import ConvTeacher
from vitedu.deit import distillation_loss, distillation_token_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def test_distillation_loss_hard_and_soft():
    student, teacher = torch.randn(6, 10), torch.randn(6, 10)
    hard = distillation_loss(student, teacher)
    assert torch.allclose(hard, torch.nn.functional.cross_entropy(student, teacher.argmax(-1)))
    t = 3.0
    p_t, p_s = torch.softmax(teacher / t, -1), torch.softmax(student / t, -1)
    by_hand = (p_t * (p_t.log() - p_s.log())).sum(-1).mean() * t**2  # KL(teacher || student), batch mean
    assert torch.allclose(distillation_loss(student, teacher, t), by_hand, atol=1e-6)
    assert distillation_loss(teacher, teacher, t).abs() < 1e-6  # copying the teacher costs nothing
    p_1, s_1 = torch.softmax(teacher, -1), torch.softmax(student, -1)  # T = 1 is soft too: only T <= 0 is hard
    kl_1 = (p_1 * (p_1.log() - s_1.log())).sum(-1).mean()
    torch.testing.assert_close(distillation_loss(student, teacher, 1.0), kl_1)


def test_distillation_token_loss_smooths_labels_and_softens_the_teacher():
    """Each head its own target: label smoothing applies to the [CLS] head, the temperature to the [DIST] head."""
    torch.manual_seed(0)
    cls_logits, dist_logits, teacher = torch.randn(6, 10), torch.randn(6, 10), torch.randn(6, 10)
    labels = torch.randint(0, 10, (6,))
    loss = distillation_token_loss(cls_logits, dist_logits, labels, teacher, alpha=0.3, temperature=2.0,
                                     label_smoothing=0.2)
    expected = (0.7 * torch.nn.functional.cross_entropy(cls_logits, labels, label_smoothing=0.2)
                + 0.3 * distillation_loss(dist_logits, teacher, 2.0))
    torch.testing.assert_close(loss, expected)


def test_distillation_token_loss_matches_a_hand_computation():
    cls_logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    dist_logits = torch.tensor([[0.0, 3.0, 0.0], [1.0, 1.0, 2.0]])
    labels = torch.tensor([0, 1])
    teacher = torch.tensor([[0.1, 0.9, 0.0], [5.0, 0.0, 0.0]])  # argmax: classes 1 and 0

    def nll(logits, targets):  # -log softmax(logits)[target], averaged, written out
        return sum((torch.logsumexp(row, 0) - row[t]) for row, t in zip(logits, targets)) / len(targets)

    by_hand = 0.5 * nll(cls_logits, labels) + 0.5 * nll(dist_logits, [1, 0])
    loss = distillation_token_loss(cls_logits, dist_logits, labels, teacher)
    assert torch.allclose(loss, by_hand, atol=1e-6)
    # The label head never sees the teacher, the distillation head never sees the labels.
    assert torch.allclose(distillation_token_loss(cls_logits, dist_logits, labels, teacher, alpha=0.0),
                          F.cross_entropy(cls_logits, labels))
    other_labels = torch.tensor([2, 2])
    assert torch.allclose(distillation_token_loss(cls_logits, dist_logits, other_labels, teacher, alpha=1.0),
                          distillation_token_loss(cls_logits, dist_logits, labels, teacher, alpha=1.0))


def test_conv_teacher_is_the_local_equivariant_convnet_chapter_7_measures():
    """Chapter 7 prints an 89,930-parameter teacher for the digits, and measures its locality: one output of the
    first convolution reads the 3x3 pixels around it (25 after two), on a map as large as the image, and shifting
    the image shifts the map."""
    from vitedu.utils import count_parameters

    cnn = ConvTeacher(in_chans=1, num_classes=10).eval()
    assert count_parameters(cnn) == 89_930
    assert count_parameters(ConvTeacher(in_chans=3, num_classes=4, width=8)) == (
        (3 * 9 + 1) * 8 + (8 * 9 + 1) * 16 + (16 * 9 + 1) * 16 + (64 + 1) * 32 + (32 + 1) * 4)
    first_conv, two_convs = torch.nn.Sequential(cnn[0]), torch.nn.Sequential(*list(cnn)[:3])

    def pixels_read(layer, image, row, col):
        image = image.clone().requires_grad_(True)
        out = layer(image)
        assert out.shape[-2:] == image.shape[-2:]  # "same" padding: the map is aligned with the image
        out[0, :, row, col].sum().backward()
        return set(map(tuple, (image.grad[0, 0] != 0).nonzero().tolist()))

    x = torch.randn(1, 1, 8, 8)
    assert pixels_read(first_conv, x, 3, 3) == {(r, c) for r in range(2, 5) for c in range(2, 5)}
    assert pixels_read(two_convs, x, 3, 3) == {(r, c) for r in range(1, 6) for c in range(1, 6)}
    canvas = torch.zeros(1, 1, 16, 16)
    canvas[..., 4:12, 4:12] = x
    shift = lambda t: torch.roll(t, shifts=1, dims=-1)  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(two_convs(shift(canvas))[..., 2:-2, 2:-2], shift(two_convs(canvas))[..., 2:-2, 2:-2])
        logits = cnn(torch.randn(5, 1, 32, 32))  # any image size: the head pools to a fixed 2x2 grid
    assert logits.shape == (5, 10)
    images = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(cnn(images), cnn(images))  # eval: deterministic
        assert not torch.equal(cnn.train()(images), cnn(images))  # training: dropout before the last layer


def test_conv_teacher_layers_are_the_ones_whose_numbers_the_book_reports():
    """Three 3x3 convolutions with "same" padding, a GELU after each, one 2x2 max-pool, a pooled 2x2 grid, a hidden
    layer with GELU and dropout: the teacher chapter 7 and the digits preset measured. Another stack with the same
    parameter count would not be that teacher."""
    cnn = ConvTeacher(in_chans=1, num_classes=10)
    assert [type(m).__name__ for m in cnn] == [
        "Conv2d", "GELU", "Conv2d", "GELU", "MaxPool2d", "Conv2d", "GELU", "AdaptiveAvgPool2d",
        "Flatten", "Linear", "GELU", "Dropout", "Linear"]
    convs = [m for m in cnn if isinstance(m, torch.nn.Conv2d)]
    assert all(c.kernel_size == (3, 3) and c.padding == (1, 1) and c.stride == (1, 1) for c in convs)
    assert cnn[4].kernel_size == 2 and cnn[7].output_size == 2 and cnn[11].p == 0.3
