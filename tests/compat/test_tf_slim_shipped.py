"""tf-slim's own shipped tests pass on TF 2.21 with slimtrain's compat layer.

One pytest process per tf-slim test module (see tests/compat/shipped_tests.py),
each with `core.compat` imported before the module. Every test must pass
except the expected failures listed in core/COMPAT.md, which must still fail
(strict), so both a new breakage and a stale entry fail here.

Every required module (`shipped_tests.FAST_MODULES`) always runs (the
network modules from test_tf_slim_shipped_nets.py), and so does
the proof that each expected failure is the test file's own: each module of
`TEST_FILE_REWRITES`, rewritten, runs just its listed expected failures, which
must pass (one process per module: 150 s wall, 106 s of CPU, at load average
3-4 on 2 cores, 2026-11-26; metric_ops alone 47 s). The
metrics/losses/extra-layer modules beyond the required list take several more
minutes; they are marked slow and run with

    .venv/bin/python -m pytest tests/compat/test_tf_slim_shipped.py --compat-slow -s

or `SLIMTRAIN_COMPAT_SLOW=1` anywhere else (whole suite, bazel `--test_env`).
`-s` prints one summary line per module, timings included.
"""

import os
import sys

import pytest

from tests.compat import shipped_tests

_SLOW_ENV = 'SLIMTRAIN_COMPAT_SLOW'


def _slow_enabled():
  """Returns True when --compat-slow or SLIMTRAIN_COMPAT_SLOW=1 asked for the full run."""
  return os.environ.get(_SLOW_ENV) == '1'


def _expected_failures():
  """The expected-failure ids of core/COMPAT.md (parsed per call: cheap)."""
  return shipped_tests.load_expected_failures()


def test_expected_failure_list_is_well_formed():
  expected = _expected_failures()
  modules = set(shipped_tests.FAST_MODULES) | set(shipped_tests.SLOW_MODULES)
  for test_id in expected:
    module = shipped_tests.module_of(test_id)
    assert module in modules, '%s: module not run by this runner' % test_id
    assert module in shipped_tests.TEST_FILE_REWRITES, (
        '%s: no TEST_FILE_REWRITES entry shows this failure is the test file\'s own'
        % test_id)
  for module in shipped_tests.TEST_FILE_REWRITES:
    path = os.path.join(shipped_tests.tf_slim_dir(), module + '.py')
    with open(path) as f:
      shipped_tests.rewrite_test_source(module, f.read())  # Raises when stale.


@pytest.mark.parametrize(
    'module', [m for m in shipped_tests.FAST_MODULES if m not in shipped_tests.NET_MODULES])
def test_shipped_module(module):
  shipped_tests.check_module(module)


@pytest.mark.slow
@pytest.mark.parametrize('module', shipped_tests.SLOW_MODULES)
def test_shipped_module_slow(module):
  if not _slow_enabled():
    pytest.skip('slow: run with --compat-slow or %s=1' % _SLOW_ENV)
  shipped_tests.check_module(module)


@pytest.mark.slow
@pytest.mark.parametrize('module', sorted(shipped_tests.TEST_FILE_REWRITES))
def test_expected_failures_pass_once_the_test_file_is_fixed(module):
  # Only the listed tests of the rewritten file: that they pass is the proof;
  # the module's other tests already run (unchanged) in test_shipped_module.
  listed = sorted(t for t in _expected_failures() if shipped_tests.module_of(t) == module)
  assert listed, '%s: a TEST_FILE_REWRITES entry with no expected failure to prove' % module
  result = shipped_tests.run_rewritten_module(module, only=listed)
  print('\n(test file rewritten) ' + result.summary())
  not_passing = ['%s: %s' % (t, result.outcomes.get(t, 'not run')) for t in listed
                 if result.outcomes.get(t) != 'passed']
  assert not not_passing and not result.problems(), '%s\n  %s\n--- output tail ---\n%s' % (
      result.summary(), '\n  '.join(not_passing + result.problems()), result.output[-4000:])


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
