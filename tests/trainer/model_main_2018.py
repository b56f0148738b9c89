r"""A user's 2018 OD API `model_main.py`, ported by changing its imports only.

    python -m tests.trainer.model_main_2018 --model_dir=D --pipeline_config_path=P \
        --num_train_steps=2 --num_eval_steps=1

Its shape is the 2018 program's: the flags of that generation (`--num_eval_steps`,
`--hparams_overrides`, `--checkpoint_dir`, `--run_once`, `--eval_training_data`),
`model_hparams.create_hparams`, `create_estimator_and_inputs(..., eval_steps=...)`, the
dict's `eval_input_fn` / `eval_steps`, `create_train_and_eval_specs` with six positional
arguments, `estimator.evaluate(input_fn, eval_steps, checkpoint_path=...)` and
`continuous_eval(estimator, dir, input_fn, eval_steps, train_steps, name)`.
tests/estimator/test_model_lib_2018.py runs it.
"""

from absl import flags
import tensorflow as tf

# Was: from object_detection import model_hparams / model_lib; tf.estimator.
from trainer import estimator as tfe
from trainer import model_hparams
from trainer import model_lib

flags.DEFINE_string('model_dir', None, 'Where checkpoints and event files go.')
flags.DEFINE_string('pipeline_config_path', None, 'The pipeline config file.')
flags.DEFINE_integer('num_train_steps', None, 'Training steps.')
flags.DEFINE_integer('num_eval_steps', None, 'Evaluation steps.')
flags.DEFINE_string('hparams_overrides', None, 'name=value,... hparams overrides.')
flags.DEFINE_string('checkpoint_dir', None, 'Evaluate the checkpoints of this directory only.')
flags.DEFINE_boolean('run_once', False, 'With --checkpoint_dir: evaluate once.')
flags.DEFINE_boolean('eval_training_data', False, 'With --checkpoint_dir: evaluate the '
                     'training data.')
FLAGS = flags.FLAGS


def main(unused_argv):
  flags.mark_flag_as_required('model_dir')
  flags.mark_flag_as_required('pipeline_config_path')
  tf.compat.v1.disable_eager_execution()
  config = tfe.RunConfig(model_dir=FLAGS.model_dir)

  train_and_eval_dict = model_lib.create_estimator_and_inputs(
      run_config=config,
      hparams=model_hparams.create_hparams(FLAGS.hparams_overrides),
      pipeline_config_path=FLAGS.pipeline_config_path,
      train_steps=FLAGS.num_train_steps,
      eval_steps=FLAGS.num_eval_steps)
  estimator = train_and_eval_dict['estimator']
  train_input_fn = train_and_eval_dict['train_input_fn']
  eval_input_fn = train_and_eval_dict['eval_input_fn']
  eval_on_train_input_fn = train_and_eval_dict['eval_on_train_input_fn']
  predict_input_fn = train_and_eval_dict['predict_input_fn']
  train_steps = train_and_eval_dict['train_steps']
  eval_steps = train_and_eval_dict['eval_steps']

  if FLAGS.checkpoint_dir:
    if FLAGS.eval_training_data:
      name, input_fn = 'training_data', eval_on_train_input_fn
    else:
      name, input_fn = 'validation_data', eval_input_fn
    if FLAGS.run_once:
      estimator.evaluate(input_fn, eval_steps,
                         checkpoint_path=tf.train.latest_checkpoint(FLAGS.checkpoint_dir))
    else:
      model_lib.continuous_eval(estimator, FLAGS.checkpoint_dir, input_fn, eval_steps,
                                train_steps, name)
  else:
    train_spec, eval_specs = model_lib.create_train_and_eval_specs(
        train_input_fn,
        eval_input_fn,
        eval_on_train_input_fn,
        predict_input_fn,
        train_steps,
        eval_steps,
        eval_on_train_data=False)
    # One eval spec at a time, as then.
    tfe.train_and_evaluate(estimator, train_spec, eval_specs[0])


if __name__ == '__main__':
  tf.compat.v1.app.run()
