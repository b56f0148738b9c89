"""The manifest writer's sizes from a readable config (deployment/k8s_sizes.py)."""

import os
import sys

import pytest

from core import config_util
from deployment import k8s_sizes
from protos import train_pb2
from tests import cluster_util


def _train_config(text):
  config = train_pb2.TrainConfig()
  from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
  text_format.Merge(text, config)
  return config


@pytest.mark.parametrize('text, copies', [
    ('optimizer { sgd_optimizer {} }', 1),
    ('optimizer { momentum_optimizer {} }', 2),
    ('optimizer { adam_optimizer {} }', 3),
    ('optimizer { rms_prop_optimizer {} use_moving_average: true }', 4),
    ('optimizer { momentum_optimizer {} } sync_replicas: true', 3),
])
def test_copies_per_variable(text, copies):
  assert k8s_sizes.copies_per_variable(_train_config(text)) == copies


def test_ps_memory_by_hand():
  adam = _train_config('optimizer { adam_optimizer {} }')
  # 100 MiB of variables x 3 values over 2 ps = 150 MiB each, twice: 1024 + 300 -> 1536.
  assert k8s_sizes.ps_memory(100 * 2 ** 20, adam, num_ps=2) == '1536Mi'
  # A tiny model still gets TensorFlow's own allowance, rounded to 256 MiB.
  assert k8s_sizes.ps_memory(1000, adam, num_ps=1) == '1280Mi'
  assert k8s_sizes.ps_memory(0, adam, num_ps=1) == '1024Mi'


def test_defaults_from_the_shapes_config():
  configs = config_util.get_configs_from_pipeline_file(
      os.path.join(cluster_util.REPO_ROOT, 'configs', 'ssd_shapes.config'))
  size = k8s_sizes.variable_bytes(configs['model'])
  assert 1e6 < size < 1e7  # the small shapes SSD: a few MB of float32 variables
  assert size % 4 == 0
  defaults = k8s_sizes.defaults_from_config(configs, num_ps=1)
  assert defaults == {'num_train_steps': 1000,
                      'ps_memory': k8s_sizes.ps_memory(size, configs['train_config'], 1)}
  # The ps memory given: no model is built.
  assert k8s_sizes.defaults_from_config(configs, 1, wants_ps_memory=False) == {
      'num_train_steps': 1000}


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
