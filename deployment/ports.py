"""Free TCP ports on the loopback interface, for clusters that live on one machine.

The local launcher (`deployment/launch.py`) and the multi-process tests give
every task of a cluster its own `127.0.0.1:<port>` address:

    from deployment import ports

    chief, worker, ps = ports.pick_unused_ports(3)
    cluster = {'chief': ['127.0.0.1:%d' % chief], ...}

A task's gRPC server binds its port seconds after the port was chosen (the
task has to start Python and import TensorFlow first), and a restarted task
binds it again minutes later. Two measures keep other processes off the port
in that window:

  * Ports come from below the kernel's ephemeral range
    (`/proc/sys/net/ipv4/ip_local_port_range`), which the kernel hands out for
    `bind(0)` and for the local end of every outgoing connection. A port picked
    from inside that range can be taken by any gRPC client that connects
    anywhere; one picked from below it can only be taken by a listener that
    asks for it by number.
  * Every pick is written to a reservation table shared by all processes of
    the machine (`RESERVATIONS_PATH`, under an exclusive `flock`), and a port
    reserved there is not handed out again until `RESERVATION_SECS` have
    passed. Parallel test processes and launchers therefore never pick the
    same port while either may still bind it.

Differs on purpose from the usual "bind port 0 and close": that returns an
ephemeral port, which loses the race above often enough on a busy machine to
fail a cluster start ("Could not start gRPC server").
"""

import contextlib
import fcntl
import json
import os
import random
import socket
import time

LOOPBACK = '127.0.0.1'

# Shared by every process on the machine; the environment variable lets a test
# use its own table.
RESERVATIONS_PATH = os.environ.get('SLIMTRAIN_PORT_RESERVATIONS',
                                   '/tmp/slimtrain-port-reservations.json')
# Long enough to cover a cluster test's restarts of a task on its port.
RESERVATION_SECS = 30 * 60
# Ports below this are left to well-known and registered services.
_LOWEST_PORT = 10000
_EPHEMERAL_RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range'
# The lower bound of Linux's default ephemeral range, when the file is absent.
_DEFAULT_EPHEMERAL_LOW = 32768


def pick_unused_ports(count, host=LOOPBACK):
  """Returns `count` distinct TCP ports that are free on `host` and reserved.

  Each port is below the ephemeral range, bindable on `host` now, and not
  reserved by another pick on this machine within the last `RESERVATION_SECS`.

  Args:
    count: how many ports (>= 0).
    host: the interface address to probe (default loopback).

  Returns:
    A list of `count` ints.

  Raises:
    ValueError: when `count` is negative.
    RuntimeError: when fewer than `count` such ports exist.
  """
  if count < 0:
    raise ValueError('count must be >= 0, got %r' % (count,))
  if count == 0:
    return []
  ephemeral_low = _ephemeral_low()
  candidates = list(range(_LOWEST_PORT, ephemeral_low))
  random.SystemRandom().shuffle(candidates)
  with _reservation_table() as table:
    now = time.time()
    for port, stamp in list(table.items()):
      if now - stamp > RESERVATION_SECS:
        del table[port]
    picked = []
    for port in candidates:
      if str(port) not in table and _bindable(host, port):
        picked.append(port)
        table[str(port)] = now
        if len(picked) == count:
          return picked
  raise RuntimeError(
      'only %d of %d ports free below the ephemeral range (%d-%d) on %s; '
      'reservations are in %s' % (len(picked), count, _LOWEST_PORT,
                                  ephemeral_low - 1, host, RESERVATIONS_PATH))


def loopback_addresses(count):
  """`count` distinct free 'host:port' strings on 127.0.0.1."""
  return ['%s:%d' % (LOOPBACK, port) for port in pick_unused_ports(count)]


def _ephemeral_low():
  """The lowest port the kernel may give to bind(0) or to an outgoing connection."""
  try:
    with open(_EPHEMERAL_RANGE_FILE) as f:
      low = int(f.read().split()[0])
  except (OSError, ValueError, IndexError):
    low = _DEFAULT_EPHEMERAL_LOW
  # A machine whose ephemeral range starts low leaves too few ports below it.
  return low if low - _LOWEST_PORT >= 1000 else _DEFAULT_EPHEMERAL_LOW


def _bindable(host, port):
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    try:
      probe.bind((host, port))
    except OSError:
      return False
  return True


@contextlib.contextmanager
def _reservation_table():
  """Yields the table {port: time reserved}, held under an exclusive lock.

  Changes made to the dict inside the block are written back on a normal exit.
  An unreadable table (e.g. a torn file from a killed writer) counts as empty.
  Without a usable table file the picks are still random and below the
  ephemeral range, only not shared with other processes.
  """
  try:
    table_file = open(RESERVATIONS_PATH, 'a+')
  except OSError:
    yield {}
    return
  with table_file:  # Closing it releases the flock.
    try:
      fcntl.flock(table_file, fcntl.LOCK_EX)
      table_file.seek(0)
      text = table_file.read()
    except OSError:
      yield {}
      return
    try:
      loaded = json.loads(text) if text.strip() else {}
    except ValueError:
      loaded = {}
    table = loaded if isinstance(loaded, dict) else {}
    yield table
    table_file.seek(0)
    table_file.truncate()
    json.dump(table, table_file)
