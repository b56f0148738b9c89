"""Writes tests/file_seconds.json: seconds per test file from a pytest junit report.

The suite's conftest starts the files that take longest first, so that
`make test`'s workers finish together. Refresh the table after a
whole-suite run when files grow or move:

    .venv/bin/python -m pytest tests -q -n 2 --dist loadfile --junitxml=/tmp/suite.xml
    .venv/bin/python tools/file_seconds.py /tmp/suite.xml

Setup and teardown count with their test (module fixtures included).
"""

import collections
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

_TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'tests', 'file_seconds.json')


def seconds_per_file(junit_path):
  """Sums each test file's testcase times.

  Args:
    junit_path: a pytest `--junitxml` report.

  Returns:
    {'tests/dir/test_x.py': seconds}, rounded to a tenth.
  """
  totals = collections.defaultdict(float)
  for case in ElementTree.parse(junit_path).getroot().iter('testcase'):
    # classname is the dotted module path, then a TestCase class if any.
    parts = case.get('classname', '').split('.')
    while parts and not parts[-1].startswith('test_'):
      parts.pop()
    if parts:
      totals['/'.join(parts) + '.py'] += float(case.get('time', 0.0))
  return {name: round(value, 1) for name, value in sorted(totals.items())}


def main(argv):
  if len(argv) != 2:
    sys.exit('usage: tools/file_seconds.py JUNIT_XML')
  table = seconds_per_file(argv[1])
  with open(_TABLE + '.tmp', 'w') as f:
    json.dump(table, f, indent=1, sort_keys=True)
    f.write('\n')
  os.replace(_TABLE + '.tmp', _TABLE)
  print('%d files, %.0f s in all -> %s' % (len(table), sum(table.values()), _TABLE))


if __name__ == '__main__':
  main(sys.argv)
