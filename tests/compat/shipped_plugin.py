"""pytest plugin that runs tf-slim's shipped tests with slimtrain's compat layer.

`tests/compat/test_tf_slim_shipped.py` starts one pytest process per shipped
tf-slim test module, loading this plugin with `-p tests.compat.shipped_plugin`:

    PYTHONPATH=/path/to/slimtrain SLIMTRAIN_SHIPPED_REPORT=/tmp/r.json \\
      SLIMTRAIN_SHIPPED_XFAIL=/tmp/xfail.txt \\
      python -m pytest -p tests.compat.shipped_plugin \\
      .venv/lib/python3.X/site-packages/tf_slim/learning_test.py

The plugin

* imports `core.compat` before pytest collects (imports) the test module, so
  tf-slim runs exactly as it does inside slimtrain (and, with
  `SLIMTRAIN_DISABLE_COMPAT=1`, exactly as it does without the layer);
* marks every test id listed in the file named by `SLIMTRAIN_SHIPPED_XFAIL`
  (one id per line, ids relative to the `tf_slim` package, e.g.
  `learning_test.py::TrainTest::testX`) as a strict expected failure, so an
  expected failure that starts passing fails the run;
* provides a stand-in for `nose.tools.nottest` when nose is not installed:
  `evaluation_test.py` imports it only to mark a helper as "not a test", and
  nose (unmaintained, not a slimtrain dependency) is absent here;
* writes `{test_id: outcome}` to the JSON file named by
  `SLIMTRAIN_SHIPPED_REPORT`, outcome one of `passed`, `failed`, `skipped`,
  `xfailed`, `xpassed`.
"""

import json
import os
import sys
import types

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from core import compat  # noqa: E402,F401  (must precede the test module's tf_slim import)

_OUTCOMES = {}


def _install_nose_stand_in():
  """Registers a minimal `nose.tools` (only `nottest`) if nose is missing.

  `nottest(f)` sets `f.__test__ = False`, which pytest honours too.
  """
  try:
    import nose.tools  # noqa: F401
    return
  except ImportError:
    pass

  def nottest(func):
    func.__test__ = False
    return func

  nose = types.ModuleType('nose')
  tools = types.ModuleType('nose.tools')
  tools.nottest = nottest
  nose.tools = tools
  sys.modules['nose'] = nose
  sys.modules['nose.tools'] = tools


_install_nose_stand_in()


def _short_id(nodeid):
  """Returns `nodeid` relative to the tf_slim package directory.

  Args:
    nodeid: a pytest node id, e.g. `tf_slim/learning_test.py::T::testX` or
      an absolute path form of it.

  Returns:
    The id starting after the last `tf_slim/`, e.g. `learning_test.py::T::testX`.
  """
  marker = 'tf_slim/'
  index = nodeid.rfind(marker, 0, nodeid.find('::') if '::' in nodeid else None)
  return nodeid[index + len(marker):] if index >= 0 else nodeid


def _expected_failures():
  """Reads the expected-failure ids named by SLIMTRAIN_SHIPPED_XFAIL.

  Returns:
    A set of short test ids (see `_short_id`); empty when the variable is unset.
  """
  path = os.environ.get('SLIMTRAIN_SHIPPED_XFAIL')
  if not path:
    return set()
  with open(path) as f:
    return {line.strip() for line in f if line.strip()}


def pytest_collection_modifyitems(config, items):
  """Marks the listed test ids as strict expected failures."""
  del config  # Unused.
  expected = _expected_failures()
  for item in items:
    if _short_id(item.nodeid) in expected:
      item.add_marker(pytest.mark.xfail(
          strict=True, reason='test-file-only failure listed in core/COMPAT.md'))


def pytest_runtest_logreport(report):
  """Records the outcome of each test (setup or teardown errors count as failed)."""
  test_id = _short_id(report.nodeid)
  if report.when == 'call' or (report.when == 'setup' and not report.passed):
    if hasattr(report, 'wasxfail'):
      outcome = 'xfailed' if report.skipped else 'xpassed'
    elif report.failed and str(report.longrepr).startswith('[XPASS(strict)]'):
      outcome = 'xpassed'
    else:
      outcome = report.outcome
    _OUTCOMES[test_id] = outcome
  elif report.when == 'teardown' and report.failed:
    _OUTCOMES[test_id] = 'failed'


def pytest_sessionfinish(session, exitstatus):
  """Writes the outcomes to SLIMTRAIN_SHIPPED_REPORT, if set."""
  del session, exitstatus  # Unused.
  path = os.environ.get('SLIMTRAIN_SHIPPED_REPORT')
  if path:
    with open(path, 'w') as f:
      json.dump(_OUTCOMES, f, indent=1, sort_keys=True)
