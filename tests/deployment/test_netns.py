"""The multi-host harness (deployment/netns.py): namespaces, addresses, partitions, cleanup.

Two TF servers in two namespaces talk over the private subnet; bringing one
host's link down makes a gRPC read fail within its deadline and bringing it up
again restores it; and after the `with` block (also one left by an exception)
no namespace, link or process of the harness remains. Needs root and `ip`;
elsewhere every test here is skipped with the reason.
"""

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from deployment import netns
from tests import cluster_util
from tests import netns_fixture

pytestmark = pytest.mark.cluster

_MODULE = 'tests.deployment.netns_probe_main'
_PROBE = re.compile(r'^PROBE (\d+) (OK|FAIL)\b(.*)$', re.M)


@pytest.fixture(autouse=True)
def _needs_namespaces():
  netns_fixture.skip_unless_available()


def _root_links():
  """Interface names of the host's own (root) namespace."""
  output = subprocess.run(['ip', '-o', 'link', 'show'], stdout=subprocess.PIPE, text=True,
                          check=True).stdout
  return sorted(line.split(':')[1].strip().split('@')[0] for line in output.splitlines())


def _ours(names, network):
  return [n for n in names if n.startswith(network.hub[:-len('hub')])]


def _probes(process):
  """[(attempt, 'OK' | 'FAIL', rest)] of every probe line so far."""
  return [(int(n), status, rest.strip()) for n, status, rest in _PROBE.findall(process.output())]


def _wait_probe(group, process, status, after, timeout):
  """Waits for a probe with `status` at an attempt > `after`; returns (attempt, rest)."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    for attempt, seen, rest in _probes(process):
      if attempt > after and seen == status:
        return attempt, rest
    if process.poll() is not None:
      break
    time.sleep(0.2)
  raise AssertionError('no %s probe after attempt %d within %ss\n%s' % (
      status, after, timeout, group.logs()))


def test_each_host_has_its_own_stack_and_address(netns_network):
  network = netns_network(['worker0', 'ps0', 'ps1'])
  assert network.subnet.prefixlen == 24
  assert network.subnet.subnet_of(ipaddress.ip_network('10.213.0.0/16'))
  addresses = [network.address(h) for h in network.hosts]
  assert len(set(addresses)) == 3
  assert all(ipaddress.ip_address(a) in network.subnet for a in addresses)
  assert cluster_util.netns_cluster(network, port=2222) == {
      'worker': ['%s:2222' % addresses[0]], 'ps': ['%s:2222' % addresses[1],
                                                    '%s:2222' % addresses[2]]}
  for host in network.hosts:
    out = subprocess.run(network.command(host, ['ip', '-o', '-4', 'addr', 'show']),
                         stdout=subprocess.PIPE, text=True, check=True, timeout=30).stdout
    # Loopback is up and the host's only other address is its own.
    assert re.findall(r'inet (\S+)', out) == ['127.0.0.1/8', network.address(host) + '/24'], out


def test_process_group_runs_a_task_and_its_restart_on_the_task_host(tmp_path, netns_network):
  network = netns_network(['worker0', 'ps0'], time_limit_secs=180)
  cluster = cluster_util.netns_cluster(network)
  with cluster_util.ProcessGroup(str(tmp_path), network=network) as group:
    for name in ('ps0', 'ps0_restarted'):
      process = group.start(name, cluster_util.tf_config(cluster, 'ps', 0), module=_MODULE,
                            args=['--role=server'])
      group.wait_for_output(process, r'^SERVING %s:2222$' % re.escape(network.address('ps0')),
                            timeout=120)
      where = subprocess.run(['ip', 'netns', 'identify', str(process.pid)],
                             stdout=subprocess.PIPE, text=True, check=True, timeout=30).stdout
      assert where.strip() == network.namespace('ps0')
      group.kill(process)


def test_servers_in_two_namespaces_talk_partition_fails_heal_restores(tmp_path, netns_network):
  network = netns_network(['worker0', 'ps0'], time_limit_secs=240)
  cluster = cluster_util.netns_cluster(network)
  with cluster_util.ProcessGroup(str(tmp_path), network=network) as group:
    tasks = group.start_cluster(cluster, _MODULE, task_args={
        'ps0': ['--role=server'], 'worker0': ['--role=probe', '--deadline_ms=2000']})
    probe = tasks['worker0']
    group.wait_for_output(probe, r'^DEVICES .*/job:ps/replica:0/task:0/device:CPU:0', 120)
    ok, value = _wait_probe(group, probe, 'OK', -1, timeout=60)
    assert value == '42'

    network.partition('ps0')
    failed, error = _wait_probe(group, probe, 'FAIL', ok, timeout=60)
    # Nothing answers on a cut link: the read runs into its deadline.
    assert error in ('DeadlineExceededError', 'UnavailableError'), group.logs()
    # And it stays cut until healed.
    failed, _ = _wait_probe(group, probe, 'FAIL', failed, timeout=60)

    network.heal('ps0')
    _, value = _wait_probe(group, probe, 'OK', failed, timeout=90)
    assert value == '42'
    assert tasks['ps0'].poll() is None and probe.poll() is None


def test_nothing_remains_after_the_block(tmp_path):
  links_before = _root_links()
  with netns.Network(['worker0', 'ps0']) as network:
    names = network.namespaces()
    assert len(names) == 3 and all(n in netns.namespaces() for n in names)
    tracked = network.popen('ps0', ['sleep', '600'])
    # Started past the harness, still inside one of its namespaces.
    untracked = subprocess.Popen(network.command('worker0', ['sleep', '600']),
                                 start_new_session=True)
  assert not _ours(netns.namespaces(), network)
  assert _root_links() == links_before
  assert tracked.poll() is not None
  assert untracked.wait(timeout=30) == -9


def test_cleanup_after_an_exception_inside_the_block():
  links_before = _root_links()
  with pytest.raises(ZeroDivisionError):
    with netns.Network(['worker0']) as network:
      process = network.popen('worker0', ['sleep', '600'])
      network.partition('worker0')
      1 / 0  # noqa: B018
  assert not _ours(netns.namespaces(), network)
  assert _root_links() == links_before
  assert process.poll() is not None


def test_parallel_networks_have_distinct_names():
  with netns.Network(['ps0']) as first, netns.Network(['ps0']) as second:
    assert not set(first.namespaces()) & set(second.namespaces())
    assert str(os.getpid()) in first.hub
  assert not _ours(netns.namespaces(), first) and not _ours(netns.namespaces(), second)


def test_namespaces_of_a_dead_owner_are_removed_by_the_next_network(tmp_path):
  # A process that creates a network and dies without cleaning up.
  code = ('import os, sys\n'
          'from deployment import netns\n'
          'n = netns.Network(["ps0"]); n.create(); print(n.hub, flush=True)\n'
          'os._exit(0)\n')
  result = subprocess.run([sys.executable, '-c', code], cwd=cluster_util.REPO_ROOT,
                          stdout=subprocess.PIPE, text=True, timeout=120, check=True,
                          env=dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT,
                                   TF_CPP_MIN_LOG_LEVEL='2'))
  orphan_hub = result.stdout.split()[-1]
  assert orphan_hub in netns.namespaces()
  with netns.Network(['ps0']):
    assert orphan_hub not in netns.namespaces()


def test_watchdog_kills_what_runs_past_the_time_limit():
  with netns.Network(['ps0']) as network:
    process = network.popen('ps0', ['sleep', '600'])
    watchdog = netns_fixture.Watchdog(network, secs=1)
    try:
      assert process.wait(timeout=60) == -9
    finally:
      watchdog.cancel()
    assert watchdog.expired


def test_without_the_capabilities_the_tests_skip_and_say_why():
  setpriv = shutil.which('setpriv')
  if setpriv is None:
    pytest.skip('setpriv (util-linux) is not installed: cannot drop capabilities')
  # Root without any capability: `ip netns add` is refused, as for a user without root.
  result = subprocess.run(
      [setpriv, '--bounding-set=-all', '--inh-caps=-all', sys.executable, '-m', 'pytest',
       __file__, '-q', '-n', '0', '-p', 'no:cacheprovider', '-k', 'own_stack'],
      cwd=cluster_util.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=240, check=False)
  assert result.returncode == 0, result.stdout[-3000:]
  assert '1 skipped' in result.stdout, result.stdout[-3000:]
  assert re.search(r'SKIPPED .*network namespaces unavailable: cannot create a network '
                   r'namespace: `ip netns add slimtrain-\d+-probe\d+` exited', result.stdout), (
                       result.stdout[-3000:])


def test_bad_host_names_are_refused():
  with pytest.raises(ValueError, match='host name'):
    netns.Network(['ps-0'])
  with pytest.raises(ValueError, match='distinct'):
    netns.Network(['ps0', 'ps0'])
  with pytest.raises(ValueError, match='/24'):
    netns.Network(['ps0'], subnet='10.213.0.0/16')


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
