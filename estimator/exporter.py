"""Exporters: which evaluated checkpoints become SavedModels, and how many stay.

`train_and_evaluate` hands every evaluation result to each exporter of the
`EvalSpec`; the exporter decides whether to write a SavedModel under
`model_dir/export/<exporter name>/<timestamp>/` (the tf.estimator layout):

    exporters = [
        tfe.FinalExporter('final', serving_input_receiver_fn),   # once, at the end
        tfe.LatestExporter('latest', serving_input_receiver_fn, exports_to_keep=3),
        tfe.BestExporter(serving_input_receiver_fn=serving_input_receiver_fn),
    ]
    eval_spec = tfe.EvalSpec(eval_input_fn, exporters=exporters, throttle_secs=0)
    tfe.train_and_evaluate(estimator, train_spec, eval_spec)

`BestExporter` keeps only models that beat the best evaluation so far
(by default: a smaller `loss`). The best so far is read back from the
evaluation event files, so a job that is restarted (preempted, resumed with a
larger `max_steps`) keeps comparing against the results of its earlier runs.

Deliberate fix: tf.estimator's BestExporter always exported on its first call
in a process, so every restart exported the next model even when it was worse
than the best one (tensorflow/tensorflow#47396). Here the first call exports
unconditionally only when there is no export yet; otherwise the current
result must beat the best result recorded in the event files by any *other*
evaluation (the current evaluation is already in those files when the
exporter runs, so it is left out of the seed).
"""

import abc
import functools
import inspect

from core import logs as logging
import tensorflow as tf

from core import paths
from estimator import early_stopping

_EXPORT_DIR_DIGITS = 10


def _loss_smaller(best_eval_result, current_eval_result):
  """The default `compare_fn`: True when the current `loss` is smaller.

  Args:
    best_eval_result: dict of the best evaluation so far.
    current_eval_result: dict of the current evaluation.

  Returns:
    True when `current_eval_result['loss'] < best_eval_result['loss']`.

  Raises:
    ValueError: when either dict is empty or has no `loss`.
  """
  key = 'loss'
  if not best_eval_result or key not in best_eval_result:
    raise ValueError('best_eval_result cannot be empty or no loss is found in it.')
  if not current_eval_result or key not in current_eval_result:
    raise ValueError('current_eval_result cannot be empty or no loss is found in it.')
  return best_eval_result[key] > current_eval_result[key]


def _fn_arg_names(fn):
  """Names of the arguments of a function, method or functools.partial."""
  if isinstance(fn, functools.partial):
    names = _fn_arg_names(fn.func)
    bound = set(fn.keywords or {})
    return tuple(n for n in names[len(fn.args):] if n not in bound)
  params = inspect.signature(fn).parameters.values()
  return tuple(p.name for p in params
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _verify_compare_fn_args(compare_fn):
  """Checks that `compare_fn` takes exactly best_eval_result, current_eval_result."""
  args = set(_fn_arg_names(compare_fn))
  if 'best_eval_result' not in args:
    raise ValueError('compare_fn (%s) must include best_eval_result argument.' % compare_fn)
  if 'current_eval_result' not in args:
    raise ValueError('compare_fn (%s) must include current_eval_result argument.' % compare_fn)
  unexpected = sorted(args - {'best_eval_result', 'current_eval_result'})
  if unexpected:
    raise ValueError('compare_fn (%s) has following not expected args: %s' % (
        compare_fn, unexpected))


def _check_exports_to_keep(exports_to_keep):
  if exports_to_keep is not None and exports_to_keep <= 0:
    raise ValueError(
        '`exports_to_keep`, if provided, must be a positive number. Got %s' % exports_to_keep)


def list_exports(export_path):
  """The finished exports under `export_path`, oldest first.

  Args:
    export_path: `model_dir/export/<name>`.

  Returns:
    list of (timestamp int, full path) for the 10-digit numeric directories;
    temp-<ts> directories of unfinished exports are not listed.
  """
  if not paths.isdir(export_path):
    return []
  exports = []
  for name in tf.io.gfile.listdir(export_path):
    name = name.rstrip('/')
    if len(name) == _EXPORT_DIR_DIGITS and name.isdigit():
      exports.append((int(name), paths.join(export_path, name)))
  return sorted(exports)


def _garbage_collect_exports(export_path, exports_to_keep):
  """Deletes all but the `exports_to_keep` newest exports (None keeps all)."""
  if exports_to_keep is None:
    return
  for _, path in list_exports(export_path)[:-exports_to_keep]:
    try:
      tf.io.gfile.rmtree(path)
      logging.info('Removed old export %s (exports_to_keep=%d)', path, exports_to_keep)
    except tf.errors.NotFoundError as e:
      logging.warning('Can not delete %s recursively: %s', path, e)


class Exporter(abc.ABC):
  """Decides whether and how to export a model after an evaluation."""

  @property
  @abc.abstractmethod
  def name(self):
    """Directory name under `model_dir/export/`; must be unique in an EvalSpec."""

  @abc.abstractmethod
  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    """Exports the model (or not).

    Args:
      estimator: the `Estimator` being trained.
      export_path: `model_dir/export/<name>`; exports go in timestamped subdirectories.
      checkpoint_path: the checkpoint that was just evaluated.
      eval_result: the dict returned by `Estimator.evaluate`.
      is_the_final_export: True for the evaluation after training ended.

    Returns:
      The export directory (as returned by `export_saved_model`), or None.
    """


class _SavedModelWriter(Exporter):
  """What the three exporters share: a name, and a SavedModel written of a checkpoint.

  Subclasses decide when to write (`export`) and how many to keep.
  """

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
    self._name = name
    self._receiver_fn = serving_input_receiver_fn
    self._export_options = {'assets_extra': assets_extra, 'as_text': as_text}

  @property
  def name(self):
    return self._name

  def _write(self, estimator, export_path, checkpoint_path):
    return estimator.export_saved_model(export_path, self._receiver_fn,
                                        checkpoint_path=checkpoint_path, **self._export_options)


class FinalExporter(_SavedModelWriter):
  """Exports only the model evaluated after training has ended.

  Args:
    name: unique name; exports go to `model_dir/export/<name>/<timestamp>`.
    serving_input_receiver_fn: builds the `ServingInputReceiver` of the export.
    assets_extra: optional {destination path in assets.extra/: source file}.
    as_text: write `saved_model.pbtxt` instead of `saved_model.pb`.
  """

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    del eval_result
    if is_the_final_export:
      logging.info('Performing the final export in the end of training.')
      return self._write(estimator, export_path, checkpoint_path)
    return None


class LatestExporter(_SavedModelWriter):
  """Exports after every evaluation and keeps the `exports_to_keep` newest."""

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False,
               exports_to_keep=5):
    """Creates the exporter.

    Args:
      name: unique name; exports go to `model_dir/export/<name>/<timestamp>`.
      serving_input_receiver_fn: builds the `ServingInputReceiver` of the export.
      assets_extra: optional {destination path in assets.extra/: source file}.
      as_text: write `saved_model.pbtxt` instead of `saved_model.pb`.
      exports_to_keep: how many exports to keep; None keeps all.

    Raises:
      ValueError: when `exports_to_keep` is not None and not positive.
    """
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
    _check_exports_to_keep(exports_to_keep)
    self._exports_to_keep = exports_to_keep

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    del eval_result, is_the_final_export
    written = self._write(estimator, export_path, checkpoint_path)
    _garbage_collect_exports(export_path, self._exports_to_keep)
    return written


class BestExporter(_SavedModelWriter):
  """Exports a model only when it beats every evaluation recorded so far."""

  def __init__(self, name='best_exporter', serving_input_receiver_fn=None,
               event_file_pattern='eval/*.tfevents.*', compare_fn=_loss_smaller,
               assets_extra=None, as_text=False, exports_to_keep=5):
    """Creates the exporter.

    Args:
      name: unique name; exports go to `model_dir/export/<name>/<timestamp>`.
      serving_input_receiver_fn: builds the `ServingInputReceiver` of the export.
      event_file_pattern: glob, relative to model_dir, of the evaluation event
        files the best result is seeded from ('eval/*.tfevents.*' matches an
        EvalSpec without a name; use 'eval_<name>/*.tfevents.*' otherwise).
        None: start from nothing (a restart may then export a worse model).
      compare_fn: `fn(best_eval_result, current_eval_result) -> bool`, True
        when current is better; default: smaller `loss`.
      assets_extra: optional {destination path in assets.extra/: source file}.
      as_text: write `saved_model.pbtxt` instead of `saved_model.pb`.
      exports_to_keep: how many exports to keep; None keeps all.

    Raises:
      ValueError: for a compare_fn that is not callable or has other
        arguments, or a non-positive `exports_to_keep`.
    """
    if not callable(compare_fn):
      raise ValueError('`compare_fn` must be callable.')
    _verify_compare_fn_args(compare_fn)
    _check_exports_to_keep(exports_to_keep)
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
    self._event_file_pattern = event_file_pattern
    self._compare_fn = compare_fn
    self._exports_to_keep = exports_to_keep
    self._model_dir = None
    self._best_eval_result = None

  def _is_better(self, best, current):
    return self._compare_fn(best_eval_result=best, current_eval_result=current)

  def _seed_from_event_files(self, model_dir, current_step):
    """The best result recorded by evaluations other than the current one.

    Args:
      model_dir: the estimator's model_dir.
      current_step: global step of the evaluation being exported; its records
        are skipped because evaluate() wrote them before the exporters run.

    Returns:
      The best metrics dict found, or None.
    """
    if not self._event_file_pattern:
      return None
    pattern = paths.join(model_dir, self._event_file_pattern)
    best = None
    for step, metrics in early_stopping.read_metrics_from_event_files(pattern).items():
      if step == current_step:
        continue
      try:
        if best is None or self._is_better(best, metrics):
          best = metrics
      except (KeyError, ValueError) as e:
        # An evaluation without the compared metric cannot be ranked.
        logging.warning('BestExporter %s: ignoring the evaluation at step %d of %s: %s',
                        self.name, step, pattern, e)
    return best

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    if self._model_dir != estimator.model_dir:
      self._model_dir = estimator.model_dir
      logging.info('Loading best metric from event files.')
      self._best_eval_result = self._seed_from_event_files(
          estimator.model_dir, eval_result.get('global_step'))
      if self._best_eval_result is not None:
        logging.info('BestExporter %s: best evaluation so far %s', self.name,
                     self._best_eval_result)
    has_export = bool(list_exports(export_path))
    if has_export and self._best_eval_result is not None and not self._is_better(
        self._best_eval_result, eval_result):
      logging.info('BestExporter %s: not exporting step %s, %s is not better than the best '
                   'so far %s', self.name, eval_result.get('global_step'), eval_result,
                   self._best_eval_result)
      return None
    logging.info('Performing best model export.')
    self._best_eval_result = eval_result
    written = self._write(estimator, export_path, checkpoint_path)
    _garbage_collect_exports(export_path, self._exports_to_keep)
    return written
