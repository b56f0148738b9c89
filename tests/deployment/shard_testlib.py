"""What the in-process shard tests share: the test variables and their checkpoint.

tests/deployment/test_shard_restore.py and test_shard_snapshots.py build the
same variables (global_step, a, b, c and a 2-way partitioned p) on ps
servers of the test's own process, and restore from one checkpoint written
from a plain local graph with the same names:

    path = shard_testlib.write_checkpoint(str(tmp_dir / 'model.ckpt'))
    with tf.Graph().as_default(), tf.compat.v1.device(setter):
      variables = shard_testlib.build_variables()
"""

import tensorflow as tf

# What the checkpoint holds; p holds [10, 11] and [12, 13].
CHECKPOINT_VALUES = {'global_step': 40, 'a': 1.0, 'b': 2.0, 'c': 3.0}


def build_variables():
  """global_step, a, b, c and a 2-way partitioned `p`, in the default graph.

  Returns:
    {name: variable}, p being a `PartitionedVariable`.
  """
  variables = {'global_step': tf.compat.v1.train.get_or_create_global_step()}
  for name in ('a', 'b', 'c'):
    variables[name] = tf.compat.v1.get_variable(name, [], initializer=tf.zeros_initializer())
  variables['p'] = tf.compat.v1.get_variable(
      'p', [4], initializer=tf.zeros_initializer(),
      partitioner=tf.compat.v1.fixed_size_partitioner(2))
  return variables


def write_checkpoint(path):
  """Writes `CHECKPOINT_VALUES` at global step 40 under `path`; returns the prefix."""
  with tf.Graph().as_default():
    variables = build_variables()
    assigns = [tf.compat.v1.assign(variables[n], v) for n, v in CHECKPOINT_VALUES.items()]
    for part, values in zip(variables['p'], ([10., 11.], [12., 13.])):
      assigns.append(tf.compat.v1.assign(part, values))
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(assigns)
      return saver.save(sess, path, global_step=40)


def values(sess, variables):
  """{name: value} of `build_variables`' variables, p as a list of its 4 values."""
  result = sess.run({n: v for n, v in variables.items() if n != 'p'})
  result['p'] = list(sess.run(variables['p'].as_tensor()))
  return result
