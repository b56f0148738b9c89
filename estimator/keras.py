r"""`model_to_estimator`: run a compiled tf_keras model as an Estimator.

Code that called `tf.keras.estimator.model_to_estimator` (tf.estimator 2.15)
ports as `tfe.keras.model_to_estimator`; the model must be a Keras 2 model
(`import tf_keras`), functional or Sequential, compiled:

    import tf_keras
    import estimator as tfe

    inputs = tf_keras.Input((4,), name='x')
    probs = tf_keras.layers.Dense(3, activation='softmax', name='probs')(inputs)
    model = tf_keras.Model(inputs, probs)
    model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
                  metrics=['accuracy'])

    est = tfe.keras.model_to_estimator(keras_model=model, model_dir='/tmp/k')

    def input_fn():  # features keyed by model.input_names, labels by output name
      return tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(32)

    est.train(input_fn, steps=1000)
    est.evaluate(input_fn, steps=10)      # {'accuracy', 'loss', 'global_step'}
    est.predict(predict_input_fn)         # {'probs': ...} per example
    est.export_saved_model(base, tfe.export.build_parsing_serving_input_receiver_fn(
        {'x': tf.io.FixedLenFeature([4], tf.float32)}))

How it works. The Estimator builds a new graph for each call, so the model
is rebuilt in each of them with `tf_keras.models.clone_model` on the input
function's features (in a graph, tf_keras builds its TF1 flavour of the
model, which gives the compiled loss and metrics as graph tensors). The
model's weights at conversion time are written once as a name-based
checkpoint, `model_dir/keras/keras_model.ckpt`, from a clone built the same
way, and every variable of the model is warm-started from it until the
Estimator has its own checkpoint; so `predict` before any training gives
`keras_model.predict`'s numbers. In the model_fn:

* features: a dict keyed by `keras_model.input_names` (or one tensor for a
  one-input model); labels: a dict keyed by `keras_model.output_names` (or
  one tensor for a one-output model);
* TRAIN: the compiled loss (with `loss_weights` and the model's own
  `losses`, e.g. weight regularizers) minimized by a fresh copy of the
  compiled optimizer, whose `iterations` is the global step; the batch-norm
  statistics are updated in the same step;
* EVAL: the metrics (and weighted metrics) given to compile(), under the
  names Keras gives them (`accuracy`; `<output>_accuracy` with several
  outputs), plus the Estimator's `loss` and `global_step` (no per-output
  losses, as in tf.estimator); `metric_names_map` renames them;
* PREDICT: `{output name: output}`, exported as the `serving_default`
  predict signature (plus the `export_outputs` signatures).

As with tf.estimator, building the TF1 flavour switches tf_keras's classes:
in an eager program, the converted model object (and eager models made
before it) can no longer fit or predict eagerly after the conversion.

Differs on purpose from tf.estimator 2.15:

* The Estimator's checkpoints are always name-based (as every checkpoint in
  model_dir); `checkpoint_format='checkpoint'` is accepted and means the same.
* The optimizer's slots (e.g. Adam's moments) are not carried over from the
  Keras model; training starts them fresh, as a new Estimator would.
* The optimizer may be compiled as a name ('adam': the name's defaults) or
  an object, in an eager or a graph program; each graph gets a fresh
  tf_keras legacy (graph-mode) optimizer with its hyper-parameters.
* Sample weights through a `sample_weights` feature and `RunConfig(num_clones>1)`
  are not supported; Keras 3 models (`import keras`) are refused: they have no
  TF1 graph mode (see docs/migrating.md).
"""

import os
import re
import warnings

from core import logs as logging
import tensorflow as tf
import tf_keras

from estimator import estimator as estimator_lib
from estimator import model_fn as model_fn_lib
from estimator import warm_starting
from estimator.export import export_output

__all__ = ['model_to_estimator']

KERAS_CHECKPOINT_DIR = 'keras'
KERAS_CHECKPOINT_NAME = 'keras_model.ckpt'
# Arguments of the Keras 2.11+ optimizers that their legacy (TF1 graph) twins lack.
_NEW_OPTIMIZER_ONLY_ARGS = ('weight_decay', 'use_ema', 'ema_momentum',
                            'ema_overwrite_frequency', 'jit_compile', 'is_legacy_optimizer')
ModeKeys = model_fn_lib.ModeKeys


def _load_model(keras_model, keras_model_path, custom_objects):
  """The model given, or the one saved at keras_model_path (HDF5, SavedModel, .keras)."""
  if keras_model is None and keras_model_path is None:
    raise ValueError('Either `keras_model` or `keras_model_path` needs to be provided.')
  if keras_model is not None and keras_model_path is not None:
    raise ValueError('Please specity either `keras_model` or `keras_model_path`, but not '
                     'both.')
  if keras_model is not None:
    return keras_model
  if hasattr(keras_model_path, '__fspath__'):
    keras_model_path = os.fspath(keras_model_path)
  if not tf.io.gfile.exists(keras_model_path):
    raise ValueError('keras_model_path %s does not exist' % keras_model_path)
  logging.info('Loading the Keras model from %s', keras_model_path)
  return tf_keras.models.load_model(keras_model_path, custom_objects=custom_objects)


def _check_model(keras_model):
  """Raises a clear error for a model this module cannot rebuild in a graph."""
  if not isinstance(keras_model, tf_keras.Model):
    module = type(keras_model).__module__
    if module.split('.')[0] == 'keras':
      raise TypeError(
          'keras_model is a Keras 3 model (%s); model_to_estimator takes tf_keras (Keras 2) '
          'models only, because Keras 3 cannot build a model in a TF1 graph. Build it with '
          '`import tf_keras` instead of `import keras`; for `tf.keras` to be tf_keras, '
          'import slimtrain before the program first uses `tf.keras` and leave '
          'TF_USE_LEGACY_KERAS unset (or set it to 1) (see docs/migrating.md).'
          % type(keras_model).__name__)
    raise TypeError('keras_model must be a compiled tf_keras.Model, got %s'
                    % type(keras_model).__name__)
  # Functional and Sequential models (and subclasses of Functional) know their layer
  # graph; a subclassed model's call() is Python that clone_model cannot rebuild.
  if not getattr(keras_model, '_is_graph_network', False):
    raise ValueError(
        'keras_model %r is a subclassed model without a static graph of layers; '
        'model_to_estimator supports functional and Sequential models (for a Sequential '
        'model, give its first layer an input shape).' % keras_model.name)
  if not getattr(keras_model, '_is_compiled', False) or keras_model.optimizer is None:
    raise ValueError('The given keras model has not been compiled yet. Please compile the '
                     'model with `model.compile()` before calling `model_to_estimator()`.')


def _serialize_optimizer(optimizer):
  """The optimizer as a Keras config dict, whichever form compile() kept it in.

  Args:
    optimizer: a name ('adam'; what an eager model's compile config holds
      when compile() got one), a config dict, or an optimizer object.

  Returns:
    {'class_name': ..., 'config': {...}, ...}; a name gives an empty config
    (the optimizer's defaults).
  """
  if isinstance(optimizer, str):
    return {'class_name': optimizer, 'config': {}}
  if isinstance(optimizer, dict):
    return optimizer
  if tf.executing_eagerly() or not isinstance(optimizer, tf_keras.optimizers.Optimizer):
    return tf_keras.optimizers.serialize(optimizer)
  # A Keras 2.11+ optimizer made in a graph program: its get_config() reads its
  # hyper-parameter variables with .numpy(), which graph mode does not have;
  # read them through the Keras session instead, for this one call.
  read_in_eager = optimizer._serialize_hyperparameter  # pylint: disable=protected-access

  def read_in_graph(value):
    if not isinstance(value, tf.Variable):
      return read_in_eager(value)
    try:
      return tf_keras.backend.get_value(value)
    except tf.errors.FailedPreconditionError:
      # Not initialized yet (the model never trained): its value is the initial one.
      return tf_keras.backend.get_value(value.initial_value)

  optimizer._serialize_hyperparameter = read_in_graph  # pylint: disable=protected-access
  try:
    return tf_keras.optimizers.serialize(optimizer)
  finally:
    del optimizer._serialize_hyperparameter  # pylint: disable=protected-access


def _compile_config(keras_model):
  """The model's compile() arguments, serialized, so each graph can rebuild its own."""
  config = keras_model.get_compile_config()
  if config is None:
    # Models compiled in a TF1 graph keep their compile() arguments as attributes.
    serialize = tf_keras.saving.serialize_keras_object
    config = {
        'loss': serialize(keras_model.loss),
        'metrics': serialize(getattr(keras_model, '_compile_metrics', None)),
        'weighted_metrics': serialize(getattr(keras_model, '_compile_weighted_metrics', None)),
        'loss_weights': serialize(getattr(keras_model, 'loss_weights', None)),
        'optimizer': keras_model.optimizer,
    }
  config = {key: config.get(key) for key in ('optimizer', 'loss', 'metrics',
                                             'weighted_metrics', 'loss_weights')}
  config['optimizer'] = _serialize_optimizer(config['optimizer'])
  return config


def _legacy_optimizer(optimizer_config, custom_objects):
  """A fresh optimizer from its serialized config, in its TF1-graph (legacy) flavour.

  Raises:
    ValueError: if the optimizer uses a feature only the eager optimizers have.
  """
  inner = dict(optimizer_config['config'])
  if inner.get('weight_decay') or inner.get('use_ema'):
    raise ValueError('The Keras model\'s optimizer uses weight_decay or use_ema, which '
                     'graph-mode (legacy) Keras optimizers do not have; compile the model '
                     'with a tf_keras.optimizers.legacy optimizer.')
  for name in _NEW_OPTIMIZER_ONLY_ARGS:
    inner.pop(name, None)
  return tf_keras.optimizers.deserialize(
      dict(optimizer_config, config=inner), custom_objects=custom_objects,
      use_legacy_optimizer=True)


def _as_list(values, names, kind):
  """Orders features (or labels) as the model's inputs (or outputs).

  Args:
    values: a dict keyed by `names`, a list/tuple in their order, or (when
      there is one name) one tensor or a dict of one tensor under any key.
    names: keras_model.input_names or output_names.
    kind: 'features' or 'labels', for the error messages.

  Returns:
    A list of tensors, one per name.

  Raises:
    ValueError: if a name is missing or the structure does not fit.
  """
  if isinstance(values, dict) and len(values) == 1 and len(names) == 1:
    # One tensor under another key, e.g. the 'feature' of a ServingInputReceiver.
    return list(values.values())
  if isinstance(values, dict):
    missing = [name for name in names if name not in values]
    if missing:
      raise ValueError('%s must be keyed by the Keras model\'s %s names %s; missing %s '
                       '(got keys %s)' % (kind, 'input' if kind == 'features' else 'output',
                                          list(names), missing, sorted(values)))
    return [values[name] for name in names]
  if isinstance(values, (list, tuple)):
    if len(values) != len(names):
      raise ValueError('%s: got %d tensors for the %d names %s' % (
          kind, len(values), len(names), list(names)))
    return list(values)
  if len(names) != 1:
    raise ValueError('%s: the Keras model has %d of them (%s); pass a dict keyed by these '
                     'names' % (kind, len(names), list(names)))
  return [values]


def _cast_like(tensors, references):
  """Casts each tensor to its reference's dtype (e.g. float64 numpy data to float32)."""
  return [tf.cast(t, ref.dtype) if t.dtype != ref.dtype else t
          for t, ref in zip(tensors, references)]


def _clone(keras_model, input_tensors, custom_objects, training):
  """Rebuilds the model in the default graph on `input_tensors`.

  Args:
    keras_model: the functional or Sequential model.
    input_tensors: one tensor per model input.
    custom_objects: for layers the clone must deserialize.
    training: whether dropout / batch norm run in training mode.

  Returns:
    The clone (a TF1-flavoured Keras model whose outputs are graph tensors).
  """
  with tf_keras.utils.custom_object_scope(custom_objects or {}), warnings.catch_warnings():
    # The learning phase is the TF1-graph way to fix `training` for a whole model.
    warnings.simplefilter('ignore', UserWarning)
    with tf_keras.backend.learning_phase_scope(1 if training else 0):
      return tf_keras.models.clone_model(keras_model, input_tensors=input_tensors)


def _placeholders_like(keras_model):
  return [tf.compat.v1.placeholder(tensor.dtype, tensor.shape) for tensor in keras_model.inputs]


def write_keras_checkpoint(keras_model, model_dir, custom_objects=None):
  """Writes the model's current weights as `model_dir/keras/keras_model.ckpt`.

  The weights are saved under the variable names a clone gets in an
  Estimator graph, which the model_fn's warm start reads.

  Args:
    keras_model: the (functional or Sequential) model.
    model_dir: the Estimator's model_dir.
    custom_objects: for layers the clone must deserialize.

  Returns:
    (checkpoint prefix, names of the model's variables in it); the
    checkpoint also holds `global_step` (0).
  """
  values = keras_model.get_weights()
  prefix = os.path.join(model_dir, KERAS_CHECKPOINT_DIR, KERAS_CHECKPOINT_NAME)
  with tf.Graph().as_default() as graph:
    # As in the Estimator graph; saved (0) too, so that exporting before any
    # training can restore a whole serving graph from this checkpoint.
    global_step = tf.compat.v1.train.get_or_create_global_step()
    clone = _clone(keras_model, _placeholders_like(keras_model), custom_objects, False)
    variables = clone.weights
    if [v.shape.as_list() for v in variables] != [list(x.shape) for x in values]:
      raise ValueError('The clone of Keras model %r does not have the shapes of its '
                       'weights' % keras_model.name)
    feeds = [tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
    assign = tf.group(*[v.assign(f) for v, f in zip(variables, feeds)])
    saver = tf.compat.v1.train.Saver(variables + [global_step])
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(global_step.initializer)
      sess.run(assign, dict(zip(feeds, values)))
      tf.io.gfile.makedirs(os.path.dirname(prefix))
      saver.save(sess, prefix, write_meta_graph=False, write_state=False)
    names = [v.op.name for v in variables]
  logging.info('Wrote the Keras model\'s %d weights to %s', len(names), prefix)
  return prefix, names


def _compile_clone(clone, compile_config, labels, custom_objects, with_metrics):
  """Compiles the clone in its graph against `labels`; returns its fresh optimizer."""
  args = tf_keras.saving.deserialize_keras_object(
      {key: value for key, value in compile_config.items() if key != 'optimizer'},
      custom_objects=custom_objects)
  optimizer = _legacy_optimizer(compile_config['optimizer'], custom_objects)
  targets = _as_list(labels, clone.output_names, 'labels')
  clone.compile(optimizer=optimizer, loss=args['loss'], loss_weights=args['loss_weights'],
                metrics=args['metrics'] if with_metrics else None,
                weighted_metrics=args['weighted_metrics'] if with_metrics else None,
                target_tensors=_cast_like(targets, clone.outputs))
  return optimizer


def _train_op(clone, optimizer):
  """One optimizer step on the compiled loss, the batch-norm updates, global step + 1."""
  global_step = tf.compat.v1.train.get_global_step()
  # apply_gradients adds 1 to `iterations`: make that the Estimator's step counter.
  optimizer.iterations = global_step
  updates = optimizer.get_updates(params=clone.trainable_weights, loss=clone.total_loss)
  # Updates a layer made on the model's inputs (batch-norm moving statistics).
  updates += clone.get_updates_for(None) + clone.get_updates_for(clone.inputs)
  return tf.group(*updates, name='keras_train_op')


def _keras_metric_name(name, output_names):
  """The name Keras gives a compiled metric, undoing a second output prefix.

  With several outputs Keras prefixes a metric object's name with its output
  name ('reg_mean_absolute_error') and renames the object itself; such an
  object, serialized from the user's model and compiled again on the clone,
  would get the prefix twice.
  """
  if len(output_names) > 1:
    for output_name in output_names:
      prefix = output_name + '_'
      if name.startswith(prefix + prefix):
        return name[len(prefix):]
  return name


def _eval_metric_ops(clone, metric_names_map):
  """The compiled metrics (and weighted metrics) by their Keras names, or renamed.

  As tf.estimator's, only the metrics given to compile(): no total or
  per-output loss (evaluate() adds the Estimator's own 'loss').
  """
  metric_ops = {}
  # The TF1-flavoured model lists there the metric objects compile() made from its
  # `metrics` and `weighted_metrics` (clone.metrics would add the loss means).
  for metric in clone._compile_metric_functions:  # pylint: disable=protected-access
    name = _keras_metric_name(metric.name, clone.output_names)
    metric_ops[metric_names_map.get(name, name)] = metric
  return metric_ops


def _export_outputs(predictions, export_outputs):
  """serving_default: every output; plus one signature per export_outputs entry."""
  unknown = sorted(set(export_outputs) - set(predictions))
  if unknown:
    raise ValueError('export_outputs names %s, which are not outputs of the Keras model %s'
                     % (unknown, sorted(predictions)))
  outputs = {name: output_class(predictions[name])
             for name, output_class in export_outputs.items()}
  outputs[tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY] = export_output.PredictOutput(
      predictions)
  return outputs


def _make_model_fn(keras_model, compile_config, custom_objects, metric_names_map,
                   export_outputs):
  """The Estimator model_fn that rebuilds `keras_model` in each graph."""

  def model_fn(features, labels, mode):
    inputs = _cast_like(_as_list(features, keras_model.input_names, 'features'),
                        keras_model.inputs)
    clone = _clone(keras_model, inputs, custom_objects, training=mode == ModeKeys.TRAIN)
    predictions = dict(zip(clone.output_names, clone.outputs))
    if mode == ModeKeys.PREDICT:
      return model_fn_lib.EstimatorSpec(
          mode, predictions=predictions,
          export_outputs=_export_outputs(predictions, export_outputs))
    if labels is None:
      raise ValueError('model_to_estimator: %s needs labels, keyed by the output names %s'
                       % (mode, clone.output_names))
    optimizer = _compile_clone(clone, compile_config, labels, custom_objects,
                               with_metrics=mode == ModeKeys.EVAL)
    if mode == ModeKeys.TRAIN:
      return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=clone.total_loss,
                                        train_op=_train_op(clone, optimizer))
    return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=clone.total_loss,
                                      eval_metric_ops=_eval_metric_ops(clone, metric_names_map))

  return model_fn


def model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None,
                       model_dir=None, config=None, checkpoint_format='checkpoint',
                       metric_names_map=None, export_outputs=None):
  """An Estimator that trains, evaluates, predicts and exports a compiled tf_keras model.

  Args:
    keras_model: a compiled tf_keras functional or Sequential model. Exclusive
      with keras_model_path.
    keras_model_path: path of a compiled model saved with `model.save()`
      (HDF5, SavedModel or .keras). Exclusive with keras_model.
    custom_objects: dict of custom layers / losses / metrics by name.
    model_dir: the Estimator's model_dir (or config.model_dir; a temporary
      directory if neither).
    config: a `tfe.RunConfig`.
    checkpoint_format: 'saver' or 'checkpoint' (tf.estimator's default);
      either way the Estimator writes name-based checkpoints, as every
      Estimator of this package does.
    metric_names_map: optional {Keras metric name: evaluate() key}.
    export_outputs: optional {output name: an ExportOutput class, e.g.
      `tfe.export.RegressionOutput`}: each output also gets a signature of
      that name and kind (serving_default stays the predict signature).

  Returns:
    A `tfe.Estimator` starting from the model's current weights.

  Raises:
    ValueError: for neither or both of keras_model / keras_model_path, an
      uncompiled or subclassed model, or an unsupported option.
    TypeError: for something that is not a tf_keras model (e.g. Keras 3).
  """
  if checkpoint_format not in ('saver', 'checkpoint'):
    raise ValueError("checkpoint_format must be 'saver' or 'checkpoint', got %r"
                     % (checkpoint_format,))
  keras_model = _load_model(keras_model, keras_model_path, custom_objects)
  _check_model(keras_model)
  if getattr(config, 'num_clones', 1) > 1:
    raise ValueError('model_to_estimator does not support RunConfig(num_clones=%d): the '
                     'Keras optimizer is not a tf.compat.v1 optimizer' % config.num_clones)
  config, model_dir = estimator_lib._resolve_config(config, model_dir)  # pylint: disable=protected-access
  compile_config = _compile_config(keras_model)
  _legacy_optimizer(compile_config['optimizer'], custom_objects)  # Fails now, not in train().
  warm_start = None
  if tf.train.latest_checkpoint(model_dir):
    logging.info('%s already has a checkpoint: not writing the Keras weights', model_dir)
  else:
    prefix, names = write_keras_checkpoint(keras_model, model_dir, custom_objects)
    warm_start = warm_starting.WarmStartSettings(
        prefix, vars_to_warm_start=['^%s$' % re.escape(name) for name in names])
  model_fn = _make_model_fn(keras_model, compile_config, custom_objects,
                            metric_names_map or {}, export_outputs or {})
  return estimator_lib.Estimator(model_fn, config=config, warm_start_from=warm_start)
