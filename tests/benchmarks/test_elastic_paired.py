"""benchmarks/elastic_paired.py's table and verdicts (`benchmarks/elastic_paired_report.py`).

The benchmark itself starts ten jobs and takes minutes; it is run by hand.
"""

import sys

import pytest

from benchmarks import elastic_paired_report as report


def _repeat(fresh, join, leave, order='fresh then elastic'):
  return dict(order=order, fresh=fresh, join=join, leave=leave, restarts=0,
              join_secs=17.25, leaver_code=143)


def test_every_repeat_at_the_goal_is_met_and_one_below_leaves_it_unresolved():
  repeats = [_repeat(30.0, 29.0, 31.0) for _ in range(4)] + [_repeat(30.0, 27.0, 30.0)]
  lines = report.report(repeats, batch_size=8, workers=2, goal=0.95)
  # 30 global steps/sec of 8 examples over the chief and 2 workers: 80 per task.
  assert lines[2] == ('| 1 | fresh then elastic | 80.00 | 77.33 | 0.967 | 82.67 | 1.033 | '
                      '17.2 | 143 | 0 |')
  join, leave = lines[-2:]
  assert join.startswith('ratio ex/s per task after a join / a job started at 2 workers = '
                         '0.967 (per repeat 0.967 0.967 0.967 0.967 0.900;')
  assert join.endswith('goal >= 0.95: not resolved')  # 0.900 is below, the rest above
  assert leave.endswith('goal >= 0.95: met')


def test_fewer_than_five_repeats_resolve_nothing():
  lines = report.report([_repeat(30.0, 10.0, 40.0)], batch_size=8, workers=2, goal=0.95)
  assert lines[-2].endswith('not resolved (fewer than 5 repeats)')
  assert lines[-1].endswith('not resolved (fewer than 5 repeats)')


def test_every_repeat_below_the_goal_is_missed():
  lines = report.report([_repeat(30.0, 20.0, 20.0)] * 5, batch_size=8, workers=2, goal=0.95)
  assert lines[-2].endswith('goal >= 0.95: missed')


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
