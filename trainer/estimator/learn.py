"""`tfe.learn`: the tf.contrib.learn names a ported script reaches through `tf.contrib.learn`.

Code written for TF 1.x contrib spells the mode constants and the runner
through the `tf.contrib.learn` module. With this module the port is an import:

    from trainer.estimator import learn        # was: tf.contrib.learn

    def model_fn(features, labels, mode, params):
      ...
      if mode == learn.ModeKeys.INFER:
        return tfe.EstimatorSpec(mode, predictions=predictions)
      ...

    def experiment_fn(run_config, params):
      return learn.Experiment(tfe.Estimator(model_fn, config=run_config),
                              train_input_fn, eval_input_fn, train_steps=1000)

    learn.learn_runner.run(experiment_fn, run_config=learn.RunConfig(model_dir='/tmp/m'))

`ModeKeys` keeps contrib's names: `INFER` rather than tf.estimator's
`PREDICT`. The values are the strings an Estimator passes as `mode` ('train',
'eval', 'infer'), so `mode == learn.ModeKeys.INFER` holds in a model_fn
called by `predict()` or an export, and `learn.ModeKeys.INFER ==
tfe.ModeKeys.PREDICT`.
"""

from trainer.estimator import learn_runner  # noqa: F401
from trainer.estimator import model_fn as _model_fn_lib
from trainer.estimator.experiment import Experiment  # noqa: F401
from trainer.estimator.run_config import RunConfig  # noqa: F401


class ModeKeys(object):
  """tf.contrib.learn's mode names; equal to the `mode` an Estimator passes."""

  TRAIN = _model_fn_lib.ModeKeys.TRAIN
  EVAL = _model_fn_lib.ModeKeys.EVAL
  INFER = _model_fn_lib.ModeKeys.PREDICT
