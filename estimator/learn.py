"""`tfe.learn`: the tf.contrib.learn names a ported script reaches through `tf.contrib.learn`.

Code written for TF 1.x contrib spells the mode constants and the runner
through the `tf.contrib.learn` module. With this module the port is an import:

    from estimator import learn        # was: tf.contrib.learn

    def model_fn(features, labels, mode, params):
      ...
      if mode == learn.ModeKeys.INFER:
        return tfe.EstimatorSpec(mode, predictions=predictions)
      ...

    def experiment_fn(run_config, params):
      return learn.Experiment(tfe.Estimator(model_fn, config=run_config),
                              train_input_fn, eval_input_fn, train_steps=1000)

    learn.learn_runner.run(experiment_fn, run_config=learn.RunConfig(model_dir='/tmp/m'))

`RunConfig` takes contrib's arguments (`num_cores`, `gpu_memory_fraction`,
... in contrib's order) on top of `tfe.RunConfig`, which it is a subclass of.

`ModeKeys` keeps contrib's names: `INFER` rather than tf.estimator's
`PREDICT`. The values are the strings an Estimator passes as `mode` ('train',
'eval', 'infer'), so `mode == learn.ModeKeys.INFER` holds in a model_fn
called by `predict()` or an export, and `learn.ModeKeys.INFER ==
tfe.ModeKeys.PREDICT`.
"""

from core import logs as logging
import tensorflow as tf

from estimator import learn_runner  # noqa: F401
from estimator import model_fn as _model_fn_lib
from estimator import run_config as _run_config_lib
from estimator.experiment import Experiment  # noqa: F401

# Stands for "not given" where contrib's RunConfig had a default that depends on
# another argument (save_checkpoints_secs: 600 unless save_checkpoints_steps is set).
_NOT_GIVEN = object()


class ModeKeys(object):
  """tf.contrib.learn's mode names; equal to the `mode` an Estimator passes."""

  TRAIN = _model_fn_lib.ModeKeys.TRAIN
  EVAL = _model_fn_lib.ModeKeys.EVAL
  INFER = _model_fn_lib.ModeKeys.PREDICT


class RunConfig(_run_config_lib.RunConfig):
  """tf.contrib.learn's RunConfig: contrib's arguments, in contrib's order, on tfe.RunConfig.

  `num_cores`, `log_device_placement` and `gpu_memory_fraction` build the
  session config (`tf_config`, also used as `session_config` unless one is
  given). The cluster comes from TF_CONFIG as for tfe.RunConfig; a `master`
  or `evaluation_master` argument has no effect (a warning says so).
  """

  def __init__(self, master=None, num_cores=0, log_device_placement=False,
               gpu_memory_fraction=1, tf_random_seed=None, save_summary_steps=100,
               save_checkpoints_secs=_NOT_GIVEN, save_checkpoints_steps=None,
               keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000,
               log_step_count_steps=100, protocol=None, evaluation_master='', model_dir=None,
               session_config=None):
    """Creates the config; Args as tf.contrib.learn.RunConfig's (see the class docstring)."""
    if master or evaluation_master:
      logging.warning('RunConfig: master=%r / evaluation_master=%r have no effect in '
                      'slimtrain; the cluster and this task come from TF_CONFIG',
                      master, evaluation_master)
    if save_checkpoints_secs is _NOT_GIVEN:
      save_checkpoints_secs = 600 if save_checkpoints_steps is None else None
    tf_config = tf.compat.v1.ConfigProto(
        log_device_placement=log_device_placement,
        inter_op_parallelism_threads=num_cores, intra_op_parallelism_threads=num_cores,
        gpu_options=tf.compat.v1.GPUOptions(
            per_process_gpu_memory_fraction=gpu_memory_fraction))
    if session_config is None and (num_cores or log_device_placement or
                                   gpu_memory_fraction != 1):
      session_config = tf_config
    super(RunConfig, self).__init__(
        model_dir=model_dir, tf_random_seed=tf_random_seed,
        save_summary_steps=save_summary_steps, save_checkpoints_steps=save_checkpoints_steps,
        save_checkpoints_secs=save_checkpoints_secs, session_config=session_config,
        keep_checkpoint_max=keep_checkpoint_max,
        keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
        log_step_count_steps=log_step_count_steps, protocol=protocol)
    self._tf_config = tf_config

  @property
  def tf_config(self):
    """The ConfigProto contrib built from num_cores, log_device_placement, gpu_memory_fraction."""
    return self._tf_config
