"""A pytest plugin: each test's CPU seconds, child processes included, in --junitxml.

Wall time alone cannot tell a test that computes from one that waits (a
cluster test spends most of its time in timeouts), and on a 2-core machine
only the computing costs the other workers anything. The suite's conftest
loads these hooks; each testcase of a `--junitxml` report then carries a
`cpu_seconds` property, which `tools/file_seconds.py --cpu` sums per file:

    .venv/bin/python -m pytest tests -n 3 --dist loadfile --junitxml=/tmp/suite.xml
    .venv/bin/python tools/file_seconds.py --cpu /tmp/suite.xml

A child's CPU counts once the test has reaped it (`subprocess.run`, `wait`);
one left running past its test counts for the test that reaps it, or not at all.
A child forked by tests/fork_server.py counts once its exit has been read.
"""

import resource

import pytest

from tests import fork_server

_CPU_AT_SETUP = pytest.StashKey[float]()


def cpu_seconds():
  """User + system CPU seconds of this process and of its reaped children."""
  own = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  forked = fork_server.reaped_cpu_seconds()  # children of the fork server, not of this process
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
  item.stash[_CPU_AT_SETUP] = cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  # The teardown report is the last one junitxml reads a test's properties from.
  outcome = yield
  if call.when == 'teardown' and _CPU_AT_SETUP in item.stash:
    used = cpu_seconds() - item.stash[_CPU_AT_SETUP]
    outcome.get_result().user_properties.append(('cpu_seconds', '%.2f' % used))
