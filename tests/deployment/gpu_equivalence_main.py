"""Numerical equivalence on logical GPUs carved from one physical GPU.

Run in a fresh process (tests/deployment/test_gpu_equivalence.py does), since
logical devices can only be configured before TensorFlow touches the GPU:

    python -m tests.deployment.gpu_equivalence_main

For 2 and 4 clones, in both variable_update modes, compares the losses and
variables after 5 SGD steps with those of one clone (on logical GPU 0) fed the
whole batch; prints one `RESULT <json>` line per case and exits 1 if any
difference exceeds 1e-5 or a replicated copy differs from copy 0.
"""

import json
import sys

import numpy as np
import tensorflow as tf

from tests.deployment import deploy_testlib

TOLERANCE = 1e-5
MAX_CLONES = 4
MEMORY_MB = 1024


def _session_config():
  # Graph-mode sessions take their devices from the ConfigProto, not from the
  # eager context, so the same split is spelled out here.
  config = tf.compat.v1.ConfigProto(allow_soft_placement=False)
  config.gpu_options.experimental.virtual_devices.add(
      memory_limit_mb=[MEMORY_MB] * MAX_CLONES)
  return config


def main():
  gpus = tf.config.list_physical_devices('GPU')
  if not gpus:
    print('NO_GPU', flush=True)
    return 2
  tf.config.set_logical_device_configuration(
      gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=MEMORY_MB)] * MAX_CLONES)
  tf.compat.v1.disable_eager_execution()
  failed = False
  for num_clones in (2, 4):
    for mode in ('parameter_server', 'replicated'):
      devices = ['/device:GPU:%d' % i for i in range(num_clones)]
      base_losses, base_vars, losses, values, identical = deploy_testlib.run_equivalence(
          num_clones, mode, devices, _session_config(), baseline_devices=['/device:GPU:0'])
      loss_diff = float(np.max(np.abs(np.array(losses) - np.array(base_losses))))
      var_diff = max(float(np.max(np.abs(values[k] - base_vars[k]))) for k in base_vars)
      ok = loss_diff <= TOLERANCE and var_diff <= TOLERANCE and identical
      failed = failed or not ok
      print('RESULT ' + json.dumps({
          'num_clones': num_clones, 'variable_update': mode, 'ok': ok,
          'max_loss_diff': loss_diff, 'max_variable_diff': var_diff,
          'copies_identical': identical, 'losses': losses,
          'baseline_losses': base_losses}), flush=True)
  return 1 if failed else 0


if __name__ == '__main__':
  sys.exit(main())
