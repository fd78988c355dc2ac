"""Progress for long fits: a bar, and one line up front saying why the fit takes long.

``progress="auto"`` (the estimators' default) times the steps of a long loop (the
diffusion mixture's checkpoints, the Boltzmann MRF's coupling grid). Once three steps are
done (two in a loop of three or fewer; the first two may hold compilation), the remaining
ones at the latest step's rate give an estimate; if the time spent plus the estimate exceeds
:data:`LONG_RUN_SECONDS` while steps remain, one line goes to stderr -- what runs, why it
costs what it does, the time so far and the estimate, and the setting that shortens it --
and a tqdm bar covers the rest. Short loops print nothing. ``True`` shows the bar from the
first step (and the line once the estimate is known); ``False`` shows nothing.
"""

from __future__ import annotations

import sys
import time

__all__ = ["LONG_RUN_SECONDS", "StepTimer", "check_progress"]

LONG_RUN_SECONDS = 10.0  # issue 25, item 5: a default fit longer than this shows progress


def check_progress(progress) -> None:
    """Raise on a ``progress`` setting other than ``"auto"``, True or False."""
    if not (progress == "auto" or isinstance(progress, bool)):
        raise ValueError(f"progress: use 'auto', True or False, got {progress!r}")


class StepTimer:
    """Reports a loop of ``total`` steps as ``progress`` asks (module docstring): call
    :meth:`tick` after each step, :meth:`close` at the end (a loop that stops early leaves
    the bar short).

    Args:
      progress: ``"auto"``, True or False.
      total: the loop's steps (at most).
      desc: the bar's label; why: the line's reason and remedy, e.g. ``"a sweep costs
        O(m^2 C) ...; n_iterations=200 shortens it"``.
      threshold: seconds above which ``"auto"`` reports.
      clock, stream: the timer and the text stream (stderr), for tests.
    """

    def __init__(self, progress, *, total: int, desc: str, why: str,
                 threshold: float = LONG_RUN_SECONDS, clock=time.perf_counter, stream=None):
        check_progress(progress)
        self.progress, self.total, self.desc, self.why = progress, int(total), desc, why
        self.threshold, self.clock = float(threshold), clock
        self.stream = sys.stderr if stream is None else stream
        self.bar = _bar(self.total, desc, self.stream) if progress is True else None
        self.announced = False
        self.done = 0
        self.start = self.last = clock()

    def tick(self) -> None:
        """One step is done."""
        self.done += 1
        now = self.clock()
        # the first step may compile, and so may the second (a resumed scan): the rate is
        # read from the third step on, where there are more than three
        first_read = 3 if self.total > 3 else 2
        if self.progress is not False and not self.announced and self.done >= first_read:
            remaining = (now - self.last) * (self.total - self.done)  # this step's rate
            if self.progress is True or (self.done < self.total
                                         and now - self.start + remaining > self.threshold):
                self._announce(remaining, now)
        self.last = now
        if self.bar is not None:
            self.bar.update(1)

    def _announce(self, remaining: float, now: float) -> None:
        self.announced = True
        line = (f"{self.desc}: about {remaining:.0f} s more after {now - self.start:.0f} s "
                f"({self.done} of {self.total} steps done); {self.why}")
        if self.bar is None:  # "auto": the line, then a bar for the rest
            self.stream.write(line + "\n")
            self.stream.flush()
            self.bar = _bar(self.total, self.desc, self.stream)
            self.bar.update(self.done - 1)
        else:  # above the bar, which tqdm redraws below it
            self.bar.write(line, file=self.stream)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _bar(total: int, desc: str, stream):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, file=stream, leave=False)
