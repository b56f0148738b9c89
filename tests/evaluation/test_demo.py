"""`python -m trainer.demo` end to end: the README's main job, run once and checked.

One run of the default demo (train 1000 steps, evaluate, export, draw) is
shared by the tests below; a second, shorter run would test the same path.
"""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.evaluation import eval_testlib
from trainer import eval_images

tf.compat.v1.disable_eager_execution()

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SUMMARY = re.compile(
    r'^demo: mAP@0\.5 (?P<map50>[0-9.]+) \(mAP [0-9.]+\) after (?P<steps>\d+) steps, '
    r'(?P<rate>[0-9.]+) examples/sec, .*checkpoint (?P<checkpoint>\S+); eval (?P<eval>\S+); '
    r'export (?P<export>\S+); detections (?P<png>\S+)$', re.M)


def _run_demo(output_dir, *flags, timeout=400):
  """Runs `python -m trainer.demo`; returns the match of its summary line."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [sys.executable, '-m', 'trainer.demo', '--output_dir=%s' % output_dir] + list(flags),
      cwd=_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
  assert proc.returncode == 0, proc.stderr[-4000:]
  match = _SUMMARY.search(proc.stdout)
  assert match, proc.stdout
  return match


# mAP@0.5 that every run of the default demo must reach (why this value: at its use).
_MAP50_FLOOR = 0.80


@pytest.fixture(scope='module')
def default_demo(tmp_path_factory):
  """One run of the README's `make demo` (default steps and images), shared.

  Returns:
    (output_dir, match of the summary line).
  """
  output_dir = tmp_path_factory.mktemp('demo_run') / 'demo'
  return output_dir, _run_demo(output_dir, timeout=1800)


@pytest.mark.slow
def test_demo_reaches_its_bar_at_the_default_steps(default_demo):
  # RESULTS.md has the figures of recorded runs; the reached value is printed
  # (`-s`, `-rP`) so each run of this test adds one.
  _, match = default_demo
  print('demo reached mAP@0.5 = %s after %s steps' % (match.group('map50'),
                                                     match.group('steps')))
  assert int(match.group('steps')) == 1000
  # The bound sits under what runs reach, not at the goal's 0.5 (which a detector
  # that lost a third of its quality would still pass): benchmarks/RESULTS.md,
  # "Demo detector quality", records 0.923, 0.925 and 0.958, and a fresh clone of
  # issue 49 reached 0.895. 0.80 leaves about 0.1 below the lowest of them for
  # run-to-run spread.
  assert float(match.group('map50')) >= _MAP50_FLOOR, match.group(0)
  assert float(match.group('rate')) > 0


@pytest.mark.slow
def test_demo_trains_evaluates_exports_and_draws(default_demo):
  output_dir, match = default_demo
  assert match.group('checkpoint') == str(output_dir / 'train' / 'model.ckpt-1000')

  # The PNG: four rows (the default images to draw) of titled panels
  # detections | groundtruth, enlarged 2x: 192 + 2 + 192 wide, title + 192
  # high, 2 pixels between rows.
  png = match.group('png')
  assert png == str(output_dir / 'detections.png')
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    with open(png, 'rb') as f:
      image = sess.run(tf.io.decode_png(f.read()))
  size = 2 * eval_testlib.IMAGE_SIZE
  assert image.shape == (4 * (eval_images.title_height() + size) + 3 * 2, 2 * size + 2, 3)

  # The export is in TF Serving's layout: export/<version>/saved_model.pb.
  export = match.group('export')
  assert os.path.dirname(export) == str(output_dir / 'export')
  assert os.path.basename(export).isdigit()
  assert os.path.isfile(os.path.join(export, 'saved_model.pb'))
  events = eval_testlib.read_events(match.group('eval'))
  assert [step for step, _ in events['DetectionBoxes_Precision/mAP@.50IOU']] == [1000]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
