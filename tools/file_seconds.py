"""Writes the suite's timing tables from a pytest junit report.

* `tests/file_seconds.json`: seconds per test file. The suite's conftest
  starts the files that take longest first, so that `make test`'s workers
  finish together.
* `tests/test_seconds.json`: seconds per test, for the tests that took
  `RECORDED_FROM_SECS` or more. `make test-fast` leaves out the tests that
  took longer than its limit (`--max-test-seconds`).

Refresh both after a whole-suite run when files grow or move. The report is
pytest's `--junitxml` file of that run; `make test` writes one when its pytest
arguments ask for it (PYTEST_ARGS replaces the Makefile's default arguments,
so repeat them), and the suite's conftest adds each test's CPU seconds to it:

    make test PYTEST_ARGS='-n 3 --dist loadfile --no-loadscope-reorder --junitxml=/tmp/suite.xml'
    .venv/bin/python tools/file_seconds.py /tmp/suite.xml

(or, without make: `.venv/bin/python -m pytest tests -q -n 3 --dist loadfile
--no-loadscope-reorder --junitxml=/tmp/suite.xml`). `--help` prints this text.

Setup and teardown count with their test (module fixtures included), so a
file's first test carries the fixtures it shares with the others.

`--tiers` prints the CPU seconds of the report's tests by tier: `cluster`
(real multi-process jobs), `slow` (not cluster) and the unit tier, which
`make test-fast` draws from. It asks pytest which tests carry each marker
(`--collect-only`), so run it on a checkout of the report's tree:

    .venv/bin/python tools/file_seconds.py --tiers /tmp/suite.xml

`--cpu` prints, instead of writing the tables, each file's wall seconds beside
its CPU seconds (the `cpu_seconds` property the suite's conftest records per
test, child processes included): on a loaded machine a file that waits costs
the others little, one that computes costs them its CPU.

    .venv/bin/python tools/file_seconds.py --cpu /tmp/suite.xml
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

_TESTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests')
_FILE_TABLE = os.path.join(_TESTS_DIR, 'file_seconds.json')
_TEST_TABLE = os.path.join(_TESTS_DIR, 'test_seconds.json')

# Faster tests are left out of test_seconds.json: every limit worth using is above it.
RECORDED_FROM_SECS = 1.0


def _testcases(junit_path):
  """Yields (file, test id within the file, testcase element) for each testcase."""
  for case in ElementTree.parse(junit_path).getroot().iter('testcase'):
    # classname is the dotted module path, then a TestCase class if any.
    parts = case.get('classname', '').split('.')
    classes = []
    while parts and not parts[-1].startswith('test_'):
      classes.insert(0, parts.pop())
    if parts:
      yield '/'.join(parts) + '.py', '::'.join(classes + [case.get('name', '')]), case


def _cpu_seconds(case):
  """A testcase's `cpu_seconds` property (tests/cpu_seconds.py), or 0 without one."""
  return sum(float(prop.get('value')) for prop in case.iter('property')
             if prop.get('name') == 'cpu_seconds')


def _cases(junit_path):
  """Yields (file, test id within the file, seconds) for each testcase of the report."""
  for path, test, case in _testcases(junit_path):
    yield path, test, float(case.get('time', 0.0))


def wall_and_cpu_per_file(junit_path):
  """Each file's wall and CPU seconds, from the testcases' `cpu_seconds` properties.

  Args:
    junit_path: a pytest `--junitxml` report written with the suite's conftest.

  Returns:
    {'tests/dir/test_x.py': (wall seconds, CPU seconds)}, each rounded to a tenth;
    a testcase without the property counts 0 CPU seconds.
  """
  totals = collections.defaultdict(lambda: [0.0, 0.0])
  for path, _, case in _testcases(junit_path):
    totals[path][0] += float(case.get('time', 0.0))
    totals[path][1] += _cpu_seconds(case)
  return {name: (round(wall, 1), round(cpu, 1)) for name, (wall, cpu) in sorted(totals.items())}


def print_cpu_table(junit_path, out=sys.stdout):
  """Prints wall and CPU seconds per file, the most CPU first, and the totals."""
  table = wall_and_cpu_per_file(junit_path)
  out.write('| file | wall s | CPU s | CPU / wall |\n| --- | --- | --- | --- |\n')
  for name, (wall, cpu) in sorted(table.items(), key=lambda item: -item[1][1]):
    out.write('| %s | %.0f | %.0f | %.2f |\n' % (name, wall, cpu, cpu / wall if wall else 0.0))
  wall = sum(w for w, _ in table.values())
  cpu = sum(c for _, c in table.values())
  out.write('| all %d files | %.0f | %.0f | %.2f |\n' % (len(table), wall, cpu,
                                                         cpu / wall if wall else 0.0))


def cpu_per_test(junit_path):
  """{pytest node id: CPU seconds} of the report (0 for a testcase without the property)."""
  return {'%s::%s' % (path, test): _cpu_seconds(case)
          for path, test, case in _testcases(junit_path)}


def collected(marker_expression, root=_TESTS_DIR):
  """The node ids of the tests `pytest -m marker_expression` selects (collection only)."""
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', root, '-q', '-p', 'no:cacheprovider', '--collect-only',
       '-m', marker_expression], cwd=os.path.dirname(root), capture_output=True, text=True,
      check=False)
  if result.returncode not in (0, 5):  # 5: nothing selected
    raise RuntimeError('pytest --collect-only -m %r failed:\n%s' % (
        marker_expression, (result.stdout + result.stderr)[-3000:]))
  return {line.strip() for line in result.stdout.splitlines() if '::' in line}


TIERS = (('cluster', 'cluster'), ('slow, not cluster', 'slow and not cluster'),
         ('unit (neither)', 'not slow and not cluster'))


def print_tier_totals(junit_path, out=sys.stdout, root=_TESTS_DIR):
  """Prints tests and CPU seconds per tier (TIERS), and the report's tests no tier holds.

  Args:
    junit_path: a pytest `--junitxml` report written with the suite's conftest.
    out: where the table goes.
    root: the tests folder to collect (its parent is the rootdir of the node ids).
  """
  cpu = cpu_per_test(junit_path)
  out.write('| tier | tests | CPU s |\n| --- | --- | --- |\n')
  placed = set()
  for label, expression in TIERS:
    ids = collected(expression, root) & set(cpu)
    placed |= ids
    out.write('| %s | %d | %.0f |\n' % (label, len(ids), sum(cpu[i] for i in ids)))
  rest = set(cpu) - placed
  if rest:
    out.write('| not collected now | %d | %.0f |\n' % (len(rest), sum(cpu[i] for i in rest)))
  out.write('| all | %d | %.0f |\n' % (len(cpu), sum(cpu.values())))


def seconds_per_file(junit_path):
  """Sums each test file's testcase times.

  Args:
    junit_path: a pytest `--junitxml` report.

  Returns:
    {'tests/dir/test_x.py': seconds}, rounded to a tenth.
  """
  totals = collections.defaultdict(float)
  for path, _, seconds in _cases(junit_path):
    totals[path] += seconds
  return {name: round(value, 1) for name, value in sorted(totals.items())}


def seconds_per_test(junit_path):
  """Each test's time, for the tests that took `RECORDED_FROM_SECS` or more.

  Args:
    junit_path: a pytest `--junitxml` report.

  Returns:
    {'tests/dir/test_x.py::[Class::]test_name[param]': seconds}, rounded to a tenth
    (the keys are pytest node ids).
  """
  return {'%s::%s' % (path, test): round(seconds, 1)
          for path, test, seconds in sorted(_cases(junit_path))
          if seconds >= RECORDED_FROM_SECS}


def _write(table, path):
  with open(path + '.tmp', 'w') as f:
    json.dump(table, f, indent=1, sort_keys=True)
    f.write('\n')
  os.replace(path + '.tmp', path)


def _parse_args(argv):
  parser = argparse.ArgumentParser(
      prog='tools/file_seconds.py', description=__doc__,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  what = parser.add_mutually_exclusive_group()
  what.add_argument('--cpu', action='store_true',
                    help="print each file's wall and CPU seconds; write no table")
  what.add_argument('--tiers', action='store_true',
                    help='print the CPU seconds per tier (cluster, slow, unit); write no table')
  parser.add_argument('junit_xml', metavar='JUNIT_XML', help="a whole-suite pytest --junitxml "
                      "report (see above for how to get one)")
  return parser.parse_args(argv[1:])


def main(argv):
  args = _parse_args(argv)
  if args.cpu:
    print_cpu_table(args.junit_xml)
    return
  if args.tiers:
    print_tier_totals(args.junit_xml)
    return
  files = seconds_per_file(args.junit_xml)
  _write(files, _FILE_TABLE)
  tests = seconds_per_test(args.junit_xml)
  _write(tests, _TEST_TABLE)
  print('%d files, %.0f s in all -> %s; %d tests of %.0f s or more -> %s' % (
      len(files), sum(files.values()), _FILE_TABLE, len(tests), RECORDED_FROM_SECS,
      _TEST_TABLE))


if __name__ == '__main__':
  main(sys.argv)
