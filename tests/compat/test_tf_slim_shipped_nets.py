"""tf-slim's shipped network tests (VGG, ResNet v1/v2, Inception v3) pass with our compat.

The required modules of test_tf_slim_shipped.py that build whole networks,
in a file of their own so that they run beside the others (one file is one
unit of work for `make test`'s workers and one bazel target). Same check:
every test passes except core/COMPAT.md's expected failures, which must
still fail.
"""

import sys

import pytest

from tests.compat import shipped_tests


@pytest.mark.parametrize('module', shipped_tests.NET_MODULES)
def test_shipped_network_module(module):
  shipped_tests.check_module(module)


def test_the_network_modules_are_required_ones():
  assert shipped_tests.NET_MODULES and set(shipped_tests.NET_MODULES) <= set(
      shipped_tests.FAST_MODULES)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
