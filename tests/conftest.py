"""pytest configuration shared by the whole suite.

Test modules are graph-mode TF (each calls
`tf.compat.v1.disable_eager_execution()` itself so that it also runs alone
under bazel); anything that must run eagerly runs in a subprocess.
"""

import json
import os

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import core  # noqa: E402,F401  (activates core.compat before any test imports tf_slim)
# Each test's CPU seconds into --junitxml (tools/file_seconds.py --cpu reads them).
from tests.cpu_seconds import pytest_runtest_makereport, pytest_runtest_setup  # noqa: E402,F401


# Seconds each test file, and each test of a second or more, took in a measured
# whole-suite run (written by tools/file_seconds.py from a --junitxml report).
_FILE_SECONDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'file_seconds.json')
_TEST_SECONDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'test_seconds.json')


def pytest_addoption(parser):
  parser.addoption(
      '--max-test-seconds', type=float, default=None, metavar='SECONDS',
      help='leave out the tests that took longer than SECONDS in the measured run of '
           'tests/test_seconds.json (make test-fast); tests not in it run')


def _load_table(path):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def _without_long_tests(config, items, max_seconds):
  """Deselects the items that took more than `max_seconds` in the measured run.

  Args:
    config: the pytest config (deselected items are reported through it).
    items: the collected test items, changed in place.
    max_seconds: the limit; tests missing from the table are kept.

  Raises:
    pytest.UsageError: the table cannot be read.
  """
  seconds = _load_table(_TEST_SECONDS)
  if seconds is None:
    raise pytest.UsageError('--max-test-seconds needs %s (tools/file_seconds.py writes it)'
                            % _TEST_SECONDS)
  kept, long_ones = [], []
  for item in items:
    (long_ones if seconds.get(item.nodeid, 0.0) > max_seconds else kept).append(item)
  if long_ones:
    config.hook.pytest_deselected(items=long_ones)
  items[:] = kept


def _longest_files_first(items):
  """Orders items so that the files that take longest start first.

  `make test`'s `--dist loadfile --no-loadscope-reorder` hands files to
  workers in collection order; a long file handed out last (the demo's 1000
  steps, the GPU check's dry run) keeps one worker busy for minutes after the
  others have finished. Files missing from the
  table keep their place after the measured ones; tests keep their order
  within a file.

  Args:
    items: the collected test items, reordered in place.
  """
  seconds = _load_table(_FILE_SECONDS)
  if seconds is None:
    return
  def file_of(item):
    return item.nodeid.split('::')[0]
  first_seen = {}
  for index, item in enumerate(items):
    first_seen.setdefault(file_of(item), index)
  items.sort(key=lambda item: (-seconds.get(file_of(item), 0.0), first_seen[file_of(item)]))


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase.test_session (and long tests, if asked); longest files first.

  test_session is a context manager pytest mistakes for a test: left in, it
  shows up as one "Not a test" skip per TestCase class and hides the skips
  that mean something.
  """
  items[:] = [item for item in items if item.name != 'test_session']
  max_seconds = config.getoption('max_test_seconds')
  if max_seconds is not None:
    _without_long_tests(config, items, max_seconds)
  _longest_files_first(items)


# `netns_network`: a private multi-host network per test (tests/netns_fixture.py).
from tests.netns_fixture import netns_network  # noqa: E402,F401
