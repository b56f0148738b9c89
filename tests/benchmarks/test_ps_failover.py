"""benchmarks/ps_failover.py reads what the chief and the ps tasks log on a ps loss
(`benchmarks/ps_failover_report.py`, which defines no flags, so it imports beside the
other benchmarks in one test process).

The lines below are the formats `deployment/shard_restore.py`,
`deployment/fault_tolerance.py` and `deployment/cluster_check.py` write (taken from
a run of the benchmark); if one changes, the benchmark's figures would silently
vanish, so its patterns are checked against them here. The whole benchmark (real
jobs, kills) takes minutes and is run by hand (`--quick`: about 4 minutes).
"""

import sys

import pytest

from benchmarks import bench_util
from benchmarks import ps_failover_report as report

_LOG = """\
I1127 03:58:30.100000 1 training_loop.py:163] global step 955, loss = 0.5000, 9.1 steps/sec
I1127 03:58:34.975648 1 cluster_check.py:251] cluster of task ps:1 matches the chief's
W1127 03:58:47.454952 1 shard_restore.py:183] restored the 4 variables of /job:ps/task:1 \
from its snapshot on /job:ps/task:0 (global step 792: 18.6 s, 169 steps old); kept the \
current values of /job:ps/task:0 (5 variables)
W1127 03:58:47.500000 1 shard_restore.py:183] restored the 5 variables of /job:ps/task:0 \
from /tmp/x/train/model.ckpt-700; kept the current values of /job:ps/task:1 (4 variables)
W1127 03:58:50.000000 1 shard_restore.py:183] restored the 135 variables of /job:ps/task:0 \
from its snapshot on /job:ps/task:1 (global step 110: 22.6 s old); kept the current values \
of /job:ps/task:1 (133 variables)
W1127 03:58:54.141170 1 fault_tolerance.py:512] recovered from a lost peer: restored \
global step 961, 0 step(s) lost (/job:ps/task:1 was lost at global step 958)
"""


@pytest.fixture
def log_path(tmp_path):
  path = tmp_path / 'chief0.log'
  path.write_text(_LOG)
  return str(path)


def _since(log_path, pattern):
  """The lines matching `pattern` from the first stamp of the log on."""
  first = report.stamped_lines(log_path, report.PS_BACK, 0)[0][0] - 60
  return report.stamped_lines(log_path, pattern, first)


def test_every_pattern_finds_its_line(log_path):
  (_, back), = _since(log_path, report.PS_BACK)
  assert back.group(1) == '1'
  (_, snap), (_, global_step_shard) = _since(log_path, report.FROM_SNAPSHOT)
  assert snap.groups() == ('1', '792', '18.6', '169')
  # ps 0 held the global step: no steps old to count from.
  assert global_step_shard.groups() == ('0', '110', '22.6', None)
  (_, ckpt), = _since(log_path, report.FROM_CHECKPOINT)
  assert ckpt.groups() == ('0', '700')
  assert [m.group(1) for _, m in _since(log_path, report.KEPT)] == ['0', '1', '1']
  (_, restored), = _since(log_path, report.RESTORED)
  assert restored.groups() == ('961', '0')


def test_lines_before_since_are_left_out(log_path):
  stamps = [t for t, _ in _since(log_path, report.KEPT)]
  assert stamps[1] - stamps[0] == pytest.approx(0.045048, abs=1e-6)
  later = report.stamped_lines(log_path, report.KEPT, stamps[1])
  assert [(t, m.group(1)) for t, m in later] == [(stamps[1], '1'), (stamps[2], '1')]
  assert stamps[2] - stamps[1] == pytest.approx(2.5, abs=1e-6)


def _row(ps, age_secs, back_to_step, kept=True, rollback=0):
  return dict(ps=ps, killed=0.0, back_secs=1.0, kill_to_step=back_to_step + 1,
              back_to_step=back_to_step, source='snapshot', age_secs=age_secs,
              age_logged_secs=age_secs + 5, age_steps=10, other_kept=kept,
              rollback=rollback, loss=(0.5, 0.5))


def _goal_lines(capsys, rows):
  report.summarize({'snapshots': rows}, snapshot_secs=5, recovery_goal_secs=5)
  return [line for line in capsys.readouterr().out.splitlines() if line.startswith('goal ')]


def test_the_table_and_goals_of_a_short_run_resolve_nothing(capsys):
  rows = [_row(1, 4.0, 3.0), _row(0, 12.0, 4.0), _row(1, 6.0, 7.0, rollback=0)]
  report.summarize({'snapshots': rows, 'checkpoint60': []}, snapshot_secs=5,
                   recovery_goal_secs=5)
  out = capsys.readouterr().out
  # 3 kills are fewer than the rule's 5 repeats: even goals every kill reached are
  # not resolved.
  assert 'goal restored shard <= 10 s old: 2 of 3 kills: not resolved' in out
  assert 'goal untouched shard kept: 3 of 3 kills: not resolved' in out
  assert 'goal no global-step rollback when ps 1 is lost: 2 of 2 kills: not resolved' in out
  assert 'goal ps back -> next step <= 5 s: 2 of 3 kills: not resolved' in out
  assert '| checkpoint60 | 0 |' in out
  assert '| snapshots | 3 | 4.00 / 7.00 | 5.00 / 8.00 | snapshot 3 | 12.0 / 10 | 3 of 3 |' in out


def test_the_kill_minimum_is_the_rule_of_every_benchmark():
  assert report.MIN_KILLS_TO_RESOLVE == bench_util.MIN_REPEATS_TO_RESOLVE == 5


def test_four_kills_that_all_reach_every_goal_resolve_nothing(capsys):
  rows = [_row(ps % 2, 4.0, 3.0) for ps in range(4)]
  lines = _goal_lines(capsys, rows)
  assert len(lines) == 4
  assert all(line.endswith(': not resolved') for line in lines), lines
  assert 'goal untouched shard kept: 4 of 4 kills: not resolved' in lines


def test_a_goal_is_met_only_when_every_kill_meets_it(capsys):
  # 5 kills, each reaching every goal, ps 1 lost in 5 of them (the rollback goal
  # counts only those): all met.
  lines = _goal_lines(capsys, [_row(1, 4.0, 3.0) for _ in range(5)])
  assert lines == [
      'goal restored shard <= 10 s old: 5 of 5 kills: met',
      'goal untouched shard kept: 5 of 5 kills: met',
      'goal no global-step rollback when ps 1 is lost: 5 of 5 kills: met',
      'goal ps back -> next step <= 5 s: 5 of 5 kills: met',
  ]
  # One of the 5 fails a goal: that goal is not met (some kills reach it, so not
  # missed either); the others stay met.
  rows = [_row(1, 4.0, 3.0) for _ in range(4)] + [_row(1, 4.0, 7.0)]
  lines = _goal_lines(capsys, rows)
  assert 'goal ps back -> next step <= 5 s: 4 of 5 kills: not resolved' in lines
  assert 'goal untouched shard kept: 5 of 5 kills: met' in lines


def test_a_goal_is_missed_only_when_no_kill_of_enough_meets_it(capsys):
  lines = _goal_lines(capsys, [_row(1, 4.0, 9.0) for _ in range(5)])
  assert 'goal ps back -> next step <= 5 s: 0 of 5 kills: missed' in lines
  lines = _goal_lines(capsys, [_row(1, 4.0, 9.0) for _ in range(4)])
  assert 'goal ps back -> next step <= 5 s: 0 of 4 kills: not resolved' in lines


def test_verdict_follows_the_rule():
  assert report.verdict([True] * 5) == 'met'
  assert report.verdict([False] * 5) == 'missed'
  assert report.verdict([True] * 4 + [False]) == 'not resolved'
  assert report.verdict([True] * 4) == 'not resolved'
  assert report.verdict([False] * 4) == 'not resolved'
  assert report.verdict([]) == 'not resolved'


def test_a_phase_without_kills_resolves_nothing(capsys):
  report.summarize({'snapshots': []}, snapshot_secs=5, recovery_goal_secs=5)
  assert 'every goal not resolved' in capsys.readouterr().out


def _probe(number, first_secs, second_secs=0.5):
  return dict(probe=number, init_secs=first_secs / 2, first_secs=first_secs,
              second_secs=second_secs, load=2.0)


def test_session_floor_reports_the_first_steps_percentiles_and_the_probes_over_the_goal(
    capsys):
  # benchmarks/session_floor.py's summary: the floor is the first step of a new session
  # (not the steady second step), p50 <= p99, the least is the min, and a probe above the
  # goal is counted as above it.
  rows = [_probe(1, 11.2, 0.4), _probe(2, 3.0, 0.6), _probe(3, 14.0, 0.5),
          _probe(4, 7.9, 0.9), _probe(5, 9.0, 0.3)]
  report.floor_report(rows, goal_secs=5)
  lines = capsys.readouterr().out.splitlines()
  assert lines[2:7] == ['| 1 | 5.60 | 11.20 | 0.40 | 2.0 |', '| 2 | 1.50 | 3.00 | 0.60 | 2.0 |',
                        '| 3 | 7.00 | 14.00 | 0.50 | 2.0 |', '| 4 | 3.95 | 7.90 | 0.90 | 2.0 |',
                        '| 5 | 4.50 | 9.00 | 0.30 | 2.0 |']
  assert lines[7] == ('floor (a new session to its first step done): p50 9.00 s, p99 14.00 s, '
                      'min 3.00 s; a steady step p50 0.50 s; above the 5 s recovery goal in 4 '
                      'of 5 probes')
  report.floor_report([_probe(1, 5.0), _probe(2, 5.01)], goal_secs=5)
  assert capsys.readouterr().out.splitlines()[-1].endswith(
      'p50 5.00 s, p99 5.01 s, min 5.00 s; a steady step p50 0.50 s; above the 5 s recovery '
      'goal in 1 of 2 probes')


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
