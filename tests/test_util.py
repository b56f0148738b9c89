"""Small helpers shared by tests: free loopback ports, virtual CPU devices."""

import contextlib

import tensorflow as tf

from deployment import ports


def pick_unused_ports(count):
  """Returns `count` distinct TCP ports free on 127.0.0.1 now (see deployment/ports.py)."""
  return ports.pick_unused_ports(count)


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
