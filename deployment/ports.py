"""Free TCP ports on the loopback interface, for clusters that live on one machine.

The local launcher (`deployment/launch.py`) and the multi-process tests give
every task of a cluster its own `127.0.0.1:<port>` address:

    from deployment import ports

    chief, worker, ps = ports.pick_unused_ports(3)
    cluster = {'chief': ['127.0.0.1:%d' % chief], ...}

There is a window between choosing a port and the task's gRPC server binding
it, in which another process may take the port; a local run accepts that
(rare) race rather than hard-coding ports.
"""

import socket

LOOPBACK = '127.0.0.1'


def pick_unused_ports(count, host=LOOPBACK):
  """Returns `count` distinct TCP ports that are free on `host` now.

  All sockets stay bound until every port is chosen, so the same port is
  never handed out twice by one call.

  Args:
    count: how many ports (>= 0).
    host: the interface address to probe (default loopback).

  Returns:
    A list of `count` ints.

  Raises:
    ValueError: when `count` is negative.
  """
  if count < 0:
    raise ValueError('count must be >= 0, got %r' % (count,))
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind((host, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def loopback_addresses(count):
  """`count` distinct free 'host:port' strings on 127.0.0.1."""
  return ['%s:%d' % (LOOPBACK, port) for port in pick_unused_ports(count)]
