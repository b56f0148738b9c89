"""pytest configuration shared by the whole suite.

Test modules are graph-mode TF (each calls
`tf.compat.v1.disable_eager_execution()` itself so that it also runs alone
under bazel); anything that must run eagerly runs in a subprocess.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import core  # noqa: E402,F401  (activates core.compat before any test imports tf_slim)


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase.test_session, a context manager pytest mistakes for a test.

  Left in, it shows up as one "Not a test" skip per TestCase class and hides
  the skips that mean something.
  """
  del config
  items[:] = [item for item in items if item.name != 'test_session']


# `netns_network`: a private multi-host network per test (tests/netns_fixture.py).
from tests.netns_fixture import netns_network  # noqa: E402,F401
