r"""A private network of Linux network namespaces: one "machine" per cluster task.

On one host every task of a cluster normally talks over 127.0.0.1, so nothing
a real multi-machine job meets (a separate network stack per task, a link that
goes away) is ever exercised. `Network` gives each named host its own network
namespace and its own address on a private /24, wired like machines on one
switch:

    hub namespace (the "switch"):  bridge br0 --- port p0 --- p1 --- ...
                                                   |          |
    one namespace per host:               eth0 10.213.X.2   eth0 10.213.X.3  (+ lo)

The bridge lives in a namespace of its own, so the host's network (its links,
addresses, routes, firewall) is never touched; the only thing created outside
the namespaces is their name under /run/netns. A process is put on a host by
running it through `ip netns exec <namespace>`:

    from deployment import netns

    with netns.Network(['chief0', 'worker0', 'ps0']) as network:
      cluster = network.cluster({'chief': ['chief0'], 'worker': ['worker0'],
                                 'ps': ['ps0']}, port=2222)
      # {'chief': ['10.213.X.2:2222'], 'worker': ['10.213.X.3:2222'], ...}
      process = network.popen('ps0', [sys.executable, '-m', 'trainer.train', ...],
                              env=dict(os.environ, TF_CONFIG=...))
      network.partition('ps0')   # its switch port goes down: packets are dropped
      network.heal('ps0')        # and up again; TCP retransmits and carries on
    # every process in the namespaces is dead and every namespace is deleted

What it touches: it runs `ip netns add/del`, `ip link`, `ip addr` (root, or
CAP_NET_ADMIN and CAP_SYS_ADMIN, and iproute2 are needed; `unavailable_reason()`
says why not, before anything is created). The subnet is 10.213.<random>.0/24,
chosen so that it overlaps no address or route the host has. Names are
`slimtrain-<pid>-<counter>-<host>` (the hub is `...-hub`), unique per process
and per `Network`, so parallel test processes never collide.

Cleanup guarantees: `close()` (run by the `with` block on any exit, exceptions
included, and by a failed `__enter__`) kills the processes it started
(SIGTERM, then SIGKILL), then every process still inside one of its namespaces
(whoever started it), then deletes the namespaces; deleting a namespace
deletes its veth end, and the pair goes with it. Each step is attempted even
when an earlier one failed. If the owning process itself was killed before it
could clean up, the next `Network` of any process removes the namespaces whose
owner pid no longer runs (`remove_orphans()`).

Processes started by `popen` get no proxy variables (`http_proxy`,
`grpc_proxy`, ...): gRPC would otherwise try to reach a proxy the private
network cannot see.

Differs on purpose from a plain docker/`unshare` setup: no NAT and no route to
the outside world; a task can reach only the other hosts of its `Network`.
"""

import ipaddress
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

from core import logs as logging

_PREFIX = 'slimtrain-'
_SUBNET_BASE = ipaddress.ip_network('10.213.0.0/16')
_IP_TIMEOUT_SECS = 30
_PROXY_VARIABLES = ('http_proxy', 'https_proxy', 'grpc_proxy', 'all_proxy', 'no_proxy')
_HOST_NAME = re.compile(r'^[A-Za-z0-9_]{1,40}$')
_counter = itertools.count()


class NetnsError(RuntimeError):
  """An `ip` command failed; the message carries the command and its stderr."""


def _ip(*args, check=True):
  """Runs `ip args`; returns its stdout.

  Raises:
    NetnsError: on a non-zero exit (when `check`) or when `ip` is missing.
  """
  command = ['ip'] + [str(a) for a in args]
  try:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=_IP_TIMEOUT_SECS, check=False)
  except (OSError, subprocess.TimeoutExpired) as e:
    raise NetnsError('`%s` failed: %s' % (' '.join(command), e)) from e
  if check and result.returncode != 0:
    raise NetnsError('`%s` exited %d: %s' % (' '.join(command), result.returncode,
                                             result.stderr.strip()))
  return result.stdout


def unavailable_reason():
  """Why namespaces cannot be created here, or None when they can.

  Returns:
    None, or a sentence naming what is missing (not Linux, not root, no `ip`,
    or the error of creating a probe namespace with a bridge and a veth pair
    in it, or of deleting it).
  """
  if not sys.platform.startswith('linux'):
    return 'network namespaces need Linux (this is %s)' % sys.platform
  if os.geteuid() != 0:
    return 'network namespaces need root (running as uid %d)' % os.geteuid()
  if shutil.which('ip') is None:
    return "iproute2's `ip` is not on PATH"
  probe = '%s%d-probe%d' % (_PREFIX, os.getpid(), next(_counter))
  try:
    _ip('netns', 'add', probe)
  except NetnsError as e:
    return 'cannot create a network namespace: %s' % e
  reason = None
  try:
    # The kinds of link a Network needs (kernel modules may be missing).
    _ip('-n', probe, 'link', 'add', 'br0', 'type', 'bridge')
    _ip('-n', probe, 'link', 'add', 'a0', 'type', 'veth', 'peer', 'name', 'b0')
  except NetnsError as e:
    reason = 'cannot create a bridge or veth pair: %s' % e
  try:
    _ip('netns', 'del', probe)
  except NetnsError as e:
    reason = reason or 'cannot delete network namespace %s: %s' % (probe, e)
  return reason


def namespaces():
  """Names of every network namespace of this host (`ip netns list`)."""
  return [line.split()[0] for line in _ip('netns', 'list').splitlines() if line.strip()]


def _pid_running(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _kill_pids(pids, sig):
  for pid in pids:
    try:
      os.kill(pid, sig)
    except ProcessLookupError:
      pass


def _namespace_pids(namespace):
  """Pids of the processes inside `namespace` ([] when it is gone)."""
  output = _ip('netns', 'pids', namespace, check=False)
  return [int(p) for p in output.split() if p.isdigit()]


def _delete_namespace(namespace):
  """SIGKILLs what runs inside `namespace`, then deletes it (no error if absent)."""
  for _ in range(50):
    pids = _namespace_pids(namespace)
    if not pids:
      break
    _kill_pids(pids, signal.SIGKILL)
    time.sleep(0.1)
  if namespace in namespaces():
    _ip('netns', 'del', namespace)


def remove_orphans():
  """Deletes the namespaces of `Network`s whose owning process no longer runs.

  Returns:
    The names deleted.
  """
  removed = []
  for name in namespaces():
    match = re.match(re.escape(_PREFIX) + r'(\d+)-', name)
    if match and not _pid_running(int(match.group(1))):
      try:
        _delete_namespace(name)
        removed.append(name)
      except NetnsError as e:
        logging.warning('could not remove orphaned namespace %s: %s', name, e)
  return removed


def _host_networks():
  """Every IPv4 network the host has an address or a (non-default) route in."""
  networks = []
  text = _ip('-4', '-o', 'addr', 'show') + _ip('-4', 'route', 'show', 'table', 'all')
  for token in re.findall(r'\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b', text):
    network = ipaddress.ip_network(token, strict=False)
    if network.prefixlen:  # A default route (0.0.0.0/0) says nothing about the subnet.
      networks.append(network)
  return networks


def pick_subnet(rng=None):
  """A random 10.213.X.0/24 that overlaps nothing the host has an address or route in.

  Args:
    rng: optional `random.Random`.

  Raises:
    NetnsError: when every candidate collides.
  """
  rng = rng or random.Random()
  taken = _host_networks()
  candidates = list(_SUBNET_BASE.subnets(new_prefix=24))
  rng.shuffle(candidates)
  for subnet in candidates:
    if not any(subnet.overlaps(net) for net in taken):
      return subnet
  raise NetnsError('every /24 of %s overlaps an address or route of this host' % _SUBNET_BASE)


class Network(object):
  """Hosts on a private bridge, each in its own network namespace (see the module doc)."""

  def __init__(self, hosts, subnet=None):
    """Plans the network; nothing is created before `__enter__` (or `create`).

    Args:
      hosts: host names (letters, digits, `_`; e.g. task names 'chief0', 'ps1'),
        at most 250.
      subnet: optional IPv4 /24 (string or `ipaddress` network); default: a free
        random 10.213.X.0/24 (`pick_subnet`).

    Raises:
      ValueError: for a bad or duplicated host name, too many hosts or a bad subnet.
    """
    hosts = list(hosts)
    for host in hosts:
      if not isinstance(host, str) or not _HOST_NAME.match(host):
        raise ValueError('host name %r must be 1-40 letters, digits or _' % (host,))
    if len(set(hosts)) != len(hosts) or not 0 < len(hosts) <= 250:
      raise ValueError('hosts must be 1-250 distinct names, got %r' % (hosts,))
    self._hosts = hosts
    self._subnet = ipaddress.ip_network(subnet) if subnet is not None else None
    if self._subnet is not None and self._subnet.prefixlen != 24:
      raise ValueError('subnet must be a /24, got %s' % self._subnet)
    self._base = '%s%d-%d-' % (_PREFIX, os.getpid(), next(_counter))
    self._created = []  # Namespaces that exist, in creation order.
    self._processes = []

  def __enter__(self):
    self.create()
    return self

  def __exit__(self, *unused_exc):
    self.close()
    return False

  @property
  def hosts(self):
    return list(self._hosts)

  @property
  def subnet(self):
    """The /24 of the network (an `ipaddress.IPv4Network`; None before `create`)."""
    return self._subnet

  @property
  def hub(self):
    """Name of the namespace holding the bridge."""
    return self._base + 'hub'

  def namespace(self, host):
    """Name of `host`'s network namespace."""
    self._check_host(host)
    return self._base + host

  def namespaces(self):
    """Every namespace of this network that exists now (hub first)."""
    return list(self._created)

  def address(self, host):
    """`host`'s IPv4 address as a string (hosts get .2, .3, ... in order)."""
    self._check_host(host)
    return str(self._subnet.network_address + 2 + self._hosts.index(host))

  def cluster(self, jobs, port=2222):
    """A TF_CONFIG cluster dict with each task at its host's address.

    Args:
      jobs: dict {job name: [host, ...]}, e.g. {'ps': ['ps0', 'ps1']}.
      port: the port of every task (each host has its own address, so one port
        serves all).

    Returns:
      dict {job: ['10.213.X.Y:port', ...]}.
    """
    return {job: ['%s:%d' % (self.address(h), port) for h in hosts]
            for job, hosts in jobs.items()}

  def command(self, host, argv):
    """`argv` prefixed so that it runs inside `host`'s namespace."""
    return ['ip', 'netns', 'exec', self.namespace(host)] + [str(a) for a in argv]

  def _check_host(self, host):
    if host not in self._hosts:
      raise ValueError('unknown host %r; this network has %s' % (host, self._hosts))

  def switch_port(self, host):
    """Name of `host`'s port on the bridge, a veth end inside the hub namespace.

    With `eth0` inside the host's namespace it is one link of the host: a
    traffic limit (`tc`) on both ends limits the host's sending and receiving.
    """
    self._check_host(host)
    return 'p%d' % self._hosts.index(host)

  def _add_namespace(self, name):
    _ip('netns', 'add', name)
    self._created.append(name)
    _ip('-n', name, 'link', 'set', 'lo', 'up')

  def create(self):
    """Creates the hub with its bridge, then each host's namespace, veth pair and address.

    On any failure everything created so far is removed before the error propagates.

    Raises:
      NetnsError: when an `ip` command fails.
    """
    if self._created:
      raise RuntimeError('network %s already created' % self._base)
    try:
      remove_orphans()
      if self._subnet is None:
        self._subnet = pick_subnet()
      self._add_namespace(self.hub)
      _ip('-n', self.hub, 'link', 'add', 'br0', 'type', 'bridge')
      _ip('-n', self.hub, 'link', 'set', 'br0', 'up')
      for host in self._hosts:
        self._add_host(host)
    except BaseException:
      self.close()
      raise
    logging.info('network %s: %s on %s', self._base, self._hosts, self._subnet)

  def _add_host(self, host):
    namespace, port = self.namespace(host), self.switch_port(host)
    self._add_namespace(namespace)
    # Both ends are created from the hub: the host's own namespace never sees them.
    _ip('-n', self.hub, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0',
        'netns', namespace)
    _ip('-n', self.hub, 'link', 'set', port, 'master', 'br0')
    _ip('-n', self.hub, 'link', 'set', port, 'up')
    _ip('-n', namespace, 'addr', 'add',
        '%s/%d' % (self.address(host), self._subnet.prefixlen), 'dev', 'eth0')
    _ip('-n', namespace, 'link', 'set', 'eth0', 'up')

  def partition(self, host):
    """Cuts `host` off: its switch port goes down, so packets to and from it are dropped.

    The host's own stack is left as it is (like a cable pulled at the switch):
    its connections see silence and time out rather than an immediate error.
    """
    _ip('-n', self.hub, 'link', 'set', self.switch_port(host), 'down')
    logging.info('network %s: %s partitioned', self._base, host)

  def heal(self, host):
    """Undoes `partition(host)`: its switch port comes up again."""
    _ip('-n', self.hub, 'link', 'set', self.switch_port(host), 'up')
    logging.info('network %s: %s healed', self._base, host)

  def popen(self, host, argv, env=None, **kwargs):
    """Starts `argv` inside `host`'s namespace; `close()` will kill it.

    Args:
      host: the host to run on.
      argv: the command (a list).
      env: its environment (default: this process's), less any proxy variables.
      **kwargs: passed to `subprocess.Popen`; `start_new_session` defaults to
        True so that killing the process group kills whatever it spawned.

    Returns:
      The `subprocess.Popen` (its pid is the command's own: `ip netns exec` execs it).
    """
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k.lower() not in _PROXY_VARIABLES}
    kwargs.setdefault('start_new_session', True)
    process = subprocess.Popen(self.command(host, argv), env=env, **kwargs)
    self._processes.append(process)
    return process

  def kill_processes(self, grace_secs=3.0):
    """Stops the processes `popen` started (SIGTERM, SIGKILL after `grace_secs`)."""
    running = [p for p in self._processes if p.poll() is None]
    for sig, wait_secs in ((signal.SIGTERM, grace_secs), (signal.SIGKILL, 10.0)):
      for process in running:
        try:
          os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
          pass
      deadline = time.time() + wait_secs
      for process in running:
        try:
          process.wait(timeout=max(deadline - time.time(), 0.01))
        except subprocess.TimeoutExpired:
          pass
      running = [p for p in running if p.poll() is None]
      if not running:
        break

  def kill_namespace_processes(self):
    """SIGKILLs every process inside this network's namespaces, whoever started it.

    Returns:
      The pids signalled.
    """
    pids = [pid for name in self._created for pid in _namespace_pids(name)]
    _kill_pids(pids, signal.SIGKILL)
    return pids

  def close(self):
    """Kills every process of the network and deletes its namespaces (idempotent).

    Raises:
      NetnsError: after trying everything, when a namespace could not be deleted.
    """
    errors = []
    try:
      self.kill_processes()
    except Exception as e:  # noqa: BLE001  (the namespaces must still go)
      errors.append('killing processes: %s' % e)
    # Hosts first, hub last: the hub's ports vanish with the hosts' veth ends.
    for name in reversed(self._created):
      try:
        _delete_namespace(name)
      except NetnsError as e:
        errors.append(str(e))
    try:
      existing = namespaces()
    except NetnsError as e:
      errors.append(str(e))
      existing = self._created
    self._created = [n for n in self._created if n in existing]
    if errors:
      raise NetnsError('network %s: cleanup failed: %s' % (self._base, '; '.join(errors)))
