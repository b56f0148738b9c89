"""`Estimator`: tf.estimator's train / evaluate / predict / export on TF 2.21.

TensorFlow 2.16 removed `tf.estimator`; this class keeps its contract (names,
defaults, error texts, model_dir layout) on `tf.compat.v1` graph mode and
`MonitoredTrainingSession`, so a `model_fn` written for tf.estimator ports by
changing one import:

    import estimator as tfe

    def input_fn():
      ds = tf.data.Dataset.from_tensor_slices(({'x': images}, labels))
      return ds.shuffle(1000).repeat().batch(32)

    est = tfe.Estimator(model_fn, model_dir='/tmp/mnist', params={'lr': 0.1},
                        config=tfe.RunConfig(save_checkpoints_steps=100))
    est.train(input_fn, max_steps=1000)
    metrics = est.evaluate(eval_input_fn, steps=10)   # includes loss, global_step
    for p in est.predict(predict_input_fn): ...
    path = est.export_saved_model('/tmp/mnist/export/Servo', serving_input_receiver_fn)

model_dir layout (as tf.estimator): `model.ckpt-<step>.{index,data-*,meta}`,
`checkpoint`, `graph.pbtxt`, training `events.out.tfevents.*`, evaluation
events in `eval/` or `eval_<name>/`, exports in `<base>/<timestamp>/`.

Several devices in one process: `RunConfig(num_clones=N)` makes `train()`
call the model_fn once per clone on a slice of the batch; see replicate.py
for how the model_fn's `optimizer.minimize(...)` becomes one averaged update.
`RunConfig(train_distribute=MirroredStrategy(devices=[...]))` builds the same
clones, each reading its own batch; a OneDeviceStrategy places the model on
its device; evaluate() under `eval_distribute` uses one device
(distribute.py).
"""

import contextlib
import copy
import os
import tempfile
import time

import numpy as np
import tensorflow as tf
from core import logs as logging

from core import checkpoints
from core import paths
from estimator import distribute
from estimator import faults
from estimator import model_fn as model_fn_lib
from estimator import replicate
from estimator import run_config as run_config_lib
from estimator import saved_model
from estimator import util
from estimator import warm_starting
from estimator.eval_summaries import write_checkpoint_path_to_summary
from estimator.eval_summaries import write_dict_to_summary

ModeKeys = model_fn_lib.ModeKeys

_VALID_MODEL_FN_ARGS = {'features', 'labels', 'mode', 'params', 'self', 'config'}
LOSS_METRIC_KEY = 'loss'
AVERAGE_LOSS_METRIC_KEY = 'average_loss'
GLOBAL_STEP_KEY = tf.compat.v1.GraphKeys.GLOBAL_STEP
# Members a subclass may override: each is a method or property the Estimator
# really calls through `self`.
_ALLOWED_OVERRIDES = {'model_fn', '_create_and_assert_global_step', '_export_all_saved_models',
                      'latest_checkpoint', '_call_input_fn'}


def _declared_subset(fn, offered):
  """The entries of `offered` whose names `fn` declares as arguments.

  tf.estimator passes mode, params, config (and input_context, labels) only
  to functions that ask for them; both user functions go through here.
  """
  declared = set(util.fn_args(fn))
  return {name: value for name, value in offered.items() if name in declared}


def _check_step_counts(steps, max_steps):
  """`steps` (more steps) and `max_steps` (up to a step): at most one, positive.

  Raises:
    ValueError: naming the argument at fault.
  """
  if None not in (steps, max_steps):
    raise ValueError('Can not provide both steps and max_steps.')
  for name, value in (('steps', steps), ('max_steps', max_steps)):
    if value is not None and value <= 0:
      raise ValueError('Must specify {} > 0, given: {}'.format(name, value))


def _verify_model_fn_args(model_fn, params):
  """Checks that the Estimator knows how to fill every argument of `model_fn`.

  `features` is the one required argument; `params` must be declared when
  params are given (declaring it without params only earns a warning).

  Raises:
    ValueError: naming `model_fn` and the first mismatch found.
  """
  declared = set(util.fn_args(model_fn))
  takes_params = 'params' in declared
  if 'features' not in declared:
    complaint = 'must include features argument.'
  elif params is not None and not takes_params:
    complaint = ('does not include params argument, but params (%s) is passed to '
                 'Estimator.' % (params,))
  else:
    if params is None and takes_params:
      logging.warning("Estimator's model_fn (%s) includes params argument, but params are "
                      'not passed to Estimator.', model_fn)
    unknown = sorted(declared - _VALID_MODEL_FN_ARGS)
    complaint = unknown and 'has following not expected args: %s' % (unknown,)
  if complaint:
    raise ValueError('model_fn (%s) %s' % (model_fn, complaint))


def _default_session_config():
  """Soft placement and a single meta-optimizer pass, tf.estimator's default."""
  rewrite_options = tf.compat.v1.ConfigProto().graph_options.rewrite_options
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.graph_options.rewrite_options.meta_optimizer_iterations = (
      rewrite_options.ONE)
  return config


def _resolve_config(config, model_dir):
  """Returns (config, model_dir) merged as tf.estimator does (temp dir if none)."""
  if config is None:
    config = run_config_lib.RunConfig()
  elif not isinstance(config, run_config_lib.RunConfig):
    raise ValueError('config must be an instance of `RunConfig`, but provided %s.' % config)
  if hasattr(model_dir, '__fspath__'):
    model_dir = os.fspath(model_dir)
  if model_dir and config.model_dir and model_dir != config.model_dir:
    raise ValueError(
        "`model_dir` are set both in constructor and `RunConfig`, but with different values. "
        "In constructor: '{}', in `RunConfig`: '{}' ".format(model_dir, config.model_dir))
  model_dir = model_dir or config.model_dir
  if not model_dir:
    model_dir = tempfile.mkdtemp()
    logging.warning('Using temporary folder as model directory: %s', model_dir)
  if config.model_dir != model_dir:
    config = config.replace(model_dir=model_dir)
  if config.session_config is None:
    config = config.replace(session_config=_default_session_config())
  return config, model_dir


def _replica_device_setter(config):
  """tf.estimator's device function: variables round-robin on the ps tasks."""
  if config.num_ps_replicas <= 0:
    return None
  worker_device = '/job:%s/task:%d' % (config.task_type, config.task_id)
  from tensorflow.python.training import device_setter  # The ps-op list only.
  return tf.compat.v1.train.replica_device_setter(
      ps_tasks=config.num_ps_replicas, worker_device=worker_device, merge_devices=True,
      ps_ops=list(device_setter.STANDARD_PS_OPS), cluster=config.cluster_spec)


# tf.estimator's name for `core.checkpoints.latest_step` (0 when there is no checkpoint).
load_global_step_from_checkpoint_dir = checkpoints.latest_step


class Estimator(object):
  """Trains, evaluates, predicts with and exports a model given by `model_fn`."""

  def __init__(self, model_fn, model_dir=None, config=None, params=None,
               warm_start_from=None):
    """Wraps `model_fn` with where it saves and how it runs.

    Args:
      model_fn: `fn(features, labels, mode, params, config) -> EstimatorSpec`;
        only `features` is required, the others are passed when declared.
      model_dir: directory for checkpoints and events (default: the config's,
        else a new temporary directory).
      config: a `RunConfig` (default `RunConfig()`).
      params: dict of hyperparameters passed to model_fn (deep-copied).
      warm_start_from: a checkpoint path, SavedModel dir or `WarmStartSettings`.

    Raises:
      ValueError: tf.estimator's errors for a bad model_fn, config or model_dir.
    """
    self._assert_members_are_not_overridden()
    if not model_fn:
      raise ValueError('model_fn must be provided to Estimator.')
    _verify_model_fn_args(model_fn, params)
    self._config, self._model_dir = _resolve_config(config, model_dir)
    logging.info('Using config: %s', self._config)
    self._session_config = self._config.session_config
    self._device_fn = self._config.device_fn or _replica_device_setter(self._config)
    self._model_fn = model_fn
    self._params = copy.deepcopy(params or {})
    self._warm_start_settings = warm_starting.get_warm_start_settings(warm_start_from)

  def _assert_members_are_not_overridden(self):
    """Subclasses may override only the few hooks tf.estimator allows."""
    cls = self.__class__
    if cls is Estimator:
      return
    members = {m for m in dir(Estimator) if not m.startswith('__')}
    overridden = sorted(m for m in (members & set(cls.__dict__)) - _ALLOWED_OVERRIDES
                        if getattr(Estimator, m) != getattr(cls, m))
    if overridden:
      raise ValueError('Subclasses of Estimator cannot override members of Estimator. '
                       '{} does override {}'.format(cls, overridden))

  # Properties ---------------------------------------------------------------

  @property
  def model_dir(self):
    return self._model_dir

  @property
  def config(self):
    return copy.deepcopy(self._config)

  @property
  def params(self):
    return copy.deepcopy(self._params)

  @property
  def model_fn(self):
    """The model_fn, called with the arguments it declares."""
    def public_model_fn(features, labels, mode, config):
      return self._call_model_fn(features, labels, mode, config)
    return public_model_fn

  def eval_dir(self, name=None):
    """`model_dir/eval` or `model_dir/eval_<name>`: where evaluate() writes events."""
    return paths.join(self._model_dir, 'eval' if not name else 'eval_' + name)

  def latest_checkpoint(self):
    """Prefix of the newest checkpoint in model_dir, or None."""
    return tf.train.latest_checkpoint(self._model_dir)

  def _check_checkpoint_available(self):
    if not self.latest_checkpoint():
      raise ValueError('Could not find trained model in model_dir: {}.'.format(
          self._model_dir))

  def get_variable_names(self):
    """Names of the variables in the latest checkpoint."""
    self._check_checkpoint_available()
    return [name for name, _ in tf.train.list_variables(self._model_dir)]

  def get_variable_value(self, name):
    """Value (numpy) of variable `name` in the latest checkpoint."""
    self._check_checkpoint_available()
    return tf.train.load_variable(self._model_dir, name)

  # Graph building -------------------------------------------------------------

  def _create_and_assert_global_step(self, graph):
    step = tf.compat.v1.train.create_global_step(graph)
    assert step is tf.compat.v1.train.get_global_step(graph)
    assert step.dtype.is_integer
    return step

  def _call_input_fn(self, input_fn, mode, input_context=None):
    """Calls input_fn with the mode/params/config/input_context it declares."""
    offered = {'mode': mode, 'params': self.params, 'config': self.config,
               'input_context': input_context}
    with tf.compat.v1.device('/cpu:0'):
      return input_fn(**_declared_subset(input_fn, offered))

  def _get_features_and_labels_from_input_fn(self, input_fn, mode, placement=None,
                                             num_replicas=1):
    """(features, labels, hooks) of the input_fn; lists of them for several replicas.

    Args:
      input_fn: the user's input_fn.
      mode: a `ModeKeys`.
      placement: the strategy's `distribute.Placement` (None without one):
        the input_fn then gets a `tf.distribute.InputContext`.
      num_replicas: replicas reading the input; above 1, features and labels
        are lists with one entry per replica (each its own batch of a
        Dataset, else a slice of the batch).
    """
    context = distribute.input_context(placement, num_replicas)
    # Only a strategy passes the context: an override may take (input_fn, mode) only.
    result = self._call_input_fn(*((input_fn, mode) if context is None else
                                   (input_fn, mode, context)))
    if num_replicas == 1:
      return util.parse_input_fn_result(result)
    features, labels, hooks = util.parse_per_replica_input_fn_result(result, num_replicas)
    if not isinstance(features, list):  # Not a Dataset: the clones share its batch.
      with tf.compat.v1.device(self._config.deployment_config.inputs_device()):
        features = replicate.split_batch(features, num_replicas)
        labels = replicate.split_batch(labels, num_replicas)
    return features, labels, hooks

  @contextlib.contextmanager
  def _mode_graph(self, input_fn, mode, device_fn=None, placement=None, num_replicas=1):
    """A fresh default graph holding the seed, the global step and the input.

    Every mode starts the same way; the body adds the model_fn's part.
    `placement` and `num_replicas` are those of
    `_get_features_and_labels_from_input_fn`.

    Yields:
      (global step, features, labels, hooks the input needs).
    """
    with tf.Graph().as_default() as graph, graph.device(device_fn):
      tf.compat.v1.set_random_seed(self._config.tf_random_seed)
      global_step = self._create_and_assert_global_step(graph)
      features, labels, input_hooks = self._get_features_and_labels_from_input_fn(
          input_fn, mode, placement, num_replicas)
      yield global_step, features, labels, input_hooks

  def _checkpoint_to_use(self, checkpoint_path, purpose):
    """`checkpoint_path`, else the latest one; None (logged) in an untrained model_dir."""
    if checkpoint_path:
      return checkpoint_path
    latest = self.latest_checkpoint()
    if not latest:
      logging.info('Could not find trained model in model_dir: {}, running '
                   'initialization to {}.'.format(self._model_dir, purpose))
    return latest

  def _call_model_fn(self, features, labels, mode, config):
    """Calls model_fn with the arguments it declares; checks the result."""
    kwargs = _declared_subset(self._model_fn, {
        'labels': labels, 'mode': mode, 'params': self.params, 'config': config})
    if labels is not None and 'labels' not in kwargs:
      raise ValueError('model_fn does not take labels, but input_fn returns labels.')
    logging.info('Calling model_fn.')
    spec = self._model_fn(features=features, **kwargs)
    logging.info('Done calling model_fn.')
    if not isinstance(spec, model_fn_lib.EstimatorSpec):
      raise ValueError('model_fn should return an EstimatorSpec.')
    return spec

  def _maybe_warm_start(self, checkpoint_path):
    if not checkpoint_path and self._warm_start_settings:
      logging.info('Warm-starting with WarmStartSettings: %s', self._warm_start_settings)
      warm_starting.warm_start(self._warm_start_settings)

  # Training ---------------------------------------------------------------------

  def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
    """Trains the model on batches from `input_fn`.

    Args:
      input_fn: returns a Dataset of (features, labels) or the tuple itself.
      hooks: extra `SessionRunHook`s.
      steps: train this many more steps (incremental).
      max_steps: train until the global step reaches this (absolute).
      saving_listeners: `CheckpointSaverListener`s called around each save.

    Returns:
      self.

    Raises:
      ValueError: for a ps/evaluator task, both or non-positive step counts.
    """
    if self._config.task_type in (run_config_lib.TaskType.EVALUATOR,
                                  run_config_lib.TaskType.PS):
      raise ValueError('Train has been called wrong configuration. Please use '
                       'tf.estimator.train_and_evaluate which calls proper API according '
                       'to given configuration. Current configuration: {}.'.format(
                           self.config))
    hooks = util.check_hooks_type(hooks)
    _check_step_counts(steps, max_steps)
    if max_steps is not None and load_global_step_from_checkpoint_dir(
        self._model_dir) >= max_steps:
      logging.info('Skipping training since max_steps has already saved.')
      return self
    if (steps, max_steps) != (None, None):
      hooks.append(tf.compat.v1.train.StopAtStepHook(steps, max_steps))
    saving_listeners = util.check_listeners_type(saving_listeners)
    loss = self._train_model(input_fn, hooks, saving_listeners)
    logging.info('Loss for final step: %s.', loss)
    return self

  def _train_model(self, input_fn, hooks, saving_listeners):
    # A MirroredStrategy over N devices: N clones, each reading its own batch.
    placement = distribute.placement(self._config.train_distribute, 'train_distribute')
    mirrored = placement is not None and placement.num_replicas > 1
    if mirrored:
      distribute.check_devices(placement)
    with self._mode_graph(input_fn, ModeKeys.TRAIN, self._device_fn, placement,
                          placement.num_replicas if mirrored else 1) as (
                              global_step, features, labels, input_hooks):
      if mirrored:
        spec = replicate.build_clones(self, features, labels, self._config.deployment_config,
                                      split=False, setting=placement.describe())
      elif self._config.num_clones > 1 or self._config._deployment_config is not None:
        spec = replicate.build_clones(self, features, labels, self._config.deployment_config)
      else:
        with distribute.device_scope(placement):
          spec = self._call_model_fn(features, labels, ModeKeys.TRAIN, self.config)
      return self._train_with_estimator_spec(spec, global_step, input_hooks + hooks,
                                             saving_listeners)

  def _train_with_estimator_spec(self, spec, global_step, worker_hooks, saving_listeners):
    """Completes what `model_fn` left out, then runs `spec.train_op` until a hook stops.

    "What it left out" is the warm start of a fresh model_dir, a `loss`
    summary, the standard per-step hooks, a default Saver, a checkpoint hook
    carrying `saving_listeners`, and (beside a master) worker 0's summaries.
    """
    config, model_dir = self._config, self._model_dir
    self._maybe_warm_start(self.latest_checkpoint())
    util.publish_loss(spec.loss)
    worker_hooks = util.standard_training_hooks(spec, global_step, worker_hooks, config)
    util.add_default_saver(spec.scaffold, config)
    chief_hooks, checkpoint_hook = util.checkpoint_hook(spec, worker_hooks, config, model_dir)
    util.attach_listeners(checkpoint_hook, saving_listeners)
    save_summary_steps, log_step_count_steps = util.summary_duty(
        spec, worker_hooks, config, model_dir)
    # A ps cluster survives a lost ps and stops with a checkpoint on SIGTERM
    # (deployment/fault_runtime.py, through faults.py).
    loss, any_step_done = faults.run_training(
        config, model_dir, spec, worker_hooks,
        chief_hooks + tuple(spec.training_chief_hooks), save_summary_steps,
        log_step_count_steps)
    if not any_step_done:
      logging.warning('Training with estimator made no steps. Perhaps input is empty or '
                      'misspecified.')
    return loss

  # Evaluation -------------------------------------------------------------------

  def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
    """Evaluates the model on `input_fn` (until exhausted or `steps` batches).

    Args:
      input_fn: returns a Dataset of (features, labels) or the tuple itself.
      steps: number of batches (None: until the input raises OutOfRange).
      hooks: extra `SessionRunHook`s.
      checkpoint_path: checkpoint to evaluate (default: the latest).
      name: evaluation name; events go to `eval_<name>/`.

    Returns:
      dict of metric values, with `loss` and `global_step`.
    """
    hooks = util.check_hooks_type(hooks)
    _check_step_counts(steps, None)
    hooks.append(util.StopAfterNEvalsHook(steps, log_progress=True))
    checkpoint_path = self._checkpoint_to_use(checkpoint_path, 'evaluate')
    # Under eval_distribute the model is evaluated on the strategy's first device.
    placement = distribute.placement(self._config.eval_distribute, 'eval_distribute')
    with self._mode_graph(input_fn, ModeKeys.EVAL, placement=placement) as (
        global_step, features, labels, input_hooks):
      with distribute.device_scope(placement):
        spec = self._call_model_fn(features, labels, ModeKeys.EVAL, self.config)
      self._maybe_warm_start(checkpoint_path)
      update_op, eval_dict = self._metric_ops(spec)
      eval_dict[GLOBAL_STEP_KEY] = global_step
      all_hooks = input_hooks + hooks + list(spec.evaluation_hooks)
      results = self._run_evaluation(checkpoint_path, spec.scaffold, update_op, eval_dict,
                                     all_hooks)
    current_step = int(results[GLOBAL_STEP_KEY])
    write_dict_to_summary(self.eval_dir(name), results, current_step)
    if checkpoint_path:
      write_checkpoint_path_to_summary(self.eval_dir(name), checkpoint_path, current_step)
    return results

  def _metric_ops(self, spec):
    """(grouped update op, {name: value tensor}) including the 'loss' mean."""
    metric_ops = dict(spec.eval_metric_ops)
    if LOSS_METRIC_KEY in metric_ops:
      raise ValueError('Metric with name "%s" is not allowed, because Estimator ' % (
          LOSS_METRIC_KEY) + 'already defines a default metric with the same name.')
    metric_ops[LOSS_METRIC_KEY] = tf.compat.v1.metrics.mean(spec.loss)
    update_ops, values = [], {}
    for key in sorted(metric_ops):
      metric = metric_ops[key]
      if hasattr(metric, 'update_state') and hasattr(metric, 'result'):
        values[key] = metric.result()
        update_ops.extend(metric.updates)
      else:
        values[key], update = metric
        update_ops.append(update)
    if GLOBAL_STEP_KEY in values:
      raise ValueError('Metric with name `global_step` is not allowed, because Estimator '
                       'already defines a default metric with the same name.')
    return tf.group(*update_ops), values

  def _run_evaluation(self, checkpoint_path, scaffold, update_op, eval_dict, hooks):
    """Runs update_op until stopped, then returns the evaluated eval_dict."""
    final_hook = tf.compat.v1.train.FinalOpsHook(eval_dict)
    logging.info('Starting evaluation at %s', time.strftime('%Y-%m-%dT%H:%M:%S'))
    start = time.time()
    creator = tf.compat.v1.train.ChiefSessionCreator(
        scaffold=scaffold, checkpoint_filename_with_path=checkpoint_path,
        master=self._config.evaluation_master, config=self._session_config)
    with tf.compat.v1.train.MonitoredSession(session_creator=creator,
                                             hooks=hooks + [final_hook]) as session:
      while not session.should_stop():
        session.run(update_op)
    logging.info('Inference Time : %.5fs', time.time() - start)
    logging.info('Finished evaluation at %s', time.strftime('%Y-%m-%d-%H:%M:%S'))
    return final_hook.final_ops_values

  # Prediction -------------------------------------------------------------------

  def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
              yield_single_examples=True):
    """Yields predictions for the features of `input_fn` (until it is exhausted).

    Args:
      input_fn: returns a Dataset of features (or features, labels).
      predict_keys: names of the predictions to return (dict predictions only).
      hooks: extra `SessionRunHook`s.
      checkpoint_path: checkpoint to use (default: the latest).
      yield_single_examples: yield one example at a time, else whole batches.

    Yields:
      Prediction values (dicts when the model_fn's predictions are a dict).
    """
    hooks = util.check_hooks_type(hooks)
    checkpoint_path = self._checkpoint_to_use(checkpoint_path, 'predict')
    with self._mode_graph(input_fn, ModeKeys.PREDICT) as (_, features, _, input_hooks):
      if not (input_hooks or tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.QUEUE_RUNNERS)):
        logging.warning('Input graph does not use tf.data.Dataset or contain a QueueRunner. '
                        'That means predict yields forever. This is probably a mistake.')
      spec = self._call_model_fn(features, None, ModeKeys.PREDICT, self.config)
      self._maybe_warm_start(checkpoint_path)
      predictions = self._extract_keys(spec.predictions, predict_keys)
      creator = tf.compat.v1.train.ChiefSessionCreator(
          checkpoint_filename_with_path=checkpoint_path, master=self._config.master,
          scaffold=spec.scaffold, config=self._session_config)
      all_hooks = input_hooks + hooks + list(spec.prediction_hooks)
      with tf.compat.v1.train.MonitoredSession(session_creator=creator,
                                               hooks=all_hooks) as session:
        while not session.should_stop():
          values = session.run(predictions)
          if not yield_single_examples:
            yield values
          elif not isinstance(predictions, dict):
            for value in values:
              yield value
          else:
            for i in range(self._extract_batch_length(values)):
              yield {key: value[i] for key, value in values.items()}

  @staticmethod
  def _extract_keys(predictions, predict_keys):
    """Narrows dict `predictions` to the outputs named in `predict_keys` (all if empty).

    Raises:
      ValueError: for keys with non-dict predictions, or keys matching nothing.
    """
    if not predict_keys:
      return predictions
    if not isinstance(predictions, dict):
      raise ValueError('predict_keys argument is not valid in case of non-dict predictions.')
    chosen = dict(item for item in predictions.items() if item[0] in predict_keys)
    if chosen:
      return chosen
    raise ValueError('Expected to run at least one output from %s, provided %s.' % (
        predictions.keys(), predict_keys))

  @staticmethod
  def _extract_batch_length(values):
    """The common number of rows of the fetched prediction arrays.

    Raises:
      ValueError: naming the first output whose row count differs.
    """
    rows = None
    for key, value in values.items():
      count = np.shape(value)[0]
      if not rows:
        # An output without rows yet fixes nothing; the first non-empty one does.
        rows = count
      elif count != rows:
        raise ValueError('Batch length of predictions should be same. %s has different batch '
                         'length than others.' % key)
    return rows

  # Export ------------------------------------------------------------------------

  def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                         as_text=False, checkpoint_path=None, experimental_mode=ModeKeys.PREDICT):
    """Exports the graph of one mode and the latest variables as a SavedModel.

    Args:
      export_dir_base: the export is written to `<export_dir_base>/<timestamp>`.
      serving_input_receiver_fn: returns a `ServingInputReceiver` (PREDICT) or
        a `SupervisedInputReceiver` (TRAIN, EVAL).
      assets_extra: dict {relative dest path: source path} copied into
        `assets.extra/`.
      as_text: write `saved_model.pbtxt` instead of `saved_model.pb`.
      checkpoint_path: checkpoint to export (default: the latest).
      experimental_mode: ModeKeys.PREDICT (tag 'serve'), TRAIN ('train') or EVAL ('eval').

    Returns:
      The export directory as bytes (as tf.estimator).
    """
    if not serving_input_receiver_fn:
      raise ValueError('An input_receiver_fn must be defined.')
    return self._export_all_saved_models(
        export_dir_base, {experimental_mode: serving_input_receiver_fn},
        assets_extra=assets_extra, as_text=as_text, checkpoint_path=checkpoint_path,
        strip_default_attrs=True)

  def experimental_export_all_saved_models(self, export_dir_base, input_receiver_fn_map,
                                           assets_extra=None, as_text=False,
                                           checkpoint_path=None):
    """One SavedModel with a MetaGraph per mode of `input_receiver_fn_map`.

    `input_receiver_fn_map` is {ModeKeys value: receiver fn} (TRAIN and EVAL
    take `SupervisedInputReceiver`s); the other arguments and the return value
    are export_saved_model's.
    """
    return self._export_all_saved_models(
        export_dir_base, input_receiver_fn_map, assets_extra=assets_extra, as_text=as_text,
        checkpoint_path=checkpoint_path, strip_default_attrs=True)

  def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                        as_text=False, checkpoint_path=None, strip_default_attrs=False):
    """tf.estimator's deprecated spelling: a PREDICT export, `strip_default_attrs` honoured."""
    if not serving_input_receiver_fn:
      raise ValueError('An input_receiver_fn must be defined.')
    return self._export_all_saved_models(
        export_dir_base, {ModeKeys.PREDICT: serving_input_receiver_fn},
        assets_extra=assets_extra, as_text=as_text, checkpoint_path=checkpoint_path,
        strip_default_attrs=strip_default_attrs)

  def _export_all_saved_models(self, export_dir_base, input_receiver_fn_map,
                               assets_extra=None, as_text=False, checkpoint_path=None,
                               strip_default_attrs=True):
    if not checkpoint_path:
      checkpoint_path = self.latest_checkpoint()
    if not checkpoint_path:
      if self._warm_start_settings:
        checkpoint_path = self._warm_start_settings.ckpt_to_initialize_from
        if paths.isdir(checkpoint_path):
          checkpoint_path = tf.train.latest_checkpoint(checkpoint_path)
      else:
        raise ValueError("Couldn't find trained model at {}.".format(self._model_dir))
    return saved_model.export_all(self, export_dir_base, input_receiver_fn_map,
                                  checkpoint_path, assets_extra, as_text,
                                  strip_default_attrs=strip_default_attrs)
