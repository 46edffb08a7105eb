"""`tune prove`'s table: which figures are compared before and after."""

from __future__ import annotations

from quietcore.tune.prove import table


def test_a_figure_some_rounds_lack_is_not_compared() -> None:
    # GIVEN three rounds each way; the p99.9 is there only in the rounds with 1,000 gaps or more
    def round_(lost: float, p999: float | None) -> dict[str, dict[str, float]]:
        return {"CPU 1": {"lost time": lost, **({"p99.9 gap": p999} if p999 is not None else {})}}

    before = [round_(2.0, 40.0), round_(2.2, None), round_(2.1, 42.0)]
    after = [round_(1.0, 20.0), round_(1.1, 21.0), round_(0.9, 19.0)]
    rows = {(r.where, r.metric): r for r in table({"before": before, "after": after})}
    # THEN lost time, which every round has, is compared; the p99.9 is not: a median of the rounds that had
    # one would set the busier rounds before against every round after
    assert set(rows) == {("CPU 1", "lost time")}
    assert rows["CPU 1", "lost time"].before == 2.1 and rows["CPU 1", "lost time"].after == 1.0
    # AND when every round has it, it is
    before[1] = round_(2.2, 41.0)
    assert ("CPU 1", "p99.9 gap") in {(r.where, r.metric) for r in table({"before": before, "after": after})}
