"""Small helpers shared by tests: free loopback ports, virtual CPU devices."""

import contextlib
import socket

import tensorflow as tf


def pick_unused_ports(count):
  """Returns `count` distinct TCP ports that are free on 127.0.0.1 now.

  The sockets are held open until all ports are chosen so that the same port
  is never returned twice; another process may still take one afterwards,
  which tests accept as a (rare) flake rather than hard-coding ports.
  """
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind(('127.0.0.1', 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def session_config(num_cpus=1, intra_op_threads=0, inter_op_threads=0):
  """A ConfigProto with `num_cpus` virtual CPU devices (/device:CPU:0..N-1)."""
  return tf.compat.v1.ConfigProto(
      device_count={'CPU': num_cpus},
      intra_op_parallelism_threads=intra_op_threads,
      inter_op_parallelism_threads=inter_op_threads,
      allow_soft_placement=False)


@contextlib.contextmanager
def graph_session(num_cpus=1, seed=None):
  """Yields (graph, session) for a fresh graph with `num_cpus` CPU devices."""
  graph = tf.Graph()
  with graph.as_default():
    if seed is not None:
      tf.compat.v1.set_random_seed(seed)
    with tf.compat.v1.Session(graph=graph,
                              config=session_config(num_cpus)) as sess:
      yield graph, sess
