"""graphssl._progress: "auto" reports a loop only when the measured rate says it is long;
the line says why, with an estimate; True always reports; False never; bad values named."""

from __future__ import annotations

import io
import itertools

import pytest

from graphssl._progress import StepTimer, check_progress


def _clock(step_seconds):
    """A fake clock whose steps take ``step_seconds[i]`` (then the last value)."""
    times = itertools.accumulate(itertools.chain([0.0], step_seconds,
                                                 itertools.repeat(step_seconds[-1])))
    return lambda: next(times)


def _run(progress, step_seconds, total=20):
    stream = io.StringIO()
    timer = StepTimer(progress, total=total, desc="chains",
                      why="a sweep costs O(m^2 C); n_iterations=100 shortens it",
                      clock=_clock(step_seconds), stream=stream)
    items = []
    for step in range(total):
        items.append(step)
        timer.tick()
    timer.close()
    return items, stream.getvalue()


def test_auto_reports_a_long_loop_with_its_estimate_and_reason():
    # the first step compiles (5 s), then 1 s a step: 17 steps left after three = 17 s
    items, text = _run("auto", [5.0, 1.0])
    assert items == list(range(20))
    line = text.splitlines()[0]
    assert line.startswith("chains: about 17 s more after 7 s (3 of 20 steps done)")
    assert "O(m^2 C)" in line and "n_iterations=100" in line


def test_auto_is_silent_on_a_short_loop_and_counts_a_slow_first_step():
    items, text = _run("auto", [0.2, 0.1])  # 2.1 s in all
    assert items == list(range(20)) and text == ""
    _, text = _run("auto", [30.0, 0.1])  # the wait so far counts: compilation, say
    assert text.startswith("chains: about 2 s more after 30 s (3 of 20 steps done)")
    _, text = _run("auto", [30.0, 0.1], total=2)  # nothing left to report on
    assert text == ""


def test_true_always_reports_and_false_never():
    _, text = _run(True, [0.01])
    assert "chains: about" in text
    _, text = _run(False, [100.0])
    assert text == ""
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="progress"):
            check_progress(bad)
