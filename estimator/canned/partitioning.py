"""How the canned estimators split big variables over the ps tasks of a cluster.

As tf.estimator 2.15: in a cluster with `config.num_ps_replicas` ps tasks
(from TF_CONFIG) the DNN's hidden layers are built under
`min_max_variable_partitioner(max_partitions=num_ps)` and the input layer
(embedding tables) and linear weights under
`min_max_variable_partitioner(max_partitions=num_ps, min_slice_size=64 << 20)`.
Every variable is then a partitioned variable (`.../part_0`, `.../part_1` ...
in the graph; one tensor under the full name in the checkpoint), with one
part when it is small or when there is no ps.

    with tf.compat.v1.variable_scope(
        'dnn', partitioner=partitioning.hidden_layer_partitioner(config),
        custom_getter=partitioning.spread_parts_getter(config, mode)):
      ...

Differs on purpose: tf.estimator left the placement of the parts to the
round-robin `replica_device_setter`, so which ps task held which part
depended on how many variables were created before. Here, while training
on a cluster, a variable split into P > 1 parts puts part i on ps task
`i % num_ps` (`spread_parts_getter`), so a table split in two always lies
on ps:0 and ps:1. Variables with one part stay round-robin.
"""

import functools
import re

import numpy as np
import tensorflow as tf

from estimator import model_fn as model_fn_lib

# The slice size above which tf.estimator splits input-layer and linear variables.
INPUT_LAYER_MIN_SLICE_SIZE = 64 << 20

_VARIABLE_OPS = ('VarHandleOp', 'VariableV2', 'Variable', 'AutoReloadVariable')


def num_ps_replicas(config):
  """Number of ps tasks of `config` (0 without config or cluster)."""
  return int(getattr(config, 'num_ps_replicas', 0) or 0) if config is not None else 0


def hidden_layer_partitioner(config):
  """tf.estimator's partitioner for DNN hidden layers (256 KiB slices)."""
  return tf.compat.v1.min_max_variable_partitioner(max_partitions=num_ps_replicas(config))


def input_layer_partitioner(config):
  """tf.estimator's partitioner for embedding tables and linear weights (64 MiB slices)."""
  return tf.compat.v1.min_max_variable_partitioner(
      max_partitions=num_ps_replicas(config), min_slice_size=INPUT_LAYER_MIN_SLICE_SIZE)


def _num_parts(kwargs):
  """How many parts the partitioner of a get_variable call makes (1 when unknown)."""
  partitioner, shape = kwargs.get('partitioner'), kwargs.get('shape')
  if partitioner is None or shape is None:
    return 1
  shape = tf.TensorShape(shape)
  if not shape.is_fully_defined() or shape.rank == 0:
    return 1
  dtype = kwargs.get('dtype') or tf.float32
  return int(np.prod(partitioner(shape=shape, dtype=tf.as_dtype(dtype))))


def _part_device(name, num_ps, ps_job, op):
  """Device of the variable op of part i of `name`: ps task i % num_ps."""
  if op.type in _VARIABLE_OPS:
    match = re.match(re.escape(name) + r'/part_(\d+)$', op.name)
    if match:
      return '/job:%s/task:%d' % (ps_job, int(match.group(1)) % num_ps)
  return op.device


def spread_parts_getter(config, mode, ps_job='ps'):
  """A custom getter placing part i of a split variable on ps task i % num_ps.

  Args:
    config: the model_fn's `RunConfig` (None: no ps).
    mode: the model_fn's mode; only TRAIN graphs are placed on the ps tasks
      (evaluate, predict and export run in one process, as tf.estimator).
    ps_job: the ps job name in the cluster.

  Returns:
    A custom getter for `tf.compat.v1.variable_scope`, or None when there is
    nothing to spread (fewer than two ps tasks, or not training).
  """
  num_ps = num_ps_replicas(config)
  if num_ps < 2 or mode != model_fn_lib.ModeKeys.TRAIN:
    return None

  def spread_parts(getter, name, *args, **kwargs):
    if _num_parts(kwargs) < 2:
      return getter(name, *args, **kwargs)
    with tf.compat.v1.device(functools.partial(_part_device, name, num_ps, ps_job)):
      return getter(name, *args, **kwargs)
  return spread_parts
