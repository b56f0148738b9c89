"""How much of a batch each clone gets: the one divisibility check of both paths.

Clones split a batch evenly. A batch that does not split is a configuration
error, whichever path builds the clones: the legacy loop checks its
`train_config.batch_size` while building the graph, and an Estimator with
`num_clones > 1` (`estimator/replicate.py`) checks the batch its
input_fn produced, at graph-build time when the batch dimension is static and
when the step runs otherwise. Both go through `per_clone_batch_size`, so the
rule and its message are the same:

    from deployment import clone_batch
    clone_batch.per_clone_batch_size(8, 2, 'train_config.batch_size')    # 4
    clone_batch.per_clone_batch_size(9, 2, 'train_config.batch_size')    # ValueError:
    #   train_config.batch_size=9 is not divisible by num_clones=2; ...
    per_clone = clone_batch.per_clone_batch_size(tf.shape(images)[0], 2, 'images')
    # a tensor; running it with an odd batch fails with InvalidArgumentError

Differs on purpose from TF-Slim and the OD trainer, which floored the division
and silently dropped the remainder of every batch.
"""

import numbers

import tensorflow as tf

_NOT_DIVISIBLE = ('%s is not divisible by num_clones=%d; choose a batch size that splits '
                  'evenly over the clones')


def per_clone_batch_size(batch_size, num_clones, batch_name='batch_size'):
  """The number of examples each of `num_clones` clones gets from `batch_size`.

  Args:
    batch_size: the whole batch: a Python int, or a scalar integer tensor
      (its static value is used when the graph knows it).
    num_clones: a positive Python int.
    batch_name: how the error names the batch, e.g. 'train_config.batch_size'.

  Returns:
    `batch_size // num_clones`: an int when the size is known now, else an
    int tensor that fails with `InvalidArgumentError` (same message, the size
    appended) when the batch does not split.

  Raises:
    ValueError: when a known batch size does not split, or num_clones < 1.
  """
  if not isinstance(num_clones, numbers.Integral) or num_clones < 1:
    raise ValueError('num_clones must be a positive integer, got %r' % (num_clones,))
  known = batch_size
  if not isinstance(batch_size, numbers.Integral):
    known = tf.get_static_value(batch_size)
  if known is not None:
    known = int(known)
    if known % num_clones:
      raise ValueError(_NOT_DIVISIBLE % ('%s=%d' % (batch_name, known), num_clones))
    return known // num_clones
  with tf.compat.v1.name_scope('per_clone_batch_size'):
    check = tf.debugging.Assert(
        tf.equal(batch_size % num_clones, 0),
        [_NOT_DIVISIBLE % (batch_name, num_clones) + '. Batch size:', batch_size])
    with tf.control_dependencies([check]):
      return tf.identity(batch_size // num_clones)
