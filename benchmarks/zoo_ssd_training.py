r"""Training speed of the zoo's ssd_mobilenet_v1 (300x300): 2 clones vs 1, side by side.

The model is the one `configs/zoo/ssd_mobilenet_v1_coco.config` builds (the
zoo checkpoint's architecture, 3 classes). Each step trains on a batch of
`--batch_size` examples: one clone takes all of them, or two clones on two
virtual CPU devices take half each (`model_deploy`, gradients summed on the
variables device). Input is synthetic and device-resident (random images,
two groundtruth boxes each), so the rates are the model's and the
aggregation's, not the input pipeline's. The variants alternate inside each
repeat (`bench_util.repeat_variants`) and the ratio is reported per repeat.

    python -m benchmarks.zoo_ssd_training --steps=10 --repeats=3
    python -m benchmarks.zoo_ssd_training --quick     # a smoke run

Prints examples/sec (the repeats) and steps/sec per variant and the 2-clone
/ 1-clone ratio (no goal: on virtual devices the clones share the machine's cores).
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
                       'configs', 'zoo', 'ssd_mobilenet_v1_coco.config')


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  if FLAGS.quick:
    FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps, FLAGS.repeats = (
        128, 4, 1, 2, 2)
  model_config = config_util.get_configs_from_pipeline_file(_CONFIG)['model']
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = FLAGS.image_size
  print('ssd_mobilenet_v1 %dx%d, batch %d per step, %d warm-up + %d timed steps, %d repeats'
        % (FLAGS.image_size, FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps,
           FLAGS.repeats), flush=True)
  zoo_training_lib.compare_clones(model_config, FLAGS.batch_size, FLAGS.image_size,
                                  FLAGS.warmup, FLAGS.steps, FLAGS.repeats, learning_rate=0.004)
  return 0


def define_flags():
  flags.DEFINE_integer('image_size', 300, 'Input side (the zoo config trains at 300).')
  flags.DEFINE_integer('batch_size', 8, 'Examples per step, split over the clones.')
  flags.DEFINE_integer('warmup', 3, 'Untimed steps first.')
  flags.DEFINE_integer('steps', 10, 'Timed steps per measurement.')
  flags.DEFINE_integer('repeats', 3, 'Measurements per variant, alternating.')
  flags.DEFINE_bool('quick', False, 'A smoke run: 128x128, batch 4, 2 steps, 2 repeats.')


if __name__ == '__main__':
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))
