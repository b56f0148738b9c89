"""tools/task_cpu.py: a forked and a fresh chief + worker + ps job, each task's CPU seconds."""

import sys

import pytest

from tests import fork_server
from tools import task_cpu

pytestmark = [pytest.mark.cluster]


def _rows(output):
  """The table's data rows as [start, repeat, ps0, chief0, worker0, job] strings."""
  lines = output.splitlines()
  assert lines[:2] == ['| start | repeat | ps0 | chief0 | worker0 | job |',
                       '| --- | --- | --- | --- | --- | --- |'], output
  return [line.strip('| ').split(' | ') for line in lines[2:]]


def test_a_forked_and_a_fresh_job_report_every_task_and_the_fresh_one_costs_more(
    capsys, monkeypatch):
  # As in a whole-suite worker whose shared fork servers are all taken (CI,
  # 2026-11-28): the forked job must still be forked.
  monkeypatch.setattr(fork_server, 'MAX_SERVERS', 0)
  task_cpu.main(['--steps=2', '--repeats=1'])
  rows = _rows(capsys.readouterr().out)
  assert [row[:2] for row in rows] == [['forked', '1'], ['fresh', '1']]
  jobs = {}
  for start, _, *seconds in rows:
    tasks, job = [float(s) for s in seconds[:3]], float(seconds[3])
    # Every task built its graph and ran a session: no task can cost nothing.
    assert min(tasks) > 0.1, rows
    assert job == pytest.approx(sum(tasks), abs=0.2), rows
    jobs[start] = job
  # A fresh task imports TensorFlow itself; a forked one inherited it.
  assert jobs['fresh'] > jobs['forked'], rows


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-v']))
