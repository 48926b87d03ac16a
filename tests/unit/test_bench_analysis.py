"""bench/analysis.py's paired ratio: the median of each round's own ratio, the two run back to back in alternating
order, on a clock the functions themselves advance (no timing of this busy machine)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import analysis


def test_the_ratio_is_the_median_of_each_rounds_own_ratio():
    now, order = [0.0], []

    def timed(name: str, factor: float):
        def run():  # a load that doubles every round (a pair of calls), the warm-up included
            now[0] += factor * 2 ** (len(order) // 2)
            order.append(name)

        return run

    ratio, low, high, below = analysis.paired_ratio(timed("n", 1.3), timed("d", 1.0), 5, lambda: now[0])
    assert order == ["n", "d"] + ["n", "d", "d", "n"] * 2 + ["n", "d"]  # alternating, each round's pair together
    assert abs(ratio - 1.3) < 1e-12 and abs(low - 1.3) < 1e-12 and abs(high - 1.3) < 1e-12  # the load cancels
    assert below == 8.0  # the denominator's median seconds: 2, 4, 8, 16, 32
