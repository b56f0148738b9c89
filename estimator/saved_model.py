"""An Estimator's SavedModel: one MetaGraph per mode, with its signatures.

`Estimator.export_saved_model` (and so every Exporter) lands here. For each
mode in the receiver map (PREDICT for a serving export; TRAIN and EVAL take a
`SupervisedInputReceiver`, whose labels reach the model_fn) a fresh graph is built
from the receiver's features and the model_fn, the checkpoint is restored into
it, and one MetaGraph (tag `serve`) with one SignatureDef per `export_outputs`
key is added; the first mode also saves the variables. The directory is
staged as `<base>/temp-<timestamp>` and renamed to `<base>/<timestamp>` by
`core.saved_model_writer`, the writer `trainer.exporter` uses too, so a reader
never sees a half-written export.

    export_dir = saved_model.export_all(
        estimator, '/tmp/model/export/Servo', {ModeKeys.PREDICT: receiver_fn},
        estimator.latest_checkpoint())

Signature rules (tf.estimator's): PREDICT gets the model_fn's `export_outputs`;
TRAIN and EVAL get one signature named after the mode ('train' with tag
'train', 'eval' with tag 'eval') holding loss, predictions and, for EVAL, the
eval metrics (`export_output.TrainOutput` / `EvalOutput`); a receiver's alternatives give extra
signatures named `<receiver>:<output key>`; an output that cannot be built
against the receiver (classify/regress need one string input) is left out
and logged; 'Export includes no default signature!' is logged when
'serving_default' is missing.
"""

import os

import tensorflow as tf
from core import logs as logging

from core import saved_model_writer
from estimator import model_fn as model_fn_lib
from estimator import util
from estimator.export import export as export_lib
from estimator.export import export_output as export_output_lib

ModeKeys = model_fn_lib.ModeKeys
_EXPORT_TAGS = {ModeKeys.PREDICT: [tf.compat.v1.saved_model.tag_constants.SERVING],
                ModeKeys.TRAIN: [tf.compat.v1.saved_model.tag_constants.TRAINING],
                ModeKeys.EVAL: ['eval']}


def _log_signature_report(signature_def_map, excluded):
  by_method = {}
  for name, sig in signature_def_map.items():
    by_method.setdefault(sig.method_name, []).append(name)
  for method, names in sorted(by_method.items()):
    logging.info('Signatures INCLUDED in export for %s: %s', method.split('/')[-1].title(),
                 sorted(names))
  for name, reason in sorted(excluded.items()):
    logging.warning("Signature '%s' EXCLUDED from export: %s", name, reason)
  if not signature_def_map:
    logging.warning('Export includes no signatures!')
  elif model_fn_lib.DEFAULT_SERVING_KEY not in signature_def_map:
    logging.warning('Export includes no default signature!')


def build_all_signature_defs(receiver_tensors, export_outputs,
                             receiver_tensors_alternatives=None, serving_only=True):
  """{signature name: SignatureDef} for every (receiver, export output) pair.

  Args:
    receiver_tensors: dict {name: tensor} (a lone tensor is named 'input').
    export_outputs: dict {key: ExportOutput}.
    receiver_tensors_alternatives: optional {receiver name: tensors}.
    serving_only: keep only signatures valid for TF Serving.

  Returns:
    The signature map.
  """
  if not isinstance(receiver_tensors, dict):
    receiver_tensors = {export_lib.SINGLE_RECEIVER_DEFAULT_NAME: receiver_tensors}
  if export_outputs is None or not isinstance(export_outputs, dict):
    raise ValueError('export_outputs must be a dict and not {}'.format(type(export_outputs)))
  signatures, excluded = {}, {}
  receivers = [(None, receiver_tensors)]
  for name, tensors in (receiver_tensors_alternatives or {}).items():
    if not isinstance(tensors, dict):
      tensors = {export_lib.SINGLE_RECEIVER_DEFAULT_NAME: tensors}
    receivers.append((name, tensors))
  for receiver_name, tensors in receivers:
    for output_key, export_output in export_outputs.items():
      name = '{}'.format(output_key or 'None')
      if receiver_name is not None:
        name = '{}:{}'.format(receiver_name, name)
      try:
        signatures[name] = export_output.as_signature_def(tensors)
      except ValueError as e:
        excluded[name] = str(e)
  _log_signature_report(signatures, excluded)
  if serving_only:
    is_valid = tf.compat.v1.saved_model.signature_def_utils.is_valid_signature
    signatures = {k: v for k, v in signatures.items() if is_valid(v)}
  return signatures


def _export_outputs_for_mode(spec, mode):
  """The model_fn's export_outputs (PREDICT), else one 'train' / 'eval' supervised output."""
  if mode == ModeKeys.PREDICT:
    return spec.export_outputs
  output_class = (export_output_lib.TrainOutput if mode == ModeKeys.TRAIN
                  else export_output_lib.EvalOutput)
  metrics = spec.eval_metric_ops if mode == ModeKeys.EVAL else None
  if mode == ModeKeys.TRAIN and spec.train_op is not None:
    # Where SavedModel loaders look for the train op of a 'train' MetaGraph.
    tf.compat.v1.add_to_collection('saved_model_train_op', spec.train_op)
  return {mode: output_class(loss=spec.loss, predictions=spec.predictions, metrics=metrics)}


def _add_meta_graph_for_mode(estimator, builder, receiver_fn, checkpoint_path,
                             save_variables, mode, strip_default_attrs=True):
  """Builds the graph of `mode`, restores `checkpoint_path` and adds it to `builder`."""
  with tf.Graph().as_default() as g:
    estimator._create_and_assert_global_step(g)  # pylint: disable=protected-access
    tf.compat.v1.set_random_seed(estimator.config.tf_random_seed)
    receiver = receiver_fn()
    spec = estimator._call_model_fn(  # pylint: disable=protected-access
        receiver.features, getattr(receiver, 'labels', None), mode, estimator.config)
    signature_def_map = build_all_signature_defs(
        receiver.receiver_tensors, _export_outputs_for_mode(spec, mode),
        getattr(receiver, 'receiver_tensors_alternatives', None),
        serving_only=(mode == ModeKeys.PREDICT))
    session_config = estimator.config.session_config
    with tf.compat.v1.Session(config=session_config) as session:
      local_init_op = (spec.scaffold.local_init_op or
                       tf.compat.v1.train.Scaffold.default_local_init_op())
      saver = spec.scaffold.saver or tf.compat.v1.train.Saver(sharded=True)
      try:
        saver.restore(session, checkpoint_path)
      except tf.errors.NotFoundError as e:
        raise ValueError(
            'Could not load all requested variables from checkpoint. Please make sure your '
            'model_fn does not expect variables that were not saved in the checkpoint.\n\n'
            'Encountered error with mode `{}` while restoring checkpoint from: `{}`. '
            'Full Traceback:\n\n{}'.format(mode, checkpoint_path, e)) from None
      kwargs = dict(tags=_EXPORT_TAGS[mode], signature_def_map=signature_def_map,
                    assets_collection=tf.compat.v1.get_collection(
                        tf.compat.v1.GraphKeys.ASSET_FILEPATHS),
                    main_op=local_init_op, saver=saver,
                    strip_default_attrs=strip_default_attrs)
      if save_variables:
        builder.add_meta_graph_and_variables(session, **kwargs)
      else:
        builder.add_meta_graph(**kwargs)


def _copy_assets_extra(temp_export_dir, assets_extra):
  for dest_relative, source in assets_extra.items():
    dest = os.path.join(tf.compat.as_bytes(temp_export_dir), b'assets.extra',
                        tf.compat.as_bytes(dest_relative))
    tf.io.gfile.makedirs(os.path.dirname(dest))
    tf.io.gfile.copy(source, dest, overwrite=True)


def export_all(estimator, export_dir_base, input_receiver_fn_map, checkpoint_path,
               assets_extra=None, as_text=False, strip_default_attrs=True):
  """Writes the SavedModel for every mode of `input_receiver_fn_map`.

  Args:
    estimator: the `Estimator`.
    export_dir_base: parent directory of the timestamped export.
    input_receiver_fn_map: {mode: receiver fn}.
    checkpoint_path: checkpoint prefix to export.
    assets_extra: optional {dest: source} copied to assets.extra/.
    as_text: write the SavedModel proto as text.
    strip_default_attrs: leave attributes at their default value out of the graph.

  Returns:
    The export directory (bytes).
  """
  export_dir = util.get_timestamped_export_dir(export_dir_base)
  modes = [m for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)
           if m in input_receiver_fn_map]
  if not modes:
    raise ValueError('No valid modes for exporting found. Got {}.'.format(
        list(input_receiver_fn_map)))

  def write(staging_dir):
    builder = tf.compat.v1.saved_model.Builder(staging_dir)
    for index, mode in enumerate(modes):
      _add_meta_graph_for_mode(estimator, builder, input_receiver_fn_map[mode],
                               checkpoint_path, index == 0, mode, strip_default_attrs)
    builder.save(as_text)
    if assets_extra:
      _copy_assets_extra(staging_dir, assets_extra)

  saved_model_writer.write_atomically(export_dir, write,
                                      staging_dir=util.get_temp_export_dir(export_dir))
  logging.info('SavedModel written to: %s', tf.compat.as_str_any(export_dir))
  return export_dir
