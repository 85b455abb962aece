"""vitedu.effects: the book's one rule for what counts as an effect, on numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from vitedu.effects import paired_difference, t_quantile


def test_the_interval_is_the_mean_difference_plus_minus_t_times_its_standard_error():
    d = paired_difference([3.0, 5.0, 4.0], [1.0, 2.0, 2.0])  # differences 2, 3, 2
    assert d.differences == (2.0, 3.0, 2.0) and d.mean == pytest.approx(7 / 3)
    half = 4.302653 * math.sqrt(1 / 3) / math.sqrt(3)  # t(0.975, 2) * std / sqrt(n)
    assert (d.low, d.high) == (pytest.approx(7 / 3 - half, abs=1e-5), pytest.approx(7 / 3 + half, abs=1e-5))
    assert d.effect and str(d) == "+2.3 [+0.9, +3.8]"


def test_the_same_sign_on_every_seed_is_not_an_effect_on_its_own():
    d = paired_difference([0.5, 3.0, 0.1], [0.0, 0.0, 0.0])
    assert all(x > 0 for x in d.differences) and not d.effect and str(d) == "+1.2 [-2.7, +5.1]"
    assert paired_difference([-1.0, -1.2, -0.9], [0.0, 0.0, 0.0]).effect  # a consistent loss is one


def test_t_quantiles_match_the_table():
    # a printed table of Student's t, two-sided 95 % (and 99 % for one degree of freedom)
    for dof, table in ((1, 12.706), (2, 4.303), (3, 3.182), (9, 2.262), (30, 2.042)):
        assert t_quantile(0.975, dof) == pytest.approx(table, abs=1e-3)
    assert t_quantile(0.995, 1) == pytest.approx(63.657, abs=1e-3)
    assert t_quantile(0.5, 4) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="probability in"):
        t_quantile(0.2, 3)


@pytest.mark.parametrize("a, b, words", [([1.0, 2.0], [1.0], "same seeds"), ([1.0], [2.0], "at least two")])
def test_unpaired_or_single_seeds_are_refused_saying_what_to_pass(a, b, words):
    with pytest.raises(ValueError, match=words):
        paired_difference(a, b)
    with pytest.raises(ValueError, match="probability"):
        paired_difference([1.0, 2.0], [0.0, 0.0], confidence=95)
