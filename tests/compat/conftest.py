"""pytest options of tests/compat.

`--compat-slow` runs the slow compat checks (the full tf-slim shipped-test run
and the learning.train sync-replicas case). It works when pytest is pointed
at tests/compat or a file in it; everywhere else (the whole suite, bazel) set
`SLIMTRAIN_COMPAT_SLOW=1` instead, which is what the option sets.
"""

import os


def pytest_addoption(parser):
  """Registers --compat-slow."""
  parser.addoption('--compat-slow', action='store_true', default=False,
                   help='run the slow compat checks (same as SLIMTRAIN_COMPAT_SLOW=1)')


def pytest_configure(config):
  """Turns --compat-slow into SLIMTRAIN_COMPAT_SLOW=1 for the test modules."""
  if config.getoption('--compat-slow', default=False):
    os.environ['SLIMTRAIN_COMPAT_SLOW'] = '1'
