"""The session hooks tf.estimator 2.15 exported as `tf.estimator.<Hook>`.

tf.estimator re-exported TensorFlow's `tf.compat.v1.train` hooks under its
own name; TF 2.21 still has every one of them there, so `tfe.<Hook>` is the
very same class (not a copy), and anything that checks `isinstance(h,
tf.compat.v1.train.SessionRunHook)` keeps working:

    import estimator as tfe

    class CountSteps(tfe.SessionRunHook):
      def before_run(self, run_context):
        return tfe.SessionRunArgs(tf.compat.v1.train.get_global_step())

    est.train(input_fn, max_steps=100, hooks=[
        tfe.LoggingTensorHook({'loss': 'loss'}, every_n_iter=10),
        tfe.CheckpointSaverHook(est.model_dir, save_steps=50,
                                listeners=[MyListener()])])

`Estimator.train` adds its own `CheckpointSaverHook` only when none is given
(in `hooks=` or in the model_fn's `training_hooks` / `training_chief_hooks`),
and hands `saving_listeners` to the first one given, as tf.estimator did.
"""

import tensorflow as tf

__all__ = ['SessionRunHook', 'SessionRunArgs', 'SessionRunContext', 'SessionRunValues',
           'LoggingTensorHook', 'StopAtStepHook', 'CheckpointSaverHook',
           'CheckpointSaverListener', 'StepCounterHook', 'SummarySaverHook', 'NanTensorHook',
           'NanLossDuringTrainingError', 'FeedFnHook', 'ProfilerHook', 'GlobalStepWaiterHook',
           'FinalOpsHook']

_train = tf.compat.v1.train

SessionRunHook = _train.SessionRunHook
SessionRunArgs = _train.SessionRunArgs
SessionRunContext = _train.SessionRunContext
SessionRunValues = _train.SessionRunValues
LoggingTensorHook = _train.LoggingTensorHook
StopAtStepHook = _train.StopAtStepHook
CheckpointSaverHook = _train.CheckpointSaverHook
CheckpointSaverListener = _train.CheckpointSaverListener
StepCounterHook = _train.StepCounterHook
SummarySaverHook = _train.SummarySaverHook
NanTensorHook = _train.NanTensorHook
NanLossDuringTrainingError = _train.NanLossDuringTrainingError
FeedFnHook = _train.FeedFnHook
ProfilerHook = _train.ProfilerHook
GlobalStepWaiterHook = _train.GlobalStepWaiterHook
FinalOpsHook = _train.FinalOpsHook
