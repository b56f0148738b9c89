"""What the manifest writer learns from a pipeline config it can read: steps and ps memory.

A ps task holds its share of the model's variables plus what the optimizer
keeps per variable (slots), the moving averages and, with sync replicas, one
gradient accumulator per variable. The writer has the model built once, in a
child process (`python -m trainer.model_size`), to count those bytes, and
gives the ps pods a memory request (and limit) with room for them twice over
-- gradients arrive from every worker while the old values are still being
read -- plus a fixed allowance for TensorFlow itself:

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
import os
import subprocess
import sys

from google.protobuf import text_format

from core import logs as logging

# TensorFlow's own memory in a ps process (runtime, gRPC buffers), beyond the variables.
PS_BASE_MIB = 1024
# Requests are rounded up to a multiple of this, so small models share one size.
ROUND_MIB = 256
# Extra copies of each variable kept by each optimizer (its slots).
_OPTIMIZER_SLOTS = {'rms_prop_optimizer': 2, 'momentum_optimizer': 1, 'adam_optimizer': 2,
                    'sgd_optimizer': 0}


def variable_bytes(model_config):
  """Bytes of the variables the model of `model_config` creates for training.

  Counted by `python -m trainer.model_size` in a child process: the model
  code (builders/, models/) sits above deployment/, which does not import it.

  Raises:
    RuntimeError: when the child cannot build the model (its last error line).
  """
  result = subprocess.run([sys.executable, '-m', 'trainer.model_size'],
                          input=text_format.MessageToString(model_config),
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES=''))
  lines = result.stdout.strip().splitlines()
  if result.returncode or not lines:
    errors = result.stderr.strip().splitlines() or ['exit %d' % result.returncode]
    raise RuntimeError('trainer.model_size failed: %s' % errors[-1])
  return int(lines[-1])


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
