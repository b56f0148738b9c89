"""The `netns_network` pytest fixture: a private multi-host network for one test.

    def test_partition(tmp_path, netns_network):
      network = netns_network(['worker0', 'ps0'], time_limit_secs=180)
      ...   # network.address('ps0'), network.partition('ps0'), ProcessGroup(network=...)

The fixture is a factory (a test may build several networks). At teardown,
pass or fail, each network is closed: its processes are killed and its
namespaces deleted (`deployment.netns.Network.close`). A watchdog bounds each
network in time: when `time_limit_secs` pass, every process inside its
namespaces is killed (so whatever the test waits on returns) and the test
fails at teardown saying so.

Where namespaces cannot be created (not Linux, not root, no `ip`), the test
is skipped with the reason, which pytest prints in its summary (`-rs` is set
in pyproject.toml) and which is also written to stderr.
"""

import functools
import sys
import threading

import pytest

from deployment import netns

DEFAULT_TIME_LIMIT_SECS = 300


@functools.lru_cache(maxsize=None)
def _unavailable_reason():
  return netns.unavailable_reason()


def skip_unless_available():
  """Skips the calling test (with the reason) where namespaces cannot be created."""
  reason = _unavailable_reason()
  if reason:
    print('netns tests skipped: %s' % reason, file=sys.stderr)
    pytest.skip('network namespaces unavailable: %s' % reason)


class Watchdog(object):
  """Kills every process in a network's namespaces once `secs` have passed."""

  def __init__(self, network, secs):
    self.network = network
    self.secs = secs
    self.expired = False
    self._timer = threading.Timer(secs, self._expire)
    self._timer.daemon = True
    self._timer.start()

  def _expire(self):
    self.expired = True
    self.network.kill_namespace_processes()

  def cancel(self):
    self._timer.cancel()


@pytest.fixture
def netns_network():
  """Factory `netns_network(hosts, time_limit_secs=300, subnet=None)` -> created Network."""
  skip_unless_available()
  created = []

  def make(hosts, time_limit_secs=DEFAULT_TIME_LIMIT_SECS, subnet=None):
    network = netns.Network(hosts, subnet=subnet)
    network.create()
    created.append((network, Watchdog(network, time_limit_secs)))
    return network

  yield make
  errors = []
  for network, watchdog in reversed(created):
    watchdog.cancel()
    try:
      network.close()
    except netns.NetnsError as e:
      errors.append(str(e))
    if watchdog.expired:
      errors.append('the test ran past its %s s bound; every process of network %s was '
                    'killed' % (watchdog.secs, network.hub))
  if errors:
    pytest.fail('\n'.join(errors))
