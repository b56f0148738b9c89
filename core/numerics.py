"""Numerics guards of a training step: the gradient-norm check and a NaN injector.

A training step may only change the variables when both its loss and its
gradients are finite. The loss is checked by `tf.debugging.check_numerics`
(the legacy `trainer.trainer.train`); gradients can still be inf or NaN with a
finite loss (`tf.norm` of a zero vector, `tf.sqrt(0)`, a custom op's gradient), and would
then be applied, turning every variable and the next checkpoint into NaN.
`check_gradient_norm` computes the global gradient norm, checks it, and makes
every gradient wait for that check, so a bad step applies nothing:

    grads_and_vars = numerics.check_gradient_norm(grads_and_vars)
    train_op = optimizer.apply_gradients(grads_and_vars, global_step)
    # sess.run(train_op) raises InvalidArgumentError with
    # GRADIENT_NORM_MESSAGE and leaves the variables as they were.

`core.gradient_surgery.transform_gradients` (both training paths) applies it
last (after clipping) when `train_config.check_gradient_norm` is true, the
default. A norm too large for float32 (above about 2.6e19) counts as inf: such
an update is useless anyway. Mixed precision skips the check, because its
dynamic loss scale expects occasional inf gradients and skips those steps
itself. Its price is one pass over all gradients per step, fixed whatever the
batch, and the applies waiting for the whole backward pass: timed on a 2-core
CPU, about 3.5 % of a ResNet-50 step at 32x32 batch 8 and 2.2 % at 224x224 batch
4 (benchmarks/RESULTS.md, paired runs); `check_gradient_norm: false` turns it
off.

With mixed precision a step whose gradients are not finite is skipped, not an
error; `mixed_precision_check` gives the training loop what it needs to say so
(`global step 46: mixed precision skipped this update ...`, a warning per step),
and `inject_inf_gradients` makes a loss's gradients inf on one run, to try that
skip on purpose.

`inject_nan_loss` is a debugging option (`train_config.debug_nan_loss_at_step`):
the total loss becomes NaN when the global step equals K, so the NaN handling
of a job (error, exit code, checkpoint left intact) can be tried on purpose, on
any CPU, without relying on a learning rate large enough to overflow.

Differs on purpose from the Object Detection API's legacy trainer, which checks
only the loss and applies inf/NaN gradients of a finite loss.
"""

import numpy as np
import tensorflow as tf

GRADIENT_NORM_MESSAGE = 'Gradient global norm is inf or nan.'


def _gradient_tensors(grads_and_vars):
  """The gradient tensors of `grads_and_vars` (an IndexedSlices' values; no None)."""
  return [grad.values if isinstance(grad, tf.IndexedSlices) else grad
          for grad, _ in grads_and_vars if grad is not None]


def check_gradient_norm(grads_and_vars, also_wait_for=None):
  """Gates every gradient on a finite global gradient norm.

  Args:
    grads_and_vars: list of (gradient, variable) pairs; gradients may be
      dense tensors, `tf.IndexedSlices` or None.
    also_wait_for: optional tensor or op the gradients must wait for too
      (the trainer's checked loss); the norm is checked after it, and one
      identity per gradient carries both waits.

  Returns:
    The same pairs, each gradient now computed after the check, so applying
    them fails (and changes nothing) when the norm is inf or NaN. The error is
    an `InvalidArgumentError` whose message contains GRADIENT_NORM_MESSAGE.
  """
  grads = _gradient_tensors(grads_and_vars)
  if not grads:
    return list(grads_and_vars)
  with tf.compat.v1.name_scope('check_gradient_norm'):
    # Half the squared norm is finite exactly when the norm is (up to the
    # float32 range); leaving out the stack, sum, doubling and square root of
    # tf.linalg.global_norm saves four nodes a step, which counts on small models.
    half_squared_norm = tf.math.add_n([tf.nn.l2_loss(grad) for grad in grads],
                                      name='half_squared_global_norm')
    # After the loss check: a NaN loss is reported as such, never as its
    # gradients' NaN norm.
    with tf.control_dependencies([] if also_wait_for is None else [also_wait_for]):
      check = tf.debugging.check_numerics(half_squared_norm, GRADIENT_NORM_MESSAGE)
  return gate_gradients(grads_and_vars, check)


def gate_gradients(grads_and_vars, gate):
  """Makes every gradient wait for `gate`.

  Only the gradients are gated, not a whole `apply_gradients` call: ops an
  optimizer creates there (SyncReplicasOptimizer's init and readiness ops)
  must not depend on a batch, or running them at startup would dequeue one
  before the queue runners exist and hang.

  Args:
    grads_and_vars: list of (gradient, variable) pairs; gradients may be
      dense tensors, `tf.IndexedSlices` or None.
    gate: a tensor or op every gradient must run after.

  Returns:
    The pairs with each gradient replaced by an identity that depends on `gate`.
  """
  gated = []
  with tf.control_dependencies([gate]):
    for grad, var in grads_and_vars:
      if isinstance(grad, tf.IndexedSlices):
        grad = tf.IndexedSlices(tf.identity(grad.values), grad.indices, grad.dense_shape)
      elif grad is not None:
        grad = tf.identity(grad)
      gated.append((grad, var))
  return gated


def mixed_precision_check(grads_and_vars, optimizer, update_op):
  """What a mixed-precision step did: (update_skipped, loss_scale) tensors.

  TF's dynamic loss scale applies nothing when a gradient of the step is not
  finite, and lowers its scale; it says so nowhere. Fetched beside the train
  op, these two tensors let the training loop report such a step:

    update_skipped, loss_scale = numerics.mixed_precision_check(
        grads_and_vars, optimizer, update_op)

  Args:
    grads_and_vars: the (gradient, variable) pairs given to the optimizer's
      `apply_gradients`: the loss scale optimizer decides on exactly these.
    optimizer: the optimizer `enable_mixed_precision_graph_rewrite` returned.
    update_op: the op that applies the step; the scale is read after it.

  Returns:
    (update_skipped, loss_scale): a scalar bool tensor, True when some
    gradient is inf or NaN (the step's update was skipped), and the loss scale
    after the update (None when `optimizer` keeps no `current_loss_scale`
    variable, i.e. a fixed loss scale).
  """
  grads = _gradient_tensors(grads_and_vars)
  with tf.compat.v1.name_scope('mixed_precision_check'):
    finite = [tf.reduce_all(tf.math.is_finite(grad)) for grad in grads]
    update_skipped = tf.logical_not(tf.reduce_all(tf.stack(finite)) if finite
                                    else tf.constant(True), name='update_skipped')
    scales = [v for v in optimizer.variables() if v.op.name.endswith('current_loss_scale')]
    loss_scale = None
    if scales:
      with tf.control_dependencies([update_op]):
        loss_scale = tf.identity(scales[0].read_value(), name='loss_scale_after_update')
  return update_skipped, loss_scale


def inject_nan_loss(total_loss, global_step, at_step):
  """Makes `total_loss` NaN at one global step (a debugging option).

  Args:
    total_loss: scalar floating-point loss tensor.
    global_step: the global step variable or tensor.
    at_step: the global step (before the update) whose loss becomes NaN;
      0 or less returns `total_loss` unchanged.

  Returns:
    `total_loss`, or `total_loss + NaN` at step `at_step` and
    `total_loss + 0` at every other step.
  """
  if at_step <= 0:
    return total_loss
  with tf.compat.v1.name_scope('debug_nan_loss'):
    hit = tf.equal(tf.cast(global_step, tf.int64), at_step)
    nan = tf.constant(np.nan, dtype=total_loss.dtype)
    return total_loss + tf.where(hit, nan, tf.zeros_like(nan))


def inject_inf_gradients(losses, at_run):
  """Makes the gradients of `losses` inf on one run (a debugging tool).

  The losses keep their values; only what flows back through them is
  multiplied by inf on the `at_run`-th run (1-based) of the graph, so a
  mixed-precision step skipped by the dynamic loss scale can be tried on
  purpose, on any device. Runs are counted, not global steps: a skipped step
  does not advance the global step, so keying on it would poison every later
  step too.

  Args:
    losses: dict of name -> scalar loss tensor.
    at_run: the run whose gradients become inf.

  Returns:
    A dict with the same keys and values.
  """
  with tf.compat.v1.device('/device:CPU:0'):
    runs = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False, name='inf_gradient_runs',
                                 collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
    hit = tf.equal(tf.compat.v1.assign_add(runs, 1), at_run)

  @tf.custom_gradient
  def identity(x):
    def grad(upstream):
      return upstream * tf.where(hit, tf.constant(np.inf, upstream.dtype),
                                 tf.constant(1.0, upstream.dtype))
    return tf.identity(x), grad
  return {name: identity(value) for name, value in losses.items()}
