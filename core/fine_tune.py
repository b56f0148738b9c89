"""Fine-tuning: which variables to restore from which checkpoint, and how.

A model's `restore_map(fine_tune_checkpoint_type=...)` returns a dict
{name in the checkpoint: variable}; the trainer turns it into an `init_fn`
that `slim.learning.train` runs once, after variable initialization, when
there is no checkpoint of its own to resume from:

    # In a model (backbone built under 'FeatureExtractor/MobilenetV1/...').
    def restore_map(self, fine_tune_checkpoint_type='detection',
                    load_all_detection_checkpoint_vars=False):
      if fine_tune_checkpoint_type == 'classification':
        # An ImageNet checkpoint names the backbone 'MobilenetV1/...'.
        return fine_tune.classification_restore_map(
            backbone_scope='FeatureExtractor',
            checkpoint_exclude_scopes=['MobilenetV1/Logits'])
      return fine_tune.detection_restore_map(
          include_scopes=None if load_all_detection_checkpoint_vars
          else ['FeatureExtractor', 'BoxPredictor'])

    # In the trainer.
    init_fn = fine_tune.create_init_fn(
        model.restore_map(train_config.fine_tune_checkpoint_type),
        train_config.fine_tune_checkpoint)
    slim.learning.train(train_op, logdir, init_fn=init_fn, ...)

    # Or, from a whole TrainConfig (what both training paths do):
    init_fn = fine_tune.build_init_fn(model, train_config)   # None: nothing to load

Types:

* `classification`: only the backbone, renamed from the model's scope to the
  checkpoint's (`FeatureExtractor/MobilenetV1/Conv2d_0/weights` is read from
  `MobilenetV1/Conv2d_0/weights`); classifier heads are left out with
  `checkpoint_exclude_scopes`.
* `detection` (and `full`): every variable under its own name, except those
  under `checkpoint_exclude_scopes`; variables whose shape differs in the
  checkpoint (e.g. a box predictor for another number of classes) are skipped
  by `create_init_fn` or by passing `checkpoint_path`.

The checkpoint may be a prefix (`model.ckpt-1000`), a training directory
(its latest checkpoint), a SavedModel directory or its `variables/variables`;
see `core.variables_helper.resolve_checkpoint_path`.
"""

from core import logs as logging
import tensorflow as tf

from core import model_generations
from core import variables_helper

resolve_checkpoint_path = variables_helper.resolve_checkpoint_path

_MAX_NAMES_IN_ERRORS = 10


def _scope_list(scopes):
  """Accepts None, a comma-separated string (slim's flag style) or a list."""
  if not scopes:
    return []
  if isinstance(scopes, str):
    scopes = scopes.split(',')
  return [scope.strip().rstrip('/') for scope in scopes if scope.strip()]


def _in_scope(name, scope):
  return name == scope or name.startswith(scope + '/')


def _in_any_scope(name, scopes):
  return any(_in_scope(name, scope) for scope in scopes)


def _default_variables(variables):
  if variables is None:
    variables = tf.compat.v1.global_variables()
  return variables_helper.variables_to_checkpoint_names(variables)


def classification_restore_map(variables=None,
                               backbone_scope='FeatureExtractor',
                               checkpoint_scope='',
                               checkpoint_exclude_scopes=None,
                               checkpoint_path=None):
  """Restore map for a backbone initialized from a classification checkpoint.

  Keeps the variables under `backbone_scope` and renames them by replacing
  that scope with `checkpoint_scope`: with `backbone_scope='FeatureExtractor'`
  and `checkpoint_scope=''`, `FeatureExtractor/resnet_v1_50/conv1/weights`
  is read from `resnet_v1_50/conv1/weights`.

  Args:
    variables: candidate variables (default: all global variables).
    backbone_scope: the model's scope of the backbone; '' takes all.
    checkpoint_scope: the scope that replaces `backbone_scope` in checkpoint
      names ('' drops it).
    checkpoint_exclude_scopes: scopes (list or comma-separated string) left
      out; matched against both the model name and the checkpoint name, e.g.
      `['resnet_v1_50/logits']`.
    checkpoint_path: optional checkpoint; when given, only variables present
      there with the same shape are kept (with a warning for the others).

  Returns:
    A dict {checkpoint name: variable (or list of partitions)}.
  """
  backbone_scope = backbone_scope.rstrip('/')
  checkpoint_scope = checkpoint_scope.rstrip('/')
  excludes = _scope_list(checkpoint_exclude_scopes)
  restore_map = {}
  for name, variable in _default_variables(variables).items():
    if backbone_scope:
      if not _in_scope(name, backbone_scope) or name == backbone_scope:
        continue
      relative = name[len(backbone_scope) + 1:]
    else:
      relative = name
    checkpoint_name = (checkpoint_scope + '/' + relative
                       if checkpoint_scope else relative)
    if _in_any_scope(name, excludes) or _in_any_scope(checkpoint_name,
                                                      excludes):
      continue
    restore_map[checkpoint_name] = variable
  if checkpoint_path is not None:
    restore_map = variables_helper.get_variables_available_in_checkpoint(
        restore_map, checkpoint_path, include_global_step=False)
  return restore_map


def detection_restore_map(variables=None,
                          include_scopes=None,
                          checkpoint_exclude_scopes=None,
                          checkpoint_path=None):
  """Restore map for a model initialized from a checkpoint of the same model.

  Args:
    variables: candidate variables (default: all global variables, optimizer
      slots and moving averages included).
    include_scopes: if given, only variables under these scopes (e.g. the
      feature extractor and box predictor, leaving optimizer slots out).
    checkpoint_exclude_scopes: scopes (list or comma-separated string) left
      out, e.g. `['BoxPredictor/ClassPredictor']`.
    checkpoint_path: optional checkpoint; when given, only variables present
      there with the same shape are kept (with a warning for the others).

  Returns:
    A dict {checkpoint name (= op name): variable (or list of partitions)}.
  """
  includes = _scope_list(include_scopes)
  excludes = _scope_list(checkpoint_exclude_scopes)
  restore_map = {}
  for name, variable in _default_variables(variables).items():
    if includes and not _in_any_scope(name, includes):
      continue
    if _in_any_scope(name, excludes):
      continue
    restore_map[name] = variable
  if checkpoint_path is not None:
    restore_map = variables_helper.get_variables_available_in_checkpoint(
        restore_map, checkpoint_path, include_global_step=False)
  return restore_map


def create_init_fn(var_map, checkpoint_path, include_global_step=False,
                   allow_empty=False, name='fine_tune_saver'):
  """Returns `init_fn(sess)` restoring what the checkpoint has of `var_map`.

  The checkpoint is resolved and read now (graph construction), so a wrong
  path fails before training starts. Variables missing from the checkpoint
  or with another shape there are skipped and listed in a warning.

  Args:
    var_map: dict {checkpoint name: variable}, or a list of variables
      (restored under their own names).
    checkpoint_path: checkpoint prefix, training directory or SavedModel.
    include_global_step: whether `global_step` is restored too (fine-tuning
      normally starts counting from 0).
    allow_empty: return an `init_fn` that does nothing instead of raising
      when no variable can be restored.
    name: name of the Saver.

  Returns:
    A function `init_fn(sess)` for `slim.learning.train(init_fn=...)`.

  Raises:
    ValueError: if no checkpoint is found at `checkpoint_path`, or (unless
      `allow_empty`) none of the variables can be restored from it; the
      message names the checkpoint.
  """
  if not isinstance(var_map, dict):
    var_map = variables_helper.variables_to_checkpoint_names(var_map)
  resolved = variables_helper.resolve_checkpoint_path(checkpoint_path)
  available = variables_helper.get_variables_available_in_checkpoint(
      var_map, resolved, include_global_step=include_global_step)
  skipped = sorted(set(var_map) - set(available))
  if skipped:
    logging.warning('Fine-tuning from %s skips %d of %d variables (missing '
                    'or of another shape there): %s', resolved, len(skipped),
                    len(var_map), ', '.join(skipped))
  if not available:
    if not allow_empty:
      reader = tf.compat.v1.train.NewCheckpointReader(resolved)
      in_checkpoint = sorted(reader.get_variable_to_shape_map())
      raise ValueError(
          'None of the %d variables to restore is in checkpoint %s (resolved '
          'from %s) with a matching shape. Expected names like %s; the '
          'checkpoint has names like %s. Check fine_tune_checkpoint_type and '
          'the checkpoint scopes.' %
          (len(var_map), resolved, checkpoint_path,
           sorted(var_map)[:_MAX_NAMES_IN_ERRORS],
           in_checkpoint[:_MAX_NAMES_IN_ERRORS]))

    def init_nothing(sess):  # pylint: disable=unused-argument
      logging.warning('Nothing to restore from %s.', resolved)

    return init_nothing

  saver = tf.compat.v1.train.Saver(available, name=name)

  def init_fn(sess):
    logging.info('Restoring %d variables from %s (%d skipped).',
                 len(available), resolved, len(skipped))
    saver.restore(sess, resolved)

  return init_fn


def fine_tune_checkpoint_type(train_config):
  """The fine-tune checkpoint type of `train_config`, without changing it.

  An empty `fine_tune_checkpoint_type` falls back to the deprecated
  `from_detection_checkpoint` flag, as the OD API does.

  Args:
    train_config: a `train_pb2.TrainConfig`.

  Returns:
    'detection', 'classification' or the configured type.
  """
  if train_config.fine_tune_checkpoint_type:
    return train_config.fine_tune_checkpoint_type
  return 'detection' if train_config.from_detection_checkpoint else 'classification'


def build_init_fn(detection_model, train_config):
  """The `init_fn` restoring `train_config.fine_tune_checkpoint`, or None.

  Used by the legacy loop (`slim.learning.train(init_fn=...)`) and by the
  Estimator workflow (a `Scaffold`'s init_fn) alike. The model's own
  `restore_map` picks the variables (a 2017 model is asked with the keyword
  of its time); only those present in the checkpoint with the right shape
  are restored, the rest are logged as skipped, and the global step never is.

  Args:
    detection_model: a `DetectionModel` or `ClassificationModel`.
    train_config: a `train_pb2.TrainConfig` (read, never written).

  Returns:
    callable(sess), or None when no fine-tune checkpoint is configured.
  """
  if not train_config.fine_tune_checkpoint:
    return None
  var_map = model_generations.DetectionModelCalls(detection_model).restore_map(
      fine_tune_checkpoint_type=fine_tune_checkpoint_type(train_config),
      load_all_detection_checkpoint_vars=(
          train_config.load_all_detection_checkpoint_vars))
  return create_init_fn(var_map, train_config.fine_tune_checkpoint,
                        include_global_step=False)
