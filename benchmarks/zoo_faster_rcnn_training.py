r"""Training speed of the zoo's faster_rcnn_resnet50: 2 clones vs 1, side by side.

The model is the one `configs/zoo/faster_rcnn_resnet50_coco.config` builds
(the zoo checkpoint's architecture: ResNet-50 v1 blocks 1-3 under the RPN,
block 4 on each proposal's 14x14 crop; 3 classes), with one change: the
config's keep_aspect_ratio_resizer (600..1024 px, one image per clone) is
replaced by a fixed_shape_resizer of `--image_size` square (default 320), so
that a clone can take more than one image and a CPU run stays affordable.
The rates are therefore those of 320x320 inputs, not of the zoo's ~600x1000.

Each step trains on a batch of `--batch_size` examples: one clone takes all
of them, or two clones on two virtual CPU devices take half each
(`model_deploy`, gradients summed on the variables device). Input is
synthetic and device-resident (random images, two groundtruth boxes each),
so the rates are the model's and the aggregation's, not the input
pipeline's. The variants alternate inside each repeat
(`bench_util.repeat_variants`) and the ratio is reported per repeat.

    python -m benchmarks.zoo_faster_rcnn_training     # 320x320, 1 + 3 steps, 3 repeats
    python -m benchmarks.zoo_faster_rcnn_training --quick     # a smoke run

Prints examples/sec (the repeats) and steps/sec per variant and the 2-clone
/ 1-clone ratio (no goal: on virtual devices the clones share the machine's
cores), in the same format as benchmarks/zoo_ssd_training.py, plus a
seconds/step table before the ratio (at well under one step a second, the
steps/sec table's one decimal says little).

Most of a step is the second stage, not the image: ResNet-50's block 4 runs
on `second_stage_batch_size` (64) crops per image, so a CPU step at 320x320
costs little more than one at 64x64 (6.5 s vs 5.9 s for 2 images here).
`--quick` therefore also cuts the proposals (first_stage_max_proposals 16,
second_stage_batch_size 8) besides using 64x64 images and one timed step;
its rates are a smoke run's, not the model's.
"""

import os
import sys

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import zoo_training_lib
from core import config_util

FLAGS = flags.FLAGS
_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       'configs', 'zoo', 'faster_rcnn_resnet50_coco.config')


def model_config_at(image_size):
  """The zoo config's model with its resizer replaced by a fixed square one.

  Args:
    image_size: side in pixels of the resized (and trained) images.

  Returns:
    a `DetectionModel` proto whose faster_rcnn.image_resizer is a
    fixed_shape_resizer of image_size x image_size.
  """
  model_config = config_util.get_configs_from_pipeline_file(_CONFIG)['model']
  # Setting a field of the oneof's other member clears keep_aspect_ratio_resizer.
  resizer = model_config.faster_rcnn.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = image_size
  return model_config


def shrink_proposals(model_config, max_proposals, second_stage_batch_size):
  """Fewer RPN proposals and sampled second-stage boxes (the bulk of a step's cost)."""
  model_config.faster_rcnn.first_stage_max_proposals = max_proposals
  model_config.faster_rcnn.second_stage_batch_size = second_stage_batch_size


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  if FLAGS.quick:
    FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps, FLAGS.repeats = (
        64, 2, 1, 1, 2)
  if FLAGS.batch_size < 2 or FLAGS.batch_size % 2:
    raise ValueError('--batch_size must be even and >= 2 (two clones take half each), '
                     'got %d' % FLAGS.batch_size)
  model_config = model_config_at(FLAGS.image_size)
  if FLAGS.quick:
    shrink_proposals(model_config, max_proposals=16, second_stage_batch_size=8)
  print('faster_rcnn_resnet50 %dx%d (fixed_shape_resizer), batch %d per step, '
        '%d warm-up + %d timed steps, %d repeats'
        % (FLAGS.image_size, FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps,
           FLAGS.repeats), flush=True)
  zoo_training_lib.compare_clones(model_config, FLAGS.batch_size, FLAGS.image_size,
                                  FLAGS.warmup, FLAGS.steps, FLAGS.repeats, learning_rate=0.0003,
                                 seconds_per_step=True)
  return 0


def define_flags():
  flags.DEFINE_integer('image_size', 320, 'Side of the fixed square resize (the zoo config '
                       'keeps the aspect ratio at 600..1024 px; smaller keeps CPU runs short).')
  flags.DEFINE_integer('batch_size', 2, 'Examples per step, split over the clones (even).')
  flags.DEFINE_integer('warmup', 1, 'Untimed steps first.')
  flags.DEFINE_integer('steps', 3, 'Timed steps per measurement.')
  flags.DEFINE_integer('repeats', 3, 'Measurements per variant, alternating.')
  flags.DEFINE_bool('quick', False, 'A smoke run: 64x64, batch 2, 16 proposals (8 sampled), '
                    '1 warm-up + 1 timed step, 2 repeats.')


if __name__ == '__main__':
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))
