"""Builds the slim arg_scope of a `Hyperparams` proto (protos/hyperparams.proto).

A `conv_hyperparams` block says how the layers a model adds are made: weight
regularizer and initializer, activation, and batch (or group) norm. `build`
returns a function that returns the matching slim arg_scope, the form the
feature extractors and box predictors take (`conv_hyperparams_fn`):

    conv_hyperparams_fn = hyperparams_builder.build(ssd_config.feature_extractor
                                                    .conv_hyperparams, is_training=True)
    with slim.arg_scope(conv_hyperparams_fn()):
      net = slim.conv2d(net, 256, [1, 1])          # regularized, batch-normed, relu6

As the OD API's: `op: CONV` scopes conv2d, separable_conv2d and
conv2d_transpose, `op: FC` fully_connected; batch norm trains only when the
model trains and `batch_norm.train` is true; without a normalizer block no
normalizer is used. `regularize_depthwise` is parsed and, as in the OD API's
slim path, has no effect.
"""

import tensorflow as tf
import tf_slim as slim

from builders import config_checks
from protos import hyperparams_pb2

_ACTIVATIONS = {
    hyperparams_pb2.Hyperparams.NONE: None,
    hyperparams_pb2.Hyperparams.RELU: tf.nn.relu,
    hyperparams_pb2.Hyperparams.RELU_6: tf.nn.relu6,
    hyperparams_pb2.Hyperparams.SWISH: tf.nn.swish,
}


def build(hyperparams_config, is_training, path='conv_hyperparams'):
  """Returns fn() -> the slim arg_scope `hyperparams_config` describes.

  Args:
    hyperparams_config: a hyperparams_pb2.Hyperparams.
    is_training: whether the model is built for training.
    path: the block's place in the pipeline config, for error messages.

  Raises:
    ValueError: on a config of another type or an unknown enum value.
  """
  if not isinstance(hyperparams_config, hyperparams_pb2.Hyperparams):
    raise ValueError('hyperparams_config not of type hyperparams_pb.Hyperparams.')
  normalizer_fn, batch_norm_params = None, None
  if hyperparams_config.HasField('batch_norm'):
    normalizer_fn = slim.batch_norm
    batch_norm_params = build_batch_norm_params(hyperparams_config.batch_norm, is_training)
  elif hyperparams_config.HasField('group_norm'):
    normalizer_fn = slim.group_norm
  if hyperparams_config.op == hyperparams_pb2.Hyperparams.FC:
    affected_ops = [slim.fully_connected]
  else:
    affected_ops = [slim.conv2d, slim.separable_conv2d, slim.conv2d_transpose]
  regularizer = build_regularizer(hyperparams_config.regularizer, path + '.regularizer')
  initializer = build_initializer(hyperparams_config.initializer, path + '.initializer')
  activation_fn = build_activation(hyperparams_config.activation, path + '.activation')

  def arg_scope():
    layer_defaults = dict(weights_regularizer=regularizer, weights_initializer=initializer,
                          activation_fn=activation_fn, normalizer_fn=normalizer_fn)
    if batch_norm_params is None:
      with slim.arg_scope(affected_ops, **layer_defaults) as scope:
        return scope
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope(affected_ops, **layer_defaults) as scope:
        return scope

  return arg_scope


def build_batch_norm_params(batch_norm_config, is_training):
  """slim.batch_norm keyword arguments of a BatchNorm proto."""
  return {
      'decay': batch_norm_config.decay,
      'center': batch_norm_config.center,
      'scale': batch_norm_config.scale,
      'epsilon': batch_norm_config.epsilon,
      # Frozen statistics unless the model trains and the block asks for it.
      'is_training': is_training and batch_norm_config.train,
  }


def build_activation(activation, path='activation'):
  """The activation function of a Hyperparams.Activation value (None for NONE)."""
  if activation not in _ACTIVATIONS:
    raise ValueError('%s: unknown activation %d' % (path, activation))
  return _ACTIVATIONS[activation]


def build_regularizer(regularizer_config, path='regularizer'):
  """A slim weights regularizer of a Regularizer proto (None when unset)."""
  kind = config_checks.oneof_choice(regularizer_config, 'regularizer_oneof', path,
                                    ('l1_regularizer', 'l2_regularizer'))
  if kind == 'l1_regularizer':
    return slim.l1_regularizer(scale=float(regularizer_config.l1_regularizer.weight))
  if kind == 'l2_regularizer':
    return slim.l2_regularizer(scale=float(regularizer_config.l2_regularizer.weight))
  return None


def build_initializer(initializer_config, path='initializer'):
  """A weights initializer of an Initializer proto (which must set one)."""
  kind = initializer_config.WhichOneof('initializer_oneof')
  if kind == 'truncated_normal_initializer':
    config = initializer_config.truncated_normal_initializer
    return tf.compat.v1.truncated_normal_initializer(mean=config.mean, stddev=config.stddev)
  if kind == 'random_normal_initializer':
    config = initializer_config.random_normal_initializer
    return tf.compat.v1.random_normal_initializer(mean=config.mean, stddev=config.stddev)
  if kind == 'variance_scaling_initializer':
    config = initializer_config.variance_scaling_initializer
    mode = hyperparams_pb2.VarianceScalingInitializer.Mode.Name(config.mode)
    return slim.variance_scaling_initializer(factor=config.factor, mode=mode,
                                             uniform=config.uniform)
  raise ValueError('%s: set one of truncated_normal_initializer, '
                   'random_normal_initializer or variance_scaling_initializer' % path)
