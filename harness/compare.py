"""`eval.py compare A.py B.py SPEC`: two submissions timed on the same inputs, repeat by repeat.

Each submission runs in its own worker (its own module state, as on the leaderboard). Per case,
both make the benchmark's input sets from the same seeds and are checked on them; then repeats
alternate between the two (A B, then B A, ...), each repeat timed as the benchmark times it (the
flush, then every input set back to back), so that drift of the machine hits both alike. The
repeats stop when both sides meet the benchmark's stopping rule.
"""

import dataclasses
import math
import time

from harness.floors import geomean
from harness.report import format_time, table
from harness.runners import calculate_stats, should_stop

T_95 = 1.96  # the normal quantile of a two-sided 95% interval


@dataclasses.dataclass
class Comparison:
    a: list[float]  # ns per call, one value a repeat
    b: list[float]

    @property
    def ratio(self) -> float:
        """B's mean time over A's: above 1, B is slower."""
        return calculate_stats(self.b).mean / calculate_stats(self.a).mean

    @property
    def spread(self) -> float:
        """Half the width of a 95% interval around the mean of the per-repeat ratios B/A (each repeat
        of B over the repeat of A next to it), relative to the ratio."""
        ratios = [b / a for a, b in zip(self.a, self.b)]
        if len(ratios) < 2:
            return float("nan")
        stats = calculate_stats(ratios)
        return T_95 * stats.err / stats.mean


def alternate(repeat_a, repeat_b, max_repeats: int, max_time_ns: float) -> Comparison:
    """Repeats of A and B, each a call of repeat_a() or repeat_b() returning ns per call, in the
    order A B B A A B ..., until both meet the stopping rule or max_repeats each are done."""
    result = Comparison([], [])
    start = time.perf_counter_ns()
    for repeat in range(max_repeats):
        for side in ((repeat_a, result.a), (repeat_b, result.b))[:: 1 if repeat % 2 == 0 else -1]:
            side[1].append(side[0]())
        elapsed = time.perf_counter_ns() - start
        if should_stop(result.a, elapsed, max_time_ns) and should_stop(result.b, elapsed, max_time_ns):
            break
    return result


def comparison_table(shapes: list[str], results: list[Comparison | str]) -> str:
    """Per case the two means, B / A and its spread; then the geometric means and their ratio."""
    rows, ratios, spreads, means_a, means_b = [], [], [], [], []
    for i, (shape, result) in enumerate(zip(shapes, results)):
        if isinstance(result, str):
            rows.append([str(i), "FAIL", "", "", "", "", shape])
            continue
        a, b = calculate_stats(result.a), calculate_stats(result.b)
        means_a.append(a.mean)
        means_b.append(b.mean)
        ratios.append(result.ratio)
        spreads.append(result.spread)
        rows.append(
            [
                str(i),
                format_time(a.mean),
                format_time(b.mean),
                f"{result.ratio:.3f}",
                _percent(result.spread),
                str(min(a.runs, b.runs)),
                shape,
            ]
        )
    if len(ratios) > 1 and len(ratios) == len(results):
        spread = math.sqrt(sum(s * s for s in spreads)) / len(spreads)
        rows.append(
            [
                "geo",
                format_time(geomean(means_a)),
                format_time(geomean(means_b)),
                f"{geomean(ratios):.3f}",
                _percent(spread),
                "",
                "(geometric mean)",
            ]
        )
    return table(["case", "A mean", "B mean", "B / A", "+- (95%)", "runs", "shape"], rows)


def _percent(relative: float) -> str:
    return "-" if math.isnan(relative) else f"{100 * relative:.1f}%"
