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


def test_a_goal_is_met_only_when_every_kill_meets_it(capsys):
  rows = [_row(1, 4.0, 3.0), _row(0, 12.0, 4.0), _row(1, 6.0, 7.0, rollback=0)]
  report.summarize({'snapshots': rows, 'checkpoint60': []}, snapshot_secs=5,
                   recovery_goal_secs=5)
  out = capsys.readouterr().out
  assert 'goal restored shard <= 10 s old: 2 of 3 kills: not resolved' in out
  assert 'goal untouched shard kept: 3 of 3 kills: met' in out
  assert 'goal no global-step rollback when ps 1 is lost: 2 of 2 kills: met' in out
  assert 'goal ps back -> next step <= 5 s: 2 of 3 kills: not resolved' in out
  assert '| checkpoint60 | 0 |' in out
  assert '| snapshots | 3 | 4.00 / 7.00 | 5.00 / 8.00 | snapshot 3 | 12.0 / 10 | 3 of 3 |' in out


def test_a_phase_without_kills_resolves_nothing(capsys):
  report.summarize({'snapshots': []}, snapshot_secs=5, recovery_goal_secs=5)
  assert 'every goal not resolved' in capsys.readouterr().out


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
