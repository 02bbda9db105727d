"""Round-robin timings: every run warmed up once, then timed ``repeats`` times, the fastest kept."""

import time

import pytest

from laya.analysis.timing import fastest_seconds


def test_each_run_is_warmed_up_then_timed_and_its_fastest_kept() -> None:
    calls = {"quick": 0, "slow": 0}

    def run(name: str, seconds: float):
        def call() -> None:
            calls[name] += 1
            time.sleep(seconds if calls[name] > 1 else 0.05)  # the warm-up is the slowest call

        return call

    quick, slow = fastest_seconds([run("quick", 0.0), run("slow", 0.02)], repeats=3)
    assert calls == {"quick": 4, "slow": 4}  # one warm-up and three timings each
    assert quick < 0.015 <= 0.02 <= slow < 0.05  # the warm-up's 0.05 s is never the one kept
    count = []
    (short,) = fastest_seconds([lambda: count.append(time.sleep(0.001))], repeats=2, min_seconds=0.02)
    assert len(count) > 1 + 2 and short >= 0.001  # 1 ms calls: several per timing, the time per call
    with pytest.raises(ValueError, match="repeats >= 1"):
        fastest_seconds([run("quick", 0.0)], repeats=0)
