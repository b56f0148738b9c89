"""tools/file_seconds.py and the suite's longest-files-first order."""

import io
import json
import os
import subprocess
import sys

import pytest

from tests import conftest
from tests import cpu_seconds
from tools import file_seconds

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_REPORT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.evaluation.test_demo" name="test_a" time="400.5"/>
<testcase classname="tests.evaluation.test_demo" name="test_b" time="0.5"/>
<testcase classname="tests.compat.test_compat.LayersTest" name="test_c" time="2.25"/>
<testcase classname="tests.test_build_targets" name="test_d" time="1"/>
</testsuite></testsuites>
'''


def test_seconds_are_summed_per_file_with_testcase_classes(tmp_path):
  report = tmp_path / 'suite.xml'
  report.write_text(_REPORT)
  assert file_seconds.seconds_per_file(str(report)) == {
      'tests/compat/test_compat.py': 2.2,  # round(2.25, 1): banker's rounding.
      'tests/evaluation/test_demo.py': 401.0,
      'tests/test_build_targets.py': 1.0,
  }


def test_tests_of_a_second_or_more_are_recorded_under_their_node_ids(tmp_path):
  report = tmp_path / 'suite.xml'
  report.write_text(_REPORT)
  assert file_seconds.seconds_per_test(str(report)) == {
      'tests/compat/test_compat.py::LayersTest::test_c': 2.2,
      'tests/evaluation/test_demo.py::test_a': 400.5,
      'tests/test_build_targets.py::test_d': 1.0,
  }


def test_tier_totals_split_the_cpu_seconds_by_marker(tmp_path):
  (tmp_path / 'pytest.ini').write_text('[pytest]\nmarkers =\n  cluster: c\n  slow: s\n')
  (tmp_path / 'tests').mkdir()
  (tmp_path / 'tests' / 'test_tiers.py').write_text(
      'import pytest\n\n'
      '@pytest.mark.cluster\n@pytest.mark.slow\ndef test_job():\n  pass\n\n'
      '@pytest.mark.slow\ndef test_demo():\n  pass\n\n'
      'def test_unit():\n  pass\n')
  report = tmp_path / 'suite.xml'
  report.write_text(
      '<testsuites><testsuite name="pytest">' + ''.join(
          '<testcase classname="tests.test_tiers" name="%s" time="1"><properties>'
          '<property name="cpu_seconds" value="%s"/></properties></testcase>' % (name, cpu)
          for name, cpu in (('test_job', '40.5'), ('test_demo', '7'), ('test_unit', '1.25'),
                            ('test_gone', '3'))) + '</testsuite></testsuites>')
  out = io.StringIO()
  file_seconds.print_tier_totals(str(report), out=out, root=str(tmp_path / 'tests'))
  assert out.getvalue().splitlines()[2:] == [
      '| cluster | 1 | 40 |',  # '%.0f' % 40.5: banker's rounding.
      '| slow, not cluster | 1 | 7 |',
      '| unit (neither) | 1 | 1 |',
      '| not collected now | 1 | 3 |',
      '| all | 4 | 52 |',
  ]


class _Item:

  def __init__(self, nodeid):
    self.nodeid = nodeid


class _Hooks:

  def __init__(self):
    self.deselected = []

  def pytest_deselected(self, items):
    self.deselected.extend(items)


class _Config:

  def __init__(self):
    self.hook = _Hooks()


def test_max_test_seconds_leaves_out_the_longer_tests_and_reports_them(tmp_path, monkeypatch):
  table = tmp_path / 'test_seconds.json'
  table.write_text('{"tests/a.py::t1": 2.9, "tests/a.py::t2": 3.1, "tests/b.py::C::t[x]": 40}')
  monkeypatch.setattr(conftest, '_TEST_SECONDS', str(table))
  items = [_Item(n) for n in ('tests/a.py::t1', 'tests/a.py::t2', 'tests/b.py::C::t[x]',
                              'tests/b.py::C::t[y]', 'tests/new.py::t')]
  config = _Config()
  conftest._without_long_tests(config, items, 3.0)
  assert [i.nodeid for i in items] == ['tests/a.py::t1', 'tests/b.py::C::t[y]', 'tests/new.py::t']
  assert [i.nodeid for i in config.hook.deselected] == ['tests/a.py::t2', 'tests/b.py::C::t[x]']


def test_max_test_seconds_without_its_table_is_a_usage_error(tmp_path, monkeypatch):
  monkeypatch.setattr(conftest, '_TEST_SECONDS', str(tmp_path / 'missing.json'))
  with pytest.raises(pytest.UsageError, match='missing.json'):
    conftest._without_long_tests(_Config(), [_Item('tests/a.py::t')], 3.0)


def test_the_committed_tables_agree():
  # Both come from one report: every recorded test's file has a file time.
  with open(conftest._TEST_SECONDS) as f:
    tests = json.load(f)
  with open(conftest._FILE_SECONDS) as f:
    files = json.load(f)
  assert tests and all(seconds >= file_seconds.RECORDED_FROM_SECS for seconds in tests.values())
  assert {node.split('::')[0] for node in tests} <= set(files)


def test_longest_files_start_first_and_tests_keep_their_order_in_a_file(tmp_path, monkeypatch):
  table = tmp_path / 'file_seconds.json'
  table.write_text('{"tests/b.py": 5, "tests/c.py": 50}')
  monkeypatch.setattr(conftest, '_FILE_SECONDS', str(table))
  items = [_Item(n) for n in ('tests/a.py::t1', 'tests/b.py::t2', 'tests/b.py::t1',
                              'tests/c.py::t9', 'tests/d.py::t1', 'tests/a.py::t0')]
  conftest._longest_files_first(items)
  assert [i.nodeid for i in items] == [
      'tests/c.py::t9', 'tests/b.py::t2', 'tests/b.py::t1',
      'tests/a.py::t1', 'tests/a.py::t0', 'tests/d.py::t1']


_CPU_REPORT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.trainer.test_cluster_faults" name="test_a" time="60.0">
<properties><property name="cpu_seconds" value="12.50"/></properties></testcase>
<testcase classname="tests.trainer.test_cluster_faults" name="test_b" time="40.0">
<properties><property name="cpu_seconds" value="7.50"/></properties></testcase>
<testcase classname="tests.compat.test_compat" name="test_c" time="30.0">
<properties><property name="cpu_seconds" value="45.00"/></properties></testcase>
<testcase classname="tests.test_build_targets" name="test_d" time="2.0"/>
</testsuite></testsuites>
'''


def test_cpu_table_sums_each_files_cpu_property_most_cpu_first(tmp_path):
  report = tmp_path / 'suite.xml'
  report.write_text(_CPU_REPORT)
  assert file_seconds.wall_and_cpu_per_file(str(report)) == {
      'tests/compat/test_compat.py': (30.0, 45.0),
      'tests/test_build_targets.py': (2.0, 0.0),
      'tests/trainer/test_cluster_faults.py': (100.0, 20.0),
  }
  out = io.StringIO()
  file_seconds.print_cpu_table(str(report), out)
  rows = out.getvalue().splitlines()[2:]
  assert rows == ['| tests/compat/test_compat.py | 30 | 45 | 1.50 |',
                  '| tests/trainer/test_cluster_faults.py | 100 | 20 | 0.20 |',
                  '| tests/test_build_targets.py | 2 | 0 | 0.00 |',
                  '| all 3 files | 132 | 65 | 0.49 |']


def _run_tool(*args):
  return subprocess.run([sys.executable, os.path.join(_REPO_ROOT, 'tools', 'file_seconds.py'),
                         *args], cwd=_REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_help_exits_0_and_says_how_to_get_the_report():
  result = _run_tool('--help')
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.startswith('usage: tools/file_seconds.py'), result.stdout[:500]
  assert "make test PYTEST_ARGS='" in result.stdout and '--junitxml=' in result.stdout
  assert 'Traceback' not in result.stderr


def test_a_command_line_without_a_report_is_a_usage_error_not_a_crash():
  for args in ((), ('--cpu',), ('--cpu', '--tiers', 'suite.xml')):
    result = _run_tool(*args)
    assert result.returncode == 2, (args, result.stderr[-3000:])
    assert result.stderr.startswith('usage: tools/file_seconds.py'), (args, result.stderr)
    assert 'Traceback' not in result.stderr, (args, result.stderr)


def test_cpu_flag_prints_the_table_of_the_report_it_names(tmp_path):
  report = tmp_path / 'suite.xml'
  report.write_text(_CPU_REPORT)
  result = _run_tool('--cpu', str(report))
  assert result.returncode == 0, result.stderr[-3000:]
  assert '| all 3 files | 132 | 65 | 0.49 |' in result.stdout, result.stdout


def test_the_suite_records_each_tests_cpu_seconds_its_processes_included(tmp_path):
  # A real pytest run with the suite's plugin: a test whose child process
  # spins for about a second of CPU, and one that sleeps as long.
  tests_dir = tmp_path / 'cases'
  tests_dir.mkdir()
  (tests_dir / 'test_spin.py').write_text(
      'import subprocess, sys, time\n'
      'def test_child_spins():\n'
      '  subprocess.run([sys.executable, "-c", "import time\\n'
      't = time.process_time()\\nwhile time.process_time() - t < 1.0: pass"], check=True)\n'
      'def test_sleeps():\n'
      '  time.sleep(1.0)\n')
  report = tmp_path / 'suite.xml'
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-p', 'tests.cpu_seconds',
       '--rootdir', str(tmp_path), '--junitxml=%s' % report, str(tests_dir)],
      cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
      env=dict(os.environ, PYTHONPATH=_REPO_ROOT))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  cpu = {test: float(prop.get('value'))
         for _, test, case in file_seconds._testcases(str(report))
         for prop in case.iter('property') if prop.get('name') == 'cpu_seconds'}
  assert set(cpu) == {'test_child_spins', 'test_sleeps'}, cpu
  # The child's second of CPU counts (plus its interpreter's start-up); the
  # sleep costs next to none.
  assert 1.0 <= cpu['test_child_spins'] < 3.0, cpu
  assert cpu['test_sleeps'] < 0.2, cpu
  # The suite's conftest carries the same hooks.
  assert conftest.pytest_runtest_makereport is cpu_seconds.pytest_runtest_makereport
  assert conftest.pytest_runtest_setup is cpu_seconds.pytest_runtest_setup


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
