"""What the manifest writer learns from a pipeline config it can read: steps and ps memory.

A ps task holds its share of the model's variables plus what the optimizer
keeps per variable (slots), the moving averages and, with sync replicas, one
gradient accumulator per variable. The writer builds the model once in a
throw-away graph to count those bytes, and gives the ps pods a memory
request (and limit) with room for them twice over -- gradients arrive from
every worker while the old values are still being read -- plus a fixed
allowance for TensorFlow itself:

    configs = config_util.get_configs_from_pipeline_file('configs/ssd_shapes.config')
    k8s_sizes.variable_bytes(configs['model'])                    # 2341728
    k8s_sizes.ps_memory(2341728, configs['train_config'], num_ps=1)   # '1280Mi'
    k8s_sizes.defaults_from_config(configs, num_ps=1)
    # {'num_train_steps': 1000, 'ps_memory': '1280Mi'}

Differs on purpose: an estimate, not a measurement; the variables are those
of training (first and second stage of a two-stage model), counted from the
graph's variable ops as deploy's device chooser weighs them.
"""

import math

from core import logs as logging
import tensorflow as tf

from deployment import device_setters

# TensorFlow's own memory in a ps process (runtime, gRPC buffers), beyond the variables.
PS_BASE_MIB = 1024
# Requests are rounded up to a multiple of this, so small models share one size.
ROUND_MIB = 256
# Extra copies of each variable kept by each optimizer (its slots).
_OPTIMIZER_SLOTS = {'rms_prop_optimizer': 2, 'momentum_optimizer': 1, 'adam_optimizer': 2,
                    'sgd_optimizer': 0}
# Square images of this size when the resizer names none (variables do not depend on it).
_DEFAULT_IMAGE_SIZE = 320


def _image_size(model_config):
  """(height, width) the model's resizer produces, or a square default."""
  model = getattr(model_config, model_config.WhichOneof('model'))
  if not hasattr(model, 'image_resizer'):
    return _DEFAULT_IMAGE_SIZE, _DEFAULT_IMAGE_SIZE
  resizer = model.image_resizer
  kind = resizer.WhichOneof('image_resizer_oneof')
  if kind == 'fixed_shape_resizer':
    return resizer.fixed_shape_resizer.height, resizer.fixed_shape_resizer.width
  if kind == 'keep_aspect_ratio_resizer':
    size = resizer.keep_aspect_ratio_resizer.min_dimension
    return size, size
  return _DEFAULT_IMAGE_SIZE, _DEFAULT_IMAGE_SIZE


def variable_bytes(model_config):
  """Bytes of the variables the model of `model_config` creates for training.

  Builds the model in a graph of its own (nothing is run).
  """
  from builders import model_builder  # pylint: disable=import-outside-toplevel
  graph = tf.Graph()
  with graph.as_default():
    model = model_builder.build(model_config, is_training=True, add_summaries=False)
    height, width = _image_size(model_config)
    images = tf.compat.v1.placeholder(tf.float32, [1, height, width, 3])
    preprocessed, true_shapes = model.preprocess(images)
    model.predict(preprocessed, true_shapes)
  return sum(device_setters.variable_bytes(op.node_def) for op in graph.get_operations()
             if device_setters.is_ps_op(op.type))


def copies_per_variable(train_config):
  """How many values of each variable the ps tasks keep during training."""
  optimizer = train_config.optimizer
  copies = 1 + _OPTIMIZER_SLOTS.get(optimizer.WhichOneof('optimizer'), 2)
  if optimizer.use_moving_average:
    copies += 1
  if train_config.sync_replicas:
    copies += 1
  return copies


def ps_memory(model_bytes, train_config, num_ps):
  """The memory request of one ps task, a quantity like '1280Mi'.

  Args:
    model_bytes: `variable_bytes` of the model.
    train_config: the config's TrainConfig (optimizer, moving average, sync).
    num_ps: ps tasks sharing the variables.
  """
  per_task = model_bytes * copies_per_variable(train_config) / float(max(num_ps, 1))
  mib = PS_BASE_MIB + 2 * per_task / 2 ** 20
  return '%dMi' % (int(math.ceil(mib / ROUND_MIB)) * ROUND_MIB)


def defaults_from_config(configs, num_ps, wants_ps_memory=True):
  """{'num_train_steps': N, 'ps_memory': '..Mi'} the writer takes from a readable config.

  Args:
    configs: the dict of `config_util.get_configs_from_pipeline_file`.
    num_ps: ps tasks of the job.
    wants_ps_memory: False when the ps memory is given (no model is built).

  Returns:
    The dict; 'ps_memory' is left out when the model cannot be built here
    (a warning says why, and the writer's default applies).
  """
  train_config = configs['train_config']
  defaults = {'num_train_steps': train_config.num_steps}
  if wants_ps_memory and num_ps:
    try:
      size = variable_bytes(configs['model'])
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Could not build the model to size the ps memory (%s: %s); give '
                      '--resources=ps:memory=...', type(e).__name__, e)
      return defaults
    defaults['ps_memory'] = ps_memory(size, train_config, num_ps)
    logging.info('ps memory %s: %.1f MB of variables x %d values each over %d ps task(s), '
                 'twice, plus %d MiB', defaults['ps_memory'], size / 1e6,
                 copies_per_variable(train_config), num_ps, PS_BASE_MIB)
  return defaults
