"""Builds a tf.compat.v1 optimizer and its learning rate from an `Optimizer` config.

    optimizer {
      momentum_optimizer {
        learning_rate {
          cosine_decay_learning_rate {
            learning_rate_base: 0.04  total_steps: 25000
            warmup_learning_rate: 0.013  warmup_steps: 2000
          }
        }
        momentum_optimizer_value: 0.9
      }
      use_moving_average: true
      moving_average_decay: 0.9999
      learning_rate_scaling: LINEAR
      reference_batch_size: 64
    }

    optimizer, summary_vars = optimizer_builder.build(
        train_config.optimizer, global_step=global_step,
        global_batch_size=train_config.batch_size * worker_replicas)
    train_op = optimizer.minimize(total_loss, global_step=global_step)
    for var in summary_vars:
      tf.compat.v1.summary.scalar('Learning_Rate', var)

Optimizers: `rms_prop_optimizer`, `momentum_optimizer`, `adam_optimizer` and
`sgd_optimizer` map to the `tf.compat.v1.train` classes of the same names.
Learning rates: `constant_learning_rate`, `exponential_decay_learning_rate`
(with burn-in), `manual_step_learning_rate` (with optional warmup) and
`cosine_decay_learning_rate` (with warmup and hold), see
`utils/learning_schedules.py`.

Linear learning-rate scaling
----------------------------
Goyal et al., "Accurate, Large Minibatch SGD" (2017): when the minibatch grows
k-fold, multiply the learning rate by k. A config states its rates for
`reference_batch_size` examples per step; with `learning_rate_scaling: LINEAR`
every rate of the schedule (base, burn-in/warmup start, minimum and each manual
step) is multiplied by

    k = global_batch_size / reference_batch_size

where `global_batch_size` is the number of examples that contribute to one
update of the variables: the per-worker batch (split over its clones) times
the number of worker replicas whose gradients are aggregated. Step counts
(decay steps, warmup, boundaries) are not changed. So a config tuned on one
GPU with batch 64 and `reference_batch_size: 64` keeps working when trained
on 8 workers with batch 64 each: its rates are multiplied by 8. Large k
usually wants a warmup (`warmup_steps` of the cosine schedule, `warmup` of the
manual schedule) so the scaled rate is reached gradually. `NO_SCALING` (the
default) uses the rates as written and ignores `global_batch_size`.

Moving averages
---------------
With `use_moving_average: true` the returned optimizer is a
`core.moving_averages.MovingAverageOptimizer` (decay `moving_average_decay`);
that module explains how evaluation and export read the averages.
"""

from core import logs as logging
import tensorflow as tf

from core import moving_averages
from protos import optimizer_pb2
from utils import learning_schedules

# The runtime pieces live in core.moving_averages; these names stay importable from here.
MovingAverageOptimizer = moving_averages.MovingAverageOptimizer
moving_average_restore_map = moving_averages.moving_average_restore_map


def _learning_rate_scale(optimizer_config, global_batch_size):
  """The linear-scaling factor k of the module docstring (1.0 if off)."""
  scaling = optimizer_config.learning_rate_scaling
  if scaling == optimizer_config.NO_SCALING:
    return 1.0
  if scaling != optimizer_config.LINEAR:
    raise ValueError('Optimizer.learning_rate_scaling %s not supported.' %
                     scaling)
  if global_batch_size is None:
    raise ValueError(
        'Optimizer.learning_rate_scaling is LINEAR but no global_batch_size '
        'was given: pass the number of examples per update over all clones '
        'and worker replicas to optimizer_builder.build().')
  if global_batch_size <= 0:
    raise ValueError('global_batch_size must be positive, got %r.' %
                     (global_batch_size,))
  if optimizer_config.reference_batch_size <= 0:
    raise ValueError('Optimizer.reference_batch_size must be positive, got '
                     '%d.' % optimizer_config.reference_batch_size)
  scale = float(global_batch_size) / optimizer_config.reference_batch_size
  logging.info('Linear learning-rate scaling: global batch %d / reference '
               'batch %d = x%g.', global_batch_size,
               optimizer_config.reference_batch_size, scale)
  return scale


def _create_learning_rate(learning_rate_config, global_step=None, scale=1.0):
  """Builds the learning-rate tensor of a `LearningRate` config.

  Args:
    learning_rate_config: a `optimizer_pb2.LearningRate`.
    global_step: the step tensor (default: get_or_create_global_step()).
    scale: factor applied to every rate of the schedule.

  Returns:
    A scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: for a message of another type, an unset or unknown schedule,
      or an empty manual one.
  """
  if not isinstance(learning_rate_config, optimizer_pb2.LearningRate):
    raise ValueError('learning_rate_config not of type optimizer_pb2.LearningRate.')
  if global_step is None:
    global_step = tf.compat.v1.train.get_or_create_global_step()
  learning_rate_type = learning_rate_config.WhichOneof('learning_rate')

  if learning_rate_type == 'constant_learning_rate':
    config = learning_rate_config.constant_learning_rate
    return tf.constant(config.learning_rate * scale, dtype=tf.float32,
                       name='learning_rate')

  if learning_rate_type == 'exponential_decay_learning_rate':
    config = learning_rate_config.exponential_decay_learning_rate
    return learning_schedules.exponential_decay_with_burnin(
        global_step,
        config.initial_learning_rate * scale,
        config.decay_steps,
        config.decay_factor,
        burnin_learning_rate=config.burnin_learning_rate * scale,
        burnin_steps=config.burnin_steps,
        min_learning_rate=config.min_learning_rate * scale,
        staircase=config.staircase)

  if learning_rate_type == 'manual_step_learning_rate':
    config = learning_rate_config.manual_step_learning_rate
    if not config.schedule:
      raise ValueError('Empty learning rate schedule.')
    boundaries = [int(x.step) for x in config.schedule]
    rates = [float(config.initial_learning_rate * scale)]
    rates += [float(x.learning_rate * scale) for x in config.schedule]
    return learning_schedules.manual_stepping(
        global_step, boundaries, rates, config.warmup)

  if learning_rate_type == 'cosine_decay_learning_rate':
    config = learning_rate_config.cosine_decay_learning_rate
    return learning_schedules.cosine_decay_with_warmup(
        global_step,
        config.learning_rate_base * scale,
        config.total_steps,
        config.warmup_learning_rate * scale,
        config.warmup_steps,
        config.hold_base_rate_steps)

  raise ValueError('Learning_rate %s not supported.' % learning_rate_type)


def _is_summary_collection(value):
  """True for the 2017 call's second argument: a set (or list) gathering summaries."""
  return isinstance(value, (set, list))


def _build_2017(optimizer_config, global_summaries, global_step, global_batch_size):
  """The OD API's 2017 `build(optimizer_config, global_summaries)`: the optimizer alone.

  That version added a learning-rate summary to the caller's `global_summaries` set
  instead of returning the learning rate. The summary is tagged as the trainers here tag
  theirs (`LearningRate/LearningRate/learning_rate`), so TensorBoard shows one curve
  whichever trainer ran.
  """
  optimizer, summary_vars = build(optimizer_config, global_step=global_step,
                                  global_batch_size=global_batch_size)
  for learning_rate in summary_vars:
    summary = tf.compat.v1.summary.scalar(learning_rate.op.name, learning_rate,
                                          family='LearningRate')
    if isinstance(global_summaries, set):
      global_summaries.add(summary)
    else:
      global_summaries.append(summary)
  return optimizer


def build(optimizer_config, global_step=None, global_batch_size=None,
          global_summaries=None):
  """Builds an optimizer and its learning rate from an `Optimizer` config.

  The OD API's 2017 call `build(train_config.optimizer, global_summaries)`, with a set
  (or list) in the second place, works as it did: the learning-rate summary is added to
  that set and only the optimizer is returned.

  Args:
    optimizer_config: a `optimizer_pb2.Optimizer`.
    global_step: the step tensor the schedules read (default:
      `tf.compat.v1.train.get_or_create_global_step()`); or, in the 2017 call, the set
      of global summaries.
    global_batch_size: examples per variable update over all clones and
      worker replicas; required when `learning_rate_scaling` is LINEAR,
      ignored otherwise.
    global_summaries: the 2017 call's set of summaries, by keyword (the same as
      passing it second).

  Returns:
    (optimizer, summary_vars): a `tf.compat.v1.train.Optimizer` (a
    `MovingAverageOptimizer` when `use_moving_average`) and the list of
    learning-rate tensors to summarize; the optimizer alone in the 2017 call.

  Raises:
    ValueError: for a message of another type, an unset optimizer or learning
      rate (`'Optimizer None not supported.'`, `'Learning_rate None not
      supported.'`), an empty manual schedule, or LINEAR scaling without
      `global_batch_size`.
  """
  if _is_summary_collection(global_step):
    global_step, global_summaries = None, global_step
  if global_summaries is not None:
    if not _is_summary_collection(global_summaries):
      raise ValueError('global_summaries must be a set (or list) of summaries; got %r'
                       % (global_summaries,))
    return _build_2017(optimizer_config, global_summaries, global_step, global_batch_size)
  if not isinstance(optimizer_config, optimizer_pb2.Optimizer):
    raise ValueError('optimizer_config not of type optimizer_pb2.Optimizer.')
  optimizer_type = optimizer_config.WhichOneof('optimizer')
  if optimizer_type is None:
    raise ValueError('Optimizer %s not supported.' % optimizer_type)
  scale = _learning_rate_scale(optimizer_config, global_batch_size)
  config = getattr(optimizer_config, optimizer_type)
  learning_rate = _create_learning_rate(config.learning_rate, global_step,
                                        scale)
  summary_vars = [learning_rate]

  if optimizer_type == 'rms_prop_optimizer':
    optimizer = tf.compat.v1.train.RMSPropOptimizer(
        learning_rate,
        decay=config.decay,
        momentum=config.momentum_optimizer_value,
        epsilon=config.epsilon)
  elif optimizer_type == 'momentum_optimizer':
    optimizer = tf.compat.v1.train.MomentumOptimizer(
        learning_rate, momentum=config.momentum_optimizer_value)
  elif optimizer_type == 'adam_optimizer':
    optimizer = tf.compat.v1.train.AdamOptimizer(
        learning_rate, beta1=config.beta1, beta2=config.beta2,
        epsilon=config.epsilon)
  elif optimizer_type == 'sgd_optimizer':
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
  else:
    raise ValueError('Optimizer %s not supported.' % optimizer_type)

  if optimizer_config.use_moving_average:
    optimizer = MovingAverageOptimizer(
        optimizer, average_decay=optimizer_config.moving_average_decay)
  return optimizer, summary_vars


def global_batch_size(train_config, num_worker_replicas):
  """Examples behind one update of the variables, for LINEAR scaling.

  `train_config.batch_size` is each worker's batch (split over its clones).
  With `sync_replicas` one update aggregates `replicas_to_aggregate` such
  batches; otherwise every worker replica updates with its own batch, and a
  step of the whole job sees `num_worker_replicas` of them.

  Args:
    train_config: a `TrainConfig`.
    num_worker_replicas: training tasks in the job (chief included), >= 1.

  Returns:
    The global batch size (an int).
  """
  if train_config.sync_replicas:
    return train_config.batch_size * max(train_config.replicas_to_aggregate, 1)
  return train_config.batch_size * max(num_worker_replicas, 1)


def build_for_training(train_config, num_worker_replicas, global_step=None):
  """`build` for a whole `TrainConfig`: what every training path calls.

  The legacy trainer and the Estimator path (`trainer.model_lib`) both build
  their optimizer here, so one pipeline config trains with the same learning
  rate on either.

  Args:
    train_config: a `TrainConfig`.
    num_worker_replicas: training tasks in the job (chief included).
    global_step: as for `build`.

  Returns:
    (optimizer, summary_vars), as `build`.
  """
  return build(train_config.optimizer, global_step=global_step,
               global_batch_size=global_batch_size(train_config, num_worker_replicas))
