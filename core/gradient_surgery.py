"""The train config's gradient surgery, shared by both training paths.

A `TrainConfig` may ask for the gradients to be changed between
`compute_gradients` and `apply_gradients`: biases' gradients multiplied,
some variables frozen, only some variables updated, the global norm clipped,
and every gradient held back until the numerics checks passed. The legacy
loop (`trainer.trainer`) and the Estimator model_fn of `trainer.model_lib`
both call `transform_gradients`, so one config trains the same way on
either path:

    grads_and_vars = optimizer.compute_gradients(total_loss)
    grads_and_vars = gradient_surgery.transform_gradients(
        grads_and_vars, train_config, wait_for=checked_total_loss)
    train_op = optimizer.apply_gradients(grads_and_vars, global_step)

The steps run in the order of the Object Detection API's legacy trainer
(multiply, freeze, clip); the update filter (`update_trainable_variables`)
and the gradient-norm check (`core.numerics`) are slimtrain's additions.
"""

import tensorflow as tf
import tf_slim as slim

from core import numerics
from core import variables_helper


def transform_gradients(grads_and_vars, train_config, wait_for=None):
  """Applies the train config's gradient surgery, in the OD trainer's order.

  Args:
    grads_and_vars: list of (gradient, variable) pairs.
    train_config: a `train_pb2.TrainConfig`: `bias_grad_multiplier`,
      `freeze_variables`, `update_trainable_variables`,
      `gradient_clipping_by_norm`, `check_gradient_norm` (see core.numerics).
    wait_for: optional tensor or op (the checked loss) the returned gradients
      wait for, with the gradient-norm check when that is on.

  Returns:
    The transformed list of (gradient, variable) pairs.
  """
  if train_config.bias_grad_multiplier:
    grads_and_vars = variables_helper.multiply_gradients_matching_regex(
        grads_and_vars, ['.*/biases'], multiplier=train_config.bias_grad_multiplier)
  if train_config.freeze_variables:
    grads_and_vars = variables_helper.freeze_gradients_matching_regex(
        grads_and_vars, train_config.freeze_variables)
  if train_config.update_trainable_variables:
    trainable = set(variables_helper.filter_trainable_variables(
        [v for _, v in grads_and_vars],
        include_patterns=train_config.update_trainable_variables))
    grads_and_vars = [(g, v) for g, v in grads_and_vars if v in trainable]
  if train_config.gradient_clipping_by_norm > 0:
    with tf.compat.v1.name_scope('clip_grads'):
      grads_and_vars = slim.learning.clip_gradient_norms(
          grads_and_vars, train_config.gradient_clipping_by_norm)
  if train_config.check_gradient_norm and not train_config.use_mixed_precision:
    # Mixed precision's dynamic loss scale skips inf steps by itself.
    return numerics.check_gradient_norm(grads_and_vars, also_wait_for=wait_for)
  if wait_for is not None:
    return numerics.gate_gradients(grads_and_vars, wait_for)
  return grads_and_vars
