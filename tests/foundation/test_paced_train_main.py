"""tests/trainer/paced_train_main.py: a step lasts at least the pace; the last never waits."""

import sys
import time

import pytest

from tests.trainer import paced_train_main


class _Runner:
  """Stands in for a TrainStepRunner: `__call__` returns (loss, should_stop) at once."""

  def __init__(self, stop_at):
    self.calls = 0
    self._stop_at = stop_at

  def step(self, *unused_args):
    self.calls += 1
    return float(self.calls), self.calls >= self._stop_at


def test_each_step_lasts_the_pace_and_keeps_what_the_step_returned():
  paced = paced_train_main.paced(_Runner.step, 0.2)
  runner = _Runner(stop_at=10)
  started = time.monotonic()
  results = [paced(runner, 'sess', 'train_op', 'global_step', {}) for _ in range(3)]
  elapsed = time.monotonic() - started
  assert results == [(1.0, False), (2.0, False), (3.0, False)]
  # Three paced steps: never sooner than three paces (sleep does not end early).
  assert elapsed >= 3 * 0.2


def test_the_step_that_ends_training_returns_at_once():
  paced = paced_train_main.paced(_Runner.step, 30.0)
  runner = _Runner(stop_at=1)
  started = time.monotonic()
  assert paced(runner, 'sess', 'train_op', 'global_step', {}) == (1.0, True)
  assert time.monotonic() - started < 30.0


def test_a_step_slower_than_the_pace_is_not_slowed_further():
  durations = []

  def slow_step(unused_self, *unused_args):
    started = time.monotonic()
    time.sleep(2.0)
    durations.append(time.monotonic() - started)
    return 0.5, False

  started = time.monotonic()
  assert paced_train_main.paced(slow_step, 1.0)(None) == (0.5, False)
  # A pace slept on top of the 2 s step would add a whole second.
  assert time.monotonic() - started - durations[0] < 1.0


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
