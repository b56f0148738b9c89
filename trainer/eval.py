r"""Evaluation command line (the Object Detection API's legacy eval.py).

Evaluate the latest checkpoint once:

    python -m trainer.eval --pipeline_config_path=configs/ssd_shapes.config \
        --checkpoint_dir=out/demo/train --eval_dir=out/demo/eval --run_once

Evaluate every new checkpoint while training runs, until the checkpoint at
step --num_train_steps (default `train_config.num_steps`) was evaluated, or
no new checkpoint came for --eval_timeout seconds:

    python -m trainer.eval --pipeline_config_path=P --checkpoint_dir=D --eval_dir=E \
        --num_train_steps=2000 --eval_timeout=600

The evaluator follows training to its end: it exits 0 once it evaluated a
checkpoint at step >= --num_train_steps, even when that checkpoint appears
after the chief has exited (the last checkpoint of a job). With a known last
step, `eval_config.max_evals` caps only the evaluations before it: at most
max_evals - 1 earlier checkpoints are evaluated (later ones are skipped,
logged), and the final one always is; `max_evals: 1` evaluates the final
checkpoint alone. --num_train_steps=0 (or a config without num_steps) means
no known end: then max_evals stops the evaluator as before.

--checkpoint_dir may also be one checkpoint prefix (e.g. D/model.ckpt-1000).
Without --run_once, a --checkpoint_dir that does not exist yet is waited for
(within --eval_timeout; the log says so): the evaluator of a Kubernetes job
starts before the chief has created train_dir. A path that cannot become a
training directory is an error at once: with --run_once, a checkpoint-like
name (`model.ckpt-1000`) without its `.index`, or a missing name inside an
existing training directory. After --eval_timeout without any checkpoint the
evaluator exits 0 (logging that it evaluated nothing): the job's outcome is
the chief's. Metrics (COCO mAP or top-1/top-5 accuracy, mean losses) and images with boxes
drawn go to TensorBoard summaries in --eval_dir; the pipeline config is copied
there as pipeline.config. The process exits 0 after the last evaluation, 1 on
a bad flag, config or checkpoint (the message names it), 129 on a failure
known to pass (deployment/exit_codes.py: an unavailable storage service, a
storage EIO/ETIMEDOUT, a GPU that failed to initialise).
"""

import sys

from absl import app
from absl import flags
from core import logs as logging
import tensorflow as tf

from builders import graph_rewriter_builder
from core import config_util
from core import checkpoints
from deployment import exit_codes
from trainer import evaluator

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module runs as the program.

  Several command modules share flag names (`--pipeline_config_path`), so
  defining them at import would clash when one process imports two of them.
  """
  flags.DEFINE_string('pipeline_config_path', '',
                      'Path to a text-format TrainEvalPipelineConfig.')
  flags.DEFINE_string('checkpoint_dir', '',
                      'Directory of checkpoints to evaluate, or one checkpoint prefix.')
  flags.DEFINE_string('eval_dir', '', 'Directory to write eval summaries to.')
  flags.DEFINE_boolean('run_once', False, 'Evaluate the latest checkpoint once, then exit.')
  flags.DEFINE_boolean('eval_training_data', False,
                       'Evaluate on the train_input_reader instead of eval_input_reader.')
  flags.DEFINE_integer('eval_timeout', None,
                       'Seconds to wait for a new checkpoint before exiting (0: forever); '
                       'default eval_config.eval_timeout_secs.')
  flags.DEFINE_integer('num_train_steps', None,
                       'The step training ends at: exit 0 after evaluating a checkpoint at '
                       'this step or later (default train_config.num_steps; 0: no end).')


def run(argv=None):
  """Evaluates as the flags say; returns the process exit code.

  Raises:
    app.UsageError: on a missing required flag.
  """
  del argv
  for name in ('pipeline_config_path', 'checkpoint_dir', 'eval_dir'):
    if not getattr(FLAGS, name):
      raise app.UsageError('--%s is required' % name)
  if FLAGS.eval_timeout is not None and FLAGS.eval_timeout < 0:
    raise app.UsageError('--eval_timeout must be >= 0, got %d' % FLAGS.eval_timeout)
  if FLAGS.num_train_steps is not None and FLAGS.num_train_steps < 0:
    raise app.UsageError('--num_train_steps must be >= 0, got %d' % FLAGS.num_train_steps)
  overrides = {}
  if FLAGS.num_train_steps is not None:
    overrides['train_config.num_steps'] = FLAGS.num_train_steps
  sections = ('model', 'eval_config',
              'train_input_reader' if FLAGS.eval_training_data else 'eval_input_reader')
  try:
    configs = config_util.get_configs_from_pipeline_file(
        FLAGS.pipeline_config_path, overrides=overrides, required_sections=sections)
    graph_rewriter_builder.check_configs(configs, is_training=False)
    try:
      checkpoints.checkpoint_source(FLAGS.checkpoint_dir, may_wait=not FLAGS.run_once)
    except ValueError as e:
      raise ValueError('--checkpoint_dir=%s' % e) from None
    config_util.save_pipeline_config(
        config_util.create_pipeline_proto_from_configs(configs), FLAGS.eval_dir)
    result = evaluator.evaluate_from_configs(
        configs, FLAGS.checkpoint_dir, FLAGS.eval_dir, run_once=FLAGS.run_once,
        eval_timeout=FLAGS.eval_timeout, eval_training_data=FLAGS.eval_training_data,
        return_result=True)
  except ValueError as e:
    logging.error('%s', e)
    sys.stderr.write('trainer.eval: error: %s\n' % e)
    return 1
  logging.info('evaluations: %d, last step %s, stopped: %s', result.num_evaluations,
               result.global_step, result.stop_reason)
  return 0


def main(argv):
  tf.compat.v1.disable_eager_execution()
  sys.exit(run(argv))


if __name__ == '__main__':
  define_flags()
  app.run(exit_codes.main_with_exit_codes(main, 'trainer.eval'))
