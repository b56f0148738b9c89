"""`python -m trainer.demo_zoo` (`make demo-zoo`) end to end, at a few steps.

The stand-in zoo checkpoint is made first (the zoo architecture with its
90-class head), then the 3-class fine-tuning restores it and is evaluated.
The recorded default runs (300 + 300 steps) are in benchmarks/RESULTS.md.
"""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SUMMARY = re.compile(
    r'^demo-zoo: mAP@0\.5 (?P<map50>[0-9.]+) \(mAP [0-9.]+\) after (?P<steps>\d+) '
    r'fine-tuning steps from (?P<source>\S+), (?P<rate>[0-9.]+) examples/sec, .*'
    r'checkpoint (?P<checkpoint>\S+)$', re.M)


@pytest.mark.slow
def test_demo_zoo_fine_tunes_from_a_stand_in_zoo_checkpoint(tmp_path):
  output_dir = tmp_path / 'demo-zoo'
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [sys.executable, '-m', 'trainer.demo_zoo', '--output_dir=%s' % output_dir,
       '--num_pretrain_steps=2', '--num_train_steps=2', '--batch_size=2',
       '--num_train_images=8', '--num_val_images=2'],
      cwd=_ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-4000:]
  match = _SUMMARY.search(proc.stdout)
  assert match, proc.stdout
  assert int(match['steps']) == 2
  assert 0.0 <= float(match['map50']) <= 1.0
  source = match['source']
  assert source.startswith(str(output_dir / 'zoo_checkpoint')), source
  # The stand-in has the zoo's 90-class head; the fine-tuned model has 3 classes.
  zoo = dict(tf.train.list_variables(source))
  tuned = dict(tf.train.list_variables(match['checkpoint']))
  head = 'BoxPredictor_0/ClassPredictor/weights'
  assert zoo[head][-1] == 3 * 91 and tuned[head][-1] == 3 * 4
  assert zoo['FeatureExtractor/MobilenetV1/Conv2d_0/weights'] == [3, 3, 3, 32]
  assert re.search(r'Restoring \d+ variables from .*zoo_checkpoint', proc.stderr)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
