"""benchmarks/distributed.py times a cluster over one global-step range all workers share.

The old figure summed per-worker windows that did not overlap: a non-chief
that joined late left the chief's window to the chief alone, so the cluster
looked faster than it was. These checks feed `aligned_window_rate` made-up
logs with a known answer.
"""

import sys

import pytest

from benchmarks import distributed


def _ticks(start_time, start_step, seconds_per_step, count, step_stride=1):
  return [(start_time + i * seconds_per_step, start_step + i * step_stride)
          for i in range(count)]


def test_late_worker_the_range_starts_when_it_has_warmed_up():
  # The chief trains alone for 100 global steps at 10 steps/s; then worker 1
  # joins and the two together make 20 global steps/s.
  chief_alone = _ticks(0.0, 1, 0.1, 100)
  chief_shared = _ticks(10.0, 102, 0.1, 100, step_stride=2)
  worker = _ticks(10.05, 103, 0.1, 100, step_stride=2)
  rate, (first, last, seconds), per_worker = distributed.aligned_window_rate(
      [chief_alone + chief_shared, worker], warm_steps=[10, 121], span=40,
      examples_per_global_step=8)
  assert first >= 121 and last - first >= 40
  # 20 global steps/s x 8 examples; the chief-alone part (10 steps/s) is not in it.
  assert rate == pytest.approx(160.0, rel=1e-6)
  assert seconds == pytest.approx((last - first) / 20.0, rel=1e-6)
  assert all(n >= 19 for n in per_worker), per_worker


def test_range_not_reached_yet_gives_none():
  ticks = [_ticks(0.0, 1, 0.1, 30)]
  assert distributed.aligned_window_rate(ticks, [10], span=40,
                                         examples_per_global_step=8) is None


def test_a_worker_without_steps_in_the_range_is_an_error():
  chief = _ticks(0.0, 1, 0.1, 200)
  stalled = _ticks(0.0, 1, 0.1, 11)  # Warmed up at step 11, then made no further step.
  with pytest.raises(ValueError, match='a worker made no step inside the range'):
    distributed.aligned_window_rate([chief, stalled], [10, 11], span=40,
                                    examples_per_global_step=8)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
