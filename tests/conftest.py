"""pytest configuration shared by the whole suite.

Test modules are graph-mode TF (each calls
`tf.compat.v1.disable_eager_execution()` itself so that it also runs alone
under bazel); anything that must run eagerly runs in a subprocess.
"""

import json
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import core  # noqa: E402,F401  (activates core.compat before any test imports tf_slim)


# Seconds each test file took in a measured whole-suite run (tests/file_seconds.json,
# written by tools/file_seconds.py from a --junitxml report).
_FILE_SECONDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'file_seconds.json')


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
  try:
    with open(_FILE_SECONDS) as f:
      seconds = json.load(f)
  except (OSError, ValueError):
    return
  def file_of(item):
    return item.nodeid.split('::')[0]
  first_seen = {}
  for index, item in enumerate(items):
    first_seen.setdefault(file_of(item), index)
  items.sort(key=lambda item: (-seconds.get(file_of(item), 0.0), first_seen[file_of(item)]))


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase.test_session and starts the longest files first.

  test_session is a context manager pytest mistakes for a test: left in, it
  shows up as one "Not a test" skip per TestCase class and hides the skips
  that mean something.
  """
  del config
  items[:] = [item for item in items if item.name != 'test_session']
  _longest_files_first(items)


# `netns_network`: a private multi-host network per test (tests/netns_fixture.py).
from tests.netns_fixture import netns_network  # noqa: E402,F401
