"""tools/file_seconds.py and the suite's longest-files-first order."""

import sys

import pytest

from tests import conftest
from tools import file_seconds

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


class _Item:

  def __init__(self, nodeid):
    self.nodeid = nodeid


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


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
