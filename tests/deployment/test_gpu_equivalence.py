"""2 and 4 clones on logical GPUs match one clone with the whole batch.

Skips, with the reason, where TensorFlow sees no GPU. The work runs in a
subprocess (tests/deployment/gpu_equivalence_main.py) because logical GPUs
must be configured before anything in this process initialises the GPU.
"""

import json
import re
import sys

import pytest
import tensorflow as tf

from tests import cluster_util

_NO_GPU = not tf.config.list_physical_devices('GPU')


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(_NO_GPU, reason='no GPU: tf.config.list_physical_devices("GPU") is '
                    'empty, so logical GPUs cannot be carved out')
def test_clones_on_logical_gpus_match_one_big_batch(tmp_path):
  with cluster_util.ProcessGroup(str(tmp_path), hide_gpus=False) as group:
    process = group.start('gpu_equivalence', None,
                          module='tests.deployment.gpu_equivalence_main')
    code = group.wait(process, timeout=300)
    output = process.output()
  print(output)
  results = [json.loads(m) for m in re.findall(r'^RESULT (.*)$', output, re.M)]
  assert len(results) == 4, output
  for result in results:
    assert result['ok'], result
  assert code == 0, output


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q', '-s']))
