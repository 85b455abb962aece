"""What counts as an effect: the book's one rule for reading a comparison run with a few seeds.

    # per seed, in points
    d = paired_difference(with_it=[95.1, 95.0, 93.5], without=[91.5, 93.3, 89.9])
    print(d)    # +3.0 [+0.2, +5.7]   the mean difference and its 95 % interval
    d.effect    # True: the interval excludes zero

A controlled comparison changes one thing and runs both sides with the same seeds, so seed s of one side meets
the same data order (and, where the models share their parameters, the same start) as seed s of the other. The
seeds pair up: the difference seed by seed removes what a seed does to both sides, and what is left varies less
than either side. Student's t then gives an interval for the mean difference, with n - 1 degrees of freedom:

    mean +- t(0.975, n - 1) * std(differences) / sqrt(n)

**The rule**: a change has an effect when this 95 % interval excludes zero. With three seeds t is 4.30, so the
mean difference has to exceed 2.5 times the standard deviation of the three differences. "The same sign on every
seed" is not enough: three positive differences of +0.5, +3.0 and +0.1 have the interval [-2.7, +5.1]. An
interval that includes zero is not evidence of no effect either: it says these seeds cannot tell.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


def t_density(x: float, dof: int) -> float:
    """Student's t density with ``dof`` degrees of freedom."""
    log_norm = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    return math.exp(log_norm - (dof + 1) / 2 * math.log1p(x * x / dof))


def t_quantile(probability: float, dof: int) -> float:
    """Student's t quantile: the x with P(T <= x) = ``probability`` (above one half). The distribution function
    is one half plus the density integrated from 0 to x (Simpson's rule, 400 intervals); bisection finds x."""
    if not 0.5 <= probability < 1 or dof < 1:
        raise ValueError(f"t_quantile needs a probability in [0.5, 1) and at least one degree of freedom; got "
                         f"{probability!r} and {dof!r}")

    def cdf(x: float, n: int = 400) -> float:
        h = x / n
        inner = sum((4 if i % 2 else 2) * t_density(i * h, dof) for i in range(1, n))
        return 0.5 + h / 3 * (t_density(0.0, dof) + inner + t_density(x, dof))

    low, high = 0.0, 1.0
    while cdf(high) < probability:
        low, high = high, 2 * high
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < probability else (low, middle)
    return (low + high) / 2


@dataclass(frozen=True)
class PairedDifference:
    """The mean of the seed-by-seed differences (with - without) and its interval, in the units given."""

    differences: tuple[float, ...]
    mean: float
    low: float
    high: float

    @property
    def effect(self) -> bool:
        """True when the interval excludes zero (the book's rule for an effect)."""
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.mean:+.1f} [{self.low:+.1f}, {self.high:+.1f}]"


def paired_difference(with_it: Sequence[float], without: Sequence[float],
                      confidence: float = CONFIDENCE) -> PairedDifference:
    """Pair seed s of ``with_it`` with seed s of ``without`` (the same seeds, in the same order) and return the
    mean difference with its ``confidence`` t interval. Needs at least two seeds on each side."""
    if len(with_it) != len(without) or len(with_it) < 2:
        raise ValueError(f"a paired difference needs the same seeds on both sides, at least two; got "
                         f"{len(with_it)} and {len(without)} numbers: pass one number per seed, in seed order")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence is a probability such as 0.95; got {confidence!r}")
    differences = tuple(a - b for a, b in zip(with_it, without))
    mean = statistics.mean(differences)
    half = t_quantile((1 + confidence) / 2, len(differences) - 1) * statistics.stdev(differences)
    half /= math.sqrt(len(differences))
    return PairedDifference(differences, mean, mean - half, mean + half)


__all__ = ["CONFIDENCE", "PairedDifference", "paired_difference", "t_density", "t_quantile"]
