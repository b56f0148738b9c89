"""The Object Detection API's `model_lib` on slimtrain's estimator.

`model_lib` turns a pipeline config into the pieces of the tf.estimator
workflow: a `model_fn` for the configured detector, input_fns reading the
configured TFRecords, and the Train/Eval specs that `train_and_evaluate`
runs. `python -m trainer.model_main` is the command line over it.

    import estimator as tfe
    from trainer import model_lib
    run_config = tfe.RunConfig(model_dir='/tmp/model')
    d = model_lib.create_estimator_and_inputs(
        run_config, pipeline_config_path='configs/ssd_shapes.config', train_steps=200)
    train_spec, eval_specs = model_lib.create_train_and_eval_specs(
        d['train_input_fn'], d['eval_input_fns'], d['eval_on_train_input_fn'],
        d['predict_input_fn'], d['train_steps'])
    tfe.train_and_evaluate(d['estimator'], train_spec, eval_specs[0])
    # -> /tmp/model/model.ckpt-200, /tmp/model/eval_0/, /tmp/model/export/Servo/<ts>/

The input_fns (and what their features and labels hold) are
trainer/inputs.py's, the OD API's `inputs` module; model_lib keeps
`create_train_input_fn`, `create_eval_input_fn` and `create_predict_input_fn`
under its own names too.

The model_fn per mode:

* TRAIN: losses -> `Loss/total_loss` (plus `Loss/regularization_loss` when
  train_config.add_regularization_loss) -> the optimizer of
  builders/optimizer_builder -> the gradient surgery of the legacy trainer
  (bias multiplier, freeze_variables, update_trainable_variables,
  gradient_clipping_by_norm) -> apply, after the batch-norm updates. With
  `fine_tune_checkpoint` (and hparams.load_pretrained, default True) the
  Scaffold's init_fn restores what the checkpoint has (core/fine_tune), only
  when model_dir has no checkpoint yet.
* EVAL: the mean of every loss plus COCO box metrics
  (`DetectionBoxes_Precision/mAP`, `.../mAP@.50IOU`, ..., per category with
  eval_config.include_metrics_per_category): core/coco_evaluation's
  pycocotools evaluator behind a py_func, run once at the end of each
  evaluation (see `CocoDetectionMetrics`).
* PREDICT (and export): `detection_boxes`, `detection_scores`,
  `detection_classes` (1-based label-map ids), `num_detections` (and
  `detection_masks` [B, N, mask_height, mask_width] from Mask R-CNN), under
  the `serving_default` signature.

Groundtruth: the labels' boxes are normalized to each image's content (as
the detections are); the model_fn moves them into the frame of the padded
batch, and cuts each image's instance masks (Mask R-CNN) to its content,
before `provide_groundtruth`. So batches of images of different sizes
(keep_aspect_ratio_resizer) train and evaluate, as do the two-stage models'
one-image batches.

`create_estimator_and_inputs` takes the OD API's whole signature, so
`model_main.py` and `model_tpu_main.py` calls port unchanged: its keyword
overrides (`batch_size=...`) go through
`config_util.merge_external_params_with_configs`, and `unstack_batch` is here.
`create_estimator_and_inputs`, `create_train_and_eval_specs` and
`continuous_eval` also take the 2018 generation's calls (`eval_steps`, one
`eval_input_fn`): each call is read for its generation
(trainer/model_lib_2018.py says how).

Differences from the OD API: no TPU (the TPU arguments `use_tpu_estimator`,
`use_tpu`, `num_shards`, `postprocess_on_cpu`, `export_to_tpu` are logged once
and change nothing), a `graph_rewriter` (quantization) is refused by name
(builders/graph_rewriter_builder.py), and the export's
input type is chosen as trainer/inputs.py says. The pipeline's
`deploy_config` (clones per worker) and LINEAR learning-rate scaling mean
the same here as in `python -m trainer.train`: both paths read them through
`builders.deploy_config_builder` and `optimizer_builder.build_for_training`.
`train_config.use_mixed_precision: true` is refused by name (the rewrite is
process-wide and would reach this path's evaluation graphs);
`train_config.sync_replicas: true` trains asynchronously, as in the OD API,
but says so in a warning.
"""

import copy
import functools
import time

import numpy as np
import tensorflow as tf
from core import logs as logging

from builders import deploy_config_builder
from builders import graph_rewriter_builder
from builders import model_builder
from builders import optimizer_builder
from core import batch_util
from core import checkpoints
from core import coco_evaluation
from core import config_util
from core import fine_tune
from core import gradient_surgery
from core import model as core_model
from core import moving_averages
from core import standard_fields as fields
import estimator as tfe
from estimator import faults
from trainer import evaluator as od_evaluator
from trainer import exporter as od_exporter
from trainer import inputs
from trainer import model_hparams
from trainer import model_lib_2018

_INPUT = fields.InputDataFields
_DETECTION = fields.DetectionResultFields
_SERVING_KEY = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
# detection_masks only where the model predicts them (Mask R-CNN).
_PREDICT_OUTPUTS = (_DETECTION.detection_boxes, _DETECTION.detection_scores,
                    _DETECTION.detection_classes, _DETECTION.num_detections,
                    _DETECTION.detection_masks)
TOTAL_LOSS = 'Loss/total_loss'
REGULARIZATION_LOSS = 'Loss/regularization_loss'

# OD's inputs module's input_fn factories (trainer/inputs.py), also under these names.
create_train_input_fn = inputs.create_train_input_fn
create_eval_input_fn = inputs.create_eval_input_fn
create_predict_input_fn = inputs.create_predict_input_fn

# OD's model_hparams.create_hparams (trainer/model_hparams.py), also under this name.
create_hparams = model_hparams.create_hparams


# OD's model_lib.unstack_batch: padded batch -> per-image lists (core/batch_util.py).
unstack_batch = batch_util.unstack_batch

# TPU-only arguments already logged (each is logged once per process).
_TPU_ARGUMENTS_LOGGED = set()


def _log_tpu_only(name, value):
  """Logs (once per argument) that a TPU-only argument does nothing here."""
  if name not in _TPU_ARGUMENTS_LOGGED:
    _TPU_ARGUMENTS_LOGGED.add(name)
    logging.warning('%s=%r is a TPU argument; slimtrain trains on CPUs and GPUs with a '
                    'tfe.Estimator, so it has no effect.', name, value)


# ---------------------------------------------------------------------------
# COCO box metrics.


class CocoDetectionMetrics:
  """eval_metric_ops over core.coco_evaluation's pycocotools evaluator.

  The update op (a py_func) adds each batch's groundtruth and detections to
  a `CocoDetectionEvaluator`; the value ops read one COCO evaluation,
  computed once when the values are fetched at the end of an evaluation,
  after which the evaluator is cleared for the next one.
  """

  def __init__(self, categories, include_metrics_per_category=False):
    """Args: categories: [{'id', 'name'}] (label map ids); per-category mAP too."""
    self._evaluator = coco_evaluation.CocoDetectionEvaluator(
        categories, include_metrics_per_category=include_metrics_per_category)
    self._names = ['DetectionBoxes_' + name for name, _ in coco_evaluation.SUMMARY_METRICS]
    if include_metrics_per_category:
      self._names += [coco_evaluation.PER_CATEGORY_PREFIX + c['name'] for c in categories]
    self._next_image_id = 0

  @property
  def metric_names(self):
    return list(self._names)

  def add_batch(self, gt_boxes, gt_classes, num_gt, det_boxes, det_scores, det_classes,
                num_det, image_shapes):
    """Adds one batch (numpy; normalized boxes, 1-based classes); returns 0."""
    for i in range(len(num_gt)):
      n_gt, n_det = int(num_gt[i]), int(num_det[i])
      image_id = self._next_image_id
      self._next_image_id += 1
      self._evaluator.add_single_ground_truth_image_info(image_id, {
          _INPUT.groundtruth_boxes: coco_evaluation.to_absolute(gt_boxes[i][:n_gt],
                                                                image_shapes[i]),
          _INPUT.groundtruth_classes: gt_classes[i][:n_gt]})
      self._evaluator.add_single_detected_image_info(image_id, {
          _DETECTION.detection_boxes: coco_evaluation.to_absolute(det_boxes[i][:n_det],
                                                                  image_shapes[i]),
          _DETECTION.detection_scores: det_scores[i][:n_det],
          _DETECTION.detection_classes: det_classes[i][:n_det]})
    return np.int32(0)

  def evaluate(self):
    """Returns the metrics (float32, in metric_names order) and clears."""
    if not self._evaluator.num_images:
      logging.warning('COCO metrics: no image was evaluated; reporting 0')
      return np.zeros([len(self._names)], np.float32)
    metrics = self._evaluator.evaluate()
    self._evaluator.clear()
    return np.array([metrics.get(name, -1.0) for name in self._names], np.float32)

  def metric_ops(self, features, labels, detections):
    """Returns {metric name: (value, update_op)} for EstimatorSpec.

    Args:
      features: the model_fn features (original_image_spatial_shape is read
        to score boxes in pixels, as COCO's area ranges expect).
      labels: the model_fn labels (groundtruth, one-hot classes).
      detections: the model's postprocess output (0-based classes).
    """
    gt_classes = tf.argmax(labels[_INPUT.groundtruth_classes], axis=-1,
                           output_type=tf.int32) + fields.LABEL_ID_OFFSET
    det_classes = (tf.cast(detections[_DETECTION.detection_classes], tf.int32) +
                   fields.LABEL_ID_OFFSET)
    image_shapes = features.get(_INPUT.original_image_spatial_shape,
                                features[_INPUT.true_image_shape][:, :2])
    update_op = tf.compat.v1.py_func(
        self.add_batch,
        [labels[_INPUT.groundtruth_boxes], gt_classes, labels[_INPUT.num_groundtruth_boxes],
         detections[_DETECTION.detection_boxes], detections[_DETECTION.detection_scores],
         det_classes, detections[_DETECTION.num_detections], image_shapes],
        tf.int32, stateful=True, name='coco_metrics_update')
    values = tf.compat.v1.py_func(self.evaluate, [], tf.float32, stateful=True,
                                  name='coco_metrics_value')
    values.set_shape([len(self._names)])
    return {name: (values[i], update_op) for i, name in enumerate(self._names)}


# ---------------------------------------------------------------------------
# model_fn.


def _losses(model, prediction_dict, true_image_shapes, train_config):
  """Returns (total_loss, {loss name: tensor}) with the OD API's names."""
  losses = dict(model.loss(prediction_dict, true_image_shapes))
  if train_config.add_regularization_loss:
    regularization = model.regularization_losses()
    if regularization:
      losses[REGULARIZATION_LOSS] = tf.add_n(regularization, name='regularization_loss')
  total_loss = tf.add_n([losses[k] for k in sorted(losses)], name='total_loss')
  losses[TOTAL_LOSS] = total_loss
  return total_loss, losses


def _loss_summary(tag, loss):
  """A scalar summary tagged exactly `tag`, as the evaluation names the loss.

  summary.scalar takes its tag from a fresh name scope, which gets a `_1`
  suffix when the model already named the loss op so (the two-stage models'
  `Loss/RPNLoss/localization_loss`, SSD's `Loss/localization_loss`); train
  and eval curves would then not share a TensorBoard tag.
  """
  summary = tf.raw_ops.ScalarSummary(tags=tag, values=loss)
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES, summary)


def _train_op(model, total_loss, losses, train_config, num_worker_replicas):
  """Optimizer, gradient surgery from the train config, BN updates, apply."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  # The legacy trainer builds its optimizer with this call too: one config,
  # one learning rate, whichever path trains it.
  optimizer, summary_vars = optimizer_builder.build_for_training(
      train_config, num_worker_replicas, global_step=global_step)
  # Lets deploy_config.num_clones > 1 average the clones' gradients (replicate.py).
  optimizer = tfe.TowerOptimizer(optimizer)
  for var in summary_vars:
    tf.compat.v1.summary.scalar('LearningRate/' + var.op.name.split('/')[-1], var)
  for name in sorted(losses):
    _loss_summary(name, losses[name])
  grads_and_vars = optimizer.compute_gradients(total_loss)
  # The legacy trainer's surgery: bias multiplier, freeze, update filter, clip.
  grads_and_vars = gradient_surgery.transform_gradients(grads_and_vars, train_config)
  if train_config.summarize_gradients:
    for grad, var in grads_and_vars:
      if grad is not None:
        tf.compat.v1.summary.histogram(var.op.name + '/gradient', grad)
  # Batch-norm statistics move with each step, as optimize_loss(update_ops=) did.
  with tf.control_dependencies(model.updates()):
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step)


def _train_scaffold(model, train_config, hparams):
  """A Scaffold whose init_fn loads the fine-tune checkpoint, or None."""
  if hparams is not None and not hparams.get('load_pretrained', True):
    return None
  init_fn = fine_tune.build_init_fn(model, train_config)
  if init_fn is None:
    return None
  return tf.compat.v1.train.Scaffold(init_fn=lambda scaffold, sess: init_fn(sess))


def _eval_scaffold(train_config, eval_config):
  """A Scaffold restoring moving averages when they are configured, or None."""
  if not moving_averages.uses_moving_averages(train_config, eval_config):
    return None
  # The checkpoint is chosen after the graph is built: the map cannot be checked here.
  return tf.compat.v1.train.Scaffold(saver=moving_averages.restore_saver(True))


def create_model_fn(detection_model_fn, configs, hparams=None, use_tpu=False,
                    postprocess_on_cpu=False):
  """Returns the estimator model_fn for a detector.

  Args:
    detection_model_fn: callable(is_training, add_summaries) -> a
      core.model.DetectionModel, e.g. functools.partial(model_builder.build,
      model_config=configs['model']).
    configs: the dict of config_util.get_configs_from_pipeline_file.
    hparams: an HParams; `load_pretrained=False` skips fine_tune_checkpoint.
    use_tpu, postprocess_on_cpu: TPU arguments of the OD API; True is logged once and
      has no effect (the model_fn is the CPU/GPU one).

  Returns:
    model_fn(features, labels, mode, params=None, config=None) ->
    tfe.EstimatorSpec; the Estimator passes its RunConfig as `config`, whose
    worker replicas enter the LINEAR learning-rate scaling.
  """
  if use_tpu:
    _log_tpu_only('use_tpu', use_tpu)
  if postprocess_on_cpu:
    _log_tpu_only('postprocess_on_cpu', postprocess_on_cpu)
  train_config = configs['train_config']
  if train_config.use_mixed_precision:
    # Its graph rewrite is process-wide: it would also rewrite the evaluation
    # graphs this path builds in the same process.
    raise ValueError('train_config.use_mixed_precision: true is not supported by the '
                     'Estimator path (model_main, model_lib); train with '
                     'python -m trainer.train, or set it to false')
  if train_config.sync_replicas:
    logging.warning('train_config.sync_replicas: true (replicas_to_aggregate %d) has no effect '
                    'on the Estimator path (model_main, model_lib): its workers apply their '
                    'gradients asynchronously. For synchronous replicas train with '
                    'python -m trainer.train', train_config.replicas_to_aggregate)
  eval_config = configs['eval_config']
  categories = od_evaluator.categories_from_configs(configs)

  def model_fn(features, labels, mode, params=None, config=None):
    """Builds the detector graph for `mode` (see the module docstring)."""
    del params
    is_training = mode == tfe.ModeKeys.TRAIN
    model = detection_model_fn(is_training=is_training, add_summaries=True)
    if not isinstance(model, core_model.DetectionModel):
      raise ValueError('model_lib trains DetectionModels; the config built a %s (train '
                       'classifiers with python -m trainer.train)' % type(model).__name__)
    images = features[_INPUT.image]
    true_image_shapes = features[_INPUT.true_image_shape]
    if mode != tfe.ModeKeys.PREDICT:
      model.provide_groundtruth(**batch_util.groundtruth_lists(labels, images,
                                                               true_image_shapes))
    prediction_dict = model.predict(images, true_image_shapes)

    if mode == tfe.ModeKeys.TRAIN:
      scaffold = _train_scaffold(model, train_config, hparams)
      total_loss, losses = _losses(model, prediction_dict, true_image_shapes, train_config)
      num_worker_replicas = config.num_worker_replicas if config is not None else 1
      train_op = _train_op(model, total_loss, losses, train_config, num_worker_replicas)
      return tfe.EstimatorSpec(mode=mode, loss=total_loss, train_op=train_op,
                               scaffold=scaffold)

    detections = model.postprocess(prediction_dict, true_image_shapes)
    outputs = od_exporter.named_detection_outputs(detections, _PREDICT_OUTPUTS)
    scaffold = _eval_scaffold(train_config, eval_config)
    if mode == tfe.ModeKeys.PREDICT:
      return tfe.EstimatorSpec(
          mode=mode, predictions=outputs, scaffold=scaffold,
          export_outputs={_SERVING_KEY: tfe.export.PredictOutput(outputs)})

    total_loss, losses = _losses(model, prediction_dict, true_image_shapes, train_config)
    eval_metric_ops = {name: tf.compat.v1.metrics.mean(loss) for name, loss in losses.items()}
    coco_metrics = CocoDetectionMetrics(categories,
                                        eval_config.include_metrics_per_category)
    eval_metric_ops.update(coco_metrics.metric_ops(features, labels, detections))
    return tfe.EstimatorSpec(mode=mode, loss=total_loss, predictions=outputs,
                             eval_metric_ops=eval_metric_ops, scaffold=scaffold)

  return model_fn


# ---------------------------------------------------------------------------
# Estimator, inputs and specs.


def _merge_run_arguments(configs, train_steps, sample_1_of_n_eval_examples,
                         sample_1_of_n_eval_on_train_examples, override_eval_num_epochs):
  """Applies model_main's arguments to the configs in place; returns train_steps."""
  if train_steps:
    configs['train_config'].num_steps = train_steps
  train_steps = configs['train_config'].num_steps or None
  for eval_input_config in configs['eval_input_configs']:
    if sample_1_of_n_eval_examples and sample_1_of_n_eval_examples >= 1:
      eval_input_config.sample_1_of_n_examples = sample_1_of_n_eval_examples
    if override_eval_num_epochs:
      eval_input_config.num_epochs = 1
  eval_on_train_config = copy.deepcopy(configs['train_input_config'])
  eval_on_train_config.sample_1_of_n_examples = max(sample_1_of_n_eval_on_train_examples or 1, 1)
  eval_on_train_config.num_epochs = 1
  eval_on_train_config.shuffle = False
  configs['eval_on_train_input_config'] = eval_on_train_config
  return train_steps


def apply_deploy_config(run_config, deploy_config):
  """The RunConfig with the clones a pipeline's `deploy_config` asks for.

  A RunConfig that already asks for several clones is kept as it is (and a
  RunConfig's own `deployment_config` always wins): what the program sets in
  code wins over the config file, as command-line flags do for
  `trainer.train`. So do the fault timeouts (`recovery_timeout_secs`, ...)
  (`faults.apply_deploy_config_timeouts`).

  Args:
    run_config: a `tfe.RunConfig`.
    deploy_config: a `pipeline_pb2.DeployConfig`.

  Returns:
    A `tfe.RunConfig`.
  """
  run_config = faults.apply_deploy_config_timeouts(run_config, deploy_config)
  if run_config.num_clones > 1:
    return run_config
  settings = deploy_config_builder.build(deploy_config)
  if settings.deployment_options['variable_update'] != 'parameter_server':
    logging.warning('deploy_config.variable_update=%s is not supported by the Estimator '
                    'path; training with parameter_server updates.',
                    settings.deployment_options['variable_update'])
  if settings.num_clones == 1 and not settings.clone_on_cpu:
    return run_config
  return run_config.replace(num_clones=settings.num_clones,
                            clone_on_cpu=settings.clone_on_cpu)


def _estimator_and_inputs(run_config, hparams=None, pipeline_config_path=None,
                                config_override=None, train_steps=None,
                                sample_1_of_n_eval_examples=None,
                                sample_1_of_n_eval_on_train_examples=1,
                                model_fn_creator=create_model_fn, use_tpu_estimator=False,
                                use_tpu=False, num_shards=1, params=None,
                                override_eval_num_epochs=True, save_final_config=False,
                                postprocess_on_cpu=False, export_to_tpu=None,
                                overrides=None, **kwargs):
  """Builds the estimator and its input_fns from a pipeline config.

  The OD API's 2019 signature (positions and defaults), plus `overrides`; a
  call of the 2018 signature (`eval_steps=`, see trainer/model_lib_2018.py)
  gets the 2018 dict (`eval_input_fn`, `eval_steps`).

  Args:
    run_config: a tfe.RunConfig (model_dir, checkpoint cadence, TF_CONFIG).
    hparams: an HParams (default create_hparams()).
    pipeline_config_path: text-format TrainEvalPipelineConfig.
    config_override: optional text-format config merged on top.
    train_steps: overrides train_config.num_steps; None keeps it (0 = forever).
    sample_1_of_n_eval_examples: keep 1 of n eval examples (None: as configured).
    sample_1_of_n_eval_on_train_examples: same for evaluation on train data.
    model_fn_creator: create_model_fn or a function with its signature; called as
      the OD API calls it, `(detection_model_fn, configs, hparams, use_tpu,
      postprocess_on_cpu)` with `use_tpu=False`.
    use_tpu_estimator, use_tpu, num_shards, postprocess_on_cpu, export_to_tpu: TPU
      arguments; a value other than the default is logged once and has no effect.
    params: passed to the Estimator.
    override_eval_num_epochs: evaluate each eval set once (num_epochs=1).
    save_final_config: write the merged config to model_dir/pipeline.config
      (chief only).
    overrides: optional dict of dotted-path overrides (config_util).
    **kwargs: the OD API's keyword overrides (`batch_size=32`, `train_shuffle=False`,
      `learning_rate=...`, `'train_config.num_steps'`, ...), see
      `config_util.merge_external_params_with_configs`.

  Returns:
    dict with `estimator`, `train_input_fn`, `eval_input_fns` (list),
    `eval_input_names`, `eval_on_train_input_fn`, `predict_input_fn` (a
    serving_input_receiver_fn) and `train_steps`.

  Raises:
    ValueError: for a missing or bad config, an unknown keyword override, or a
      `graph_rewriter` (graph_rewriter_builder).
    TypeError: for a positional call the 2018 and 2019 signatures read differently.
  """
  for name, value, default in (('use_tpu_estimator', use_tpu_estimator, False),
                               ('use_tpu', use_tpu, False), ('num_shards', num_shards, 1),
                               ('postprocess_on_cpu', postprocess_on_cpu, False),
                               ('export_to_tpu', export_to_tpu, None)):
    if value != default and value not in (False, None):
      _log_tpu_only(name, value)
  hparams = hparams if hparams is not None else create_hparams()
  configs = config_util.get_configs_from_pipeline_file(
      pipeline_config_path, config_override=config_override, overrides=overrides,
      required_sections=config_util.TRAIN_SECTIONS)
  config_util.merge_external_params_with_configs(configs, hparams, kwargs_dict=kwargs)
  train_steps = _merge_run_arguments(configs, train_steps, sample_1_of_n_eval_examples,
                                     sample_1_of_n_eval_on_train_examples,
                                     override_eval_num_epochs)
  graph_rewriter_builder.check_configs(configs, is_training=True)
  config_util.check_label_maps(configs)
  model_config = configs['model']
  train_config, eval_config = configs['train_config'], configs['eval_config']

  def detection_model_fn(is_training, add_summaries=True):
    return model_builder.build(model_config, is_training=is_training,
                               add_summaries=add_summaries)

  estimator = tfe.Estimator(
      model_fn=model_fn_creator(detection_model_fn, configs, hparams, False,
                                postprocess_on_cpu),
      config=apply_deploy_config(run_config, configs['deploy_config']), params=params)
  if save_final_config and run_config.is_chief:
    config_util.save_pipeline_config(
        config_util.create_pipeline_proto_from_configs(configs), estimator.model_dir)
  return model_lib_2018.LaterGenerationDict({
      'estimator': estimator,
      'train_input_fn': create_train_input_fn(train_config, configs['train_input_config'],
                                              model_config),
      'eval_input_fns': [create_eval_input_fn(eval_config, c, model_config)
                         for c in configs['eval_input_configs']],
      'eval_input_names': [c.name for c in configs['eval_input_configs']],
      'eval_on_train_input_fn': create_eval_input_fn(
          eval_config, configs['eval_on_train_input_config'], model_config),
      'predict_input_fn': create_predict_input_fn(model_config),
      'train_steps': train_steps,
  }), configs


def create_estimator_and_inputs(*args, **kwargs):
  if model_lib_2018.is_2018_estimator_call(args, kwargs):
    return model_lib_2018.create_estimator_and_inputs(_estimator_and_inputs, args, kwargs)
  return _estimator_and_inputs(*args, **kwargs)[0]


# Shows (inspect, help) the 2019 signature and docstring.
functools.update_wrapper(create_estimator_and_inputs, _estimator_and_inputs,
                         assigned=('__doc__',))


def _train_and_eval_specs(train_input_fn, eval_input_fns, eval_on_train_input_fn,
                          predict_input_fn, train_steps, eval_on_train_data=False,
                          final_exporter_name='Servo', eval_spec_names=None):
  """Returns (train_spec, [eval_spec, ...]) as the OD API does.

  The 2019 signature; a 2018 call (one `eval_input_fn`, then `eval_steps`)
  goes to `model_lib_2018.create_train_and_eval_specs`.

  One EvalSpec per eval input (named '0', '1', ... unless eval_spec_names),
  each with a FinalExporter ('Servo' for the first, 'Servo_<name>' after)
  and steps=None (the whole eval set); optionally one more, 'eval_on_train'.

  Raises:
    ValueError: if there is no eval input or the names do not match it.
    TypeError: eval_input_fns is not a list, or an int is passed as eval_on_train_data.
  """
  if callable(eval_input_fns) or not isinstance(eval_input_fns, (list, tuple)):
    raise TypeError('create_train_and_eval_specs: eval_input_fns must be a list of input_fns '
                    '(2019 signature), got %r; the 2018 signature passes one eval_input_fn '
                    'positionally' % (eval_input_fns,))
  if not isinstance(eval_on_train_data, bool) and eval_on_train_data is not None:
    raise TypeError('create_train_and_eval_specs: eval_on_train_data must be a bool, got %r'
                    % (eval_on_train_data,))
  if not eval_input_fns:
    raise ValueError('create_train_and_eval_specs: no eval input; add an eval_input_reader '
                     'to the pipeline config')
  train_spec = tfe.TrainSpec(input_fn=train_input_fn, max_steps=train_steps)
  if eval_spec_names is None:
    eval_spec_names = [str(i) for i in range(len(eval_input_fns))]
  if len(eval_spec_names) != len(eval_input_fns):
    raise ValueError('eval_spec_names has %d names for %d eval inputs'
                     % (len(eval_spec_names), len(eval_input_fns)))
  eval_specs = []
  for index, (name, input_fn) in enumerate(zip(eval_spec_names, eval_input_fns)):
    exporter_name = final_exporter_name if index == 0 else '%s_%s' % (final_exporter_name, name)
    exporter = tfe.FinalExporter(name=exporter_name,
                                 serving_input_receiver_fn=predict_input_fn)
    eval_specs.append(tfe.EvalSpec(name=name, input_fn=input_fn, steps=None,
                                   exporters=exporter))
  if eval_on_train_data:
    eval_specs.append(tfe.EvalSpec(name='eval_on_train', input_fn=eval_on_train_input_fn,
                                   steps=None))
  return train_spec, eval_specs


def create_train_and_eval_specs(*args, **kwargs):
  if model_lib_2018.is_2018_specs_call(args, kwargs):
    return model_lib_2018.create_train_and_eval_specs(*args, **kwargs)
  return _train_and_eval_specs(*args, **kwargs)


functools.update_wrapper(create_train_and_eval_specs, _train_and_eval_specs,
                         assigned=('__doc__',))


def _continuous_eval(estimator, model_dir, input_fn, train_steps, name,
                     min_interval_secs=180, timeout=None, eval_steps=None):
  """Evaluates each new checkpoint of `model_dir` until step >= train_steps.

  The 2019 signature (plus `eval_steps`); a 2018 call `(estimator, model_dir,
  input_fn, eval_steps, train_steps, name)` is read as such
  (trainer/model_lib_2018.py).

  A checkpoint deleted before its turn (keep_checkpoint_max) is skipped.

  Args:
    estimator: the Estimator.
    model_dir: directory of the training checkpoints.
    input_fn: eval input_fn.
    train_steps: stop after a checkpoint at least this far; None = never.
    name: evaluation name (metrics go to estimator.eval_dir(name)).
    min_interval_secs: minimum seconds between checkpoints looked at.
    timeout: give up after this many seconds without a new checkpoint.
    eval_steps: batches per evaluation; None evaluates the whole eval set.

  Returns:
    The last evaluation's metrics dict, or None if nothing was evaluated.
  """
  def evaluate(ckpt):
    logging.info('Starting evaluation of %s', ckpt)
    start = time.time()
    metrics = estimator.evaluate(input_fn=input_fn, steps=eval_steps, checkpoint_path=ckpt,
                                 name=name)
    logging.info('Eval results (%.1f s): %s', time.time() - start, metrics)
    return metrics

  def reached_train_steps(ckpt, unused_metrics, unused_count):
    step = checkpoints.checkpoint_step(ckpt)
    if train_steps and step >= train_steps:
      logging.info('Evaluation finished after training step %d', step)
      return 'final_checkpoint'
    return None

  return checkpoints.follow_checkpoints(
      model_dir, evaluate, min_interval_secs=min_interval_secs, timeout=timeout,
      stop_fn=reached_train_steps).result


def continuous_eval(*args, **kwargs):
  if model_lib_2018.is_2018_continuous_eval_call(args, kwargs):
    return model_lib_2018.continuous_eval(_continuous_eval, args, kwargs)
  return _continuous_eval(*args, **kwargs)


functools.update_wrapper(continuous_eval, _continuous_eval, assigned=('__doc__',))
