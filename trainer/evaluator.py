r"""Graph-mode evaluation of detection and classification checkpoints.

The legacy Object Detection evaluator, reading the same configs: it builds
one eval graph (input -> model.preprocess -> predict -> postprocess, plus the
losses against groundtruth), then for each checkpoint restores the weights in
a fresh session, runs every eval example through it one at a time, and
computes

* detectors: the COCO box metrics of `core.coco_evaluation` (pycocotools):
  `DetectionBoxes_Precision/mAP`, `.../mAP@.50IOU`, `.../mAP@.75IOU`, recalls
  and, with `eval_config.include_metrics_per_category`, per-category AP;
* classifiers: `Accuracy/top_1` and `Accuracy/top_5`;
* both: the mean of each loss the model reports (e.g. `Loss/classification_loss`).

Metrics are written as scalar summaries at the checkpoint's global step into
`eval_dir`, next to up to `eval_config.num_visualizations` images whose
detections (left, at most `max_num_boxes_to_visualize` scoring at least
`min_score_threshold`, labelled `name: score`) and groundtruth (right,
labelled with class names) are drawn under the panel titles
(`eval_images.detections_and_groundtruth`).

    from trainer import evaluator
    configs = config_util.get_configs_from_pipeline_file('configs/ssd_shapes.config')
    metrics = evaluator.evaluate_from_configs(configs, checkpoint_dir='out/demo/train',
                                              eval_dir='out/demo/eval', run_once=True)
    metrics['DetectionBoxes_Precision/mAP@.50IOU']

`evaluate(create_input_dict_fn, create_model_fn, eval_config, categories,
checkpoint_dir, eval_dir, ...)` is the OD legacy evaluator's entry point (any
model and input functions); `evaluate_with_result` also returns the step, the
checkpoint, the number of evaluations and why it stopped.

`checkpoint_dir` is a checkpoint prefix (that one is evaluated) or a
directory. For a directory, `run_once` evaluates the latest checkpoint;
otherwise every new checkpoint is evaluated as it appears
(`tf.compat.v1.train.checkpoints_iterator`) until one of these holds, which
is logged:

* the checkpoint just evaluated has global step >= `num_steps` (the end of
  training, `train_config.num_steps`);
* `eval_config.max_evals` checkpoints were evaluated (0 = no limit); with
  `keep_final` (evaluate_from_configs, trainer.eval) and a known `num_steps`
  it limits only the checkpoints before the final one, which is always
  evaluated;
* no new checkpoint appeared for `eval_timeout` seconds (the original
  evaluators waited forever).

A continuous evaluator also waits (logging what for, within the same
`eval_timeout`) for a directory that does not exist yet: on Kubernetes the
evaluator starts with the chief, before the chief created train_dir. A path
that cannot become a training directory fails at once with a ValueError:
with `run_once`, a prefix-like name (`model.ckpt-1000`) without its `.index`,
or a missing name inside an existing training directory
(`core.checkpoints.checkpoint_source`).
"""

import collections

from core import logs as logging
import numpy as np
import tensorflow as tf

from builders import model_builder
from builders import input_reader_builder
from core import checkpoints
from core import coco_evaluation
from core import label_map_util
from core import model as model_lib
from core import moving_averages
from core import paths
from core import standard_fields as fields
from trainer import eval_images

_INPUT = fields.InputDataFields
_DETECTION = fields.DetectionResultFields


VISUALIZATION_TAG = 'Detections_Left_Groundtruth_Right'

# Why continuous evaluation ended (EvalResult.stop_reason).
STOP_FINAL_CHECKPOINT = 'final_checkpoint'
STOP_MAX_EVALS = 'max_evals'
STOP_TIMEOUT = checkpoints.STOP_TIMEOUT
STOP_RUN_ONCE = 'run_once'

EvalResult = collections.namedtuple(
    'EvalResult', ['metrics', 'global_step', 'checkpoint_path', 'num_evaluations',
                   'stop_reason'])

_EvalGraph = collections.namedtuple('_EvalGraph', ['graph', 'fetches', 'is_classifier'])


# Building the eval graph ---------------------------------------------------------------------


def _detection_fetches(model, tensor_dict, ignore_groundtruth):
  """Per-image fetches of a DetectionModel: detections, groundtruth, losses."""
  image = tensor_dict[_INPUT.image]
  images = tf.expand_dims(tf.cast(image, tf.float32), 0)
  preprocessed, true_image_shapes = model.preprocess(images)
  prediction_dict = model.predict(preprocessed, true_image_shapes)
  detections = model.postprocess(prediction_dict, true_image_shapes)
  fetches = {
      'image': image,
      _DETECTION.detection_boxes: detections[_DETECTION.detection_boxes][0],
      _DETECTION.detection_scores: detections[_DETECTION.detection_scores][0],
      _DETECTION.detection_classes: detections[_DETECTION.detection_classes][0],
      _DETECTION.num_detections: detections[_DETECTION.num_detections][0],
  }
  if ignore_groundtruth:
    return fetches
  boxes = tensor_dict[_INPUT.groundtruth_boxes]
  classes = tf.cast(tensor_dict[_INPUT.groundtruth_classes], tf.int32)
  fetches[_INPUT.groundtruth_boxes] = boxes
  fetches[_INPUT.groundtruth_classes] = classes
  for optional in (_INPUT.groundtruth_is_crowd, _INPUT.groundtruth_area,
                   _INPUT.groundtruth_difficult):
    if optional in tensor_dict:
      fetches[optional] = tensor_dict[optional]
  # Instance masks (Mask R-CNN's mask loss) cover the whole decoded image,
  # the frame the model expects them in.
  masks = tensor_dict.get(_INPUT.groundtruth_instance_masks)
  model.provide_groundtruth(
      [boxes], [tf.one_hot(classes - fields.LABEL_ID_OFFSET, model.num_classes, dtype=tf.float32)],
      groundtruth_masks_list=None if masks is None else [masks])
  fetches['losses'] = dict(model.loss(prediction_dict, true_image_shapes))
  return fetches


def _classification_fetches(model, tensor_dict, ignore_groundtruth):
  """Per-image fetches of a ClassificationModel: logits, label, losses."""
  image = tensor_dict[_INPUT.image]
  preprocessed, true_image_shapes = model.preprocess(
      tf.expand_dims(tf.cast(image, tf.float32), 0))
  prediction_dict = model.predict(preprocessed, true_image_shapes)
  fetches = {'logits': prediction_dict[fields.ClassificationResultFields.logits]}
  if ignore_groundtruth:
    return fetches
  label = tf.reshape(tf.cast(tensor_dict[_INPUT.label], tf.int32), [1]) - fields.LABEL_ID_OFFSET
  fetches['label'] = label
  model.provide_groundtruth(label)
  fetches['losses'] = dict(model.loss(prediction_dict, true_image_shapes))
  return fetches


def build_eval_graph(create_input_dict_fn, create_model_fn, ignore_groundtruth=False,
                     graph_hook_fn=None):
  """Builds the graph that evaluates one example per `Session.run`.

  Args:
    create_input_dict_fn: returns a per-example tensor_dict (e.g.
      `functools.partial(input_reader_builder.build, eval_input_config)`).
    create_model_fn: returns a DetectionModel or ClassificationModel built
      with is_training=False.
    ignore_groundtruth: build no groundtruth/loss fetches (no metrics then).
    graph_hook_fn: optional callable run after the model is built.

  Returns:
    an _EvalGraph(graph, fetches, is_classifier).
  """
  graph = tf.Graph()
  with graph.as_default():
    tensor_dict = create_input_dict_fn()
    model = create_model_fn()
    is_classifier = isinstance(model, model_lib.ClassificationModel)
    build = _classification_fetches if is_classifier else _detection_fetches
    fetches = build(model, tensor_dict, ignore_groundtruth)
    if graph_hook_fn:
      graph_hook_fn()
  return _EvalGraph(graph, fetches, is_classifier)


# Restoring checkpoints -----------------------------------------------------------------------


# Kept as public names of this module (the demo and users call them from here).
checkpoint_step = checkpoints.checkpoint_step
resolve_checkpoint = checkpoints.resolve_checkpoint_path


# Running one evaluation ----------------------------------------------------------------------


class _DetectionMetrics:
  """Feeds per-image results to the COCO evaluator; keeps visualizations."""

  def __init__(self, categories, eval_config):
    self._coco = coco_evaluation.CocoDetectionEvaluator(
        categories, eval_config.include_metrics_per_category)
    self._eval_config = eval_config
    self._category_names = {category['id']: category['name'] for category in categories}
    self.images = []

  def add(self, index, result):
    config = self._eval_config
    num = int(result[_DETECTION.num_detections])
    boxes = result[_DETECTION.detection_boxes][:num]
    scores = result[_DETECTION.detection_scores][:num]
    classes = result[_DETECTION.detection_classes][:num].astype(np.int64) + fields.LABEL_ID_OFFSET
    has_groundtruth = _INPUT.groundtruth_boxes in result
    if has_groundtruth:
      gt = {key: result[key] for key in (_INPUT.groundtruth_classes, _INPUT.groundtruth_is_crowd,
                                         _INPUT.groundtruth_area) if key in result}
      gt[_INPUT.groundtruth_boxes] = coco_evaluation.to_absolute(
          result[_INPUT.groundtruth_boxes], result['image'].shape)
      self._coco.add_single_ground_truth_image_info(index, gt)
      self._coco.add_single_detected_image_info(index, {
          _DETECTION.detection_boxes: coco_evaluation.to_absolute(boxes,
                                                                  result['image'].shape),
          _DETECTION.detection_scores: scores,
          _DETECTION.detection_classes: classes})
    if len(self.images) < config.num_visualizations:
      groundtruth = ((result[_INPUT.groundtruth_boxes], result[_INPUT.groundtruth_classes])
                     if has_groundtruth else None)
      self.images.append(eval_images.detections_and_groundtruth(
          result['image'], (boxes, classes, scores), groundtruth, self._category_names,
          min_score_thresh=config.min_score_threshold,
          max_boxes_to_draw=config.max_num_boxes_to_visualize))

  def evaluate(self):
    return self._coco.evaluate() if self._coco.num_images else {}


class _ClassificationMetrics:
  """Counts top-1 / top-5 hits (with fewer than 5 classes top-5 is always 1)."""

  def __init__(self):
    self._accuracy = coco_evaluation.ClassificationAccuracy(top_k=(1, 5))
    self.images = []
    self._count = 0

  def add(self, index, result):
    del index
    if 'label' in result:
      self._accuracy.add_batch(result['logits'], result['label'])
      self._count += 1

  def evaluate(self):
    return self._accuracy.evaluate() if self._count else {}


def run_checkpoint(eval_graph, checkpoint_path, eval_config, categories, session_config=None):
  """Evaluates one checkpoint.

  Args:
    eval_graph: from `build_eval_graph`.
    checkpoint_path: a checkpoint prefix.
    eval_config: an eval_pb2.EvalConfig (num_examples, visualization and
      metric options, use_moving_averages).
    categories: list of {'id', 'name'} (detectors only).
    session_config: optional ConfigProto.

  Returns:
    (metrics dict, list of uint8 visualization images, number of examples).
  """
  if eval_graph.is_classifier:
    metrics = _ClassificationMetrics()
  else:
    metrics = _DetectionMetrics(categories, eval_config)
  losses = collections.defaultdict(list)
  count = 0
  with eval_graph.graph.as_default():
    saver = moving_averages.restore_saver(eval_config.use_moving_averages, checkpoint_path,
                                          model_description='eval model')
    with tf.compat.v1.Session(graph=eval_graph.graph, config=session_config) as sess:
      # The input iterator's initializer is among the table initializers.
      sess.run([tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      saver.restore(sess, checkpoint_path)
      while not eval_config.num_examples or count < eval_config.num_examples:
        try:
          result = sess.run(eval_graph.fetches)
        except tf.errors.OutOfRangeError:
          break
        for name, value in result.pop('losses', {}).items():
          losses[name].append(float(value))
        metrics.add(count, result)
        count += 1
        if count % 100 == 0:
          logging.info('evaluated %d examples', count)
  if not count:
    raise ValueError('the eval input produced no examples; check eval_input_reader paths')
  values = metrics.evaluate()
  values.update({name: float(np.mean(v)) for name, v in losses.items()})
  return values, metrics.images, count


def summary_writer(eval_dir, graph=None):
  """A FileWriter for eval_dir (also usable while eager execution is on)."""
  with tf.Graph().as_default():
    return tf.compat.v1.summary.FileWriter(eval_dir, graph=graph)


def write_summaries(writer, global_step, metrics, images):
  """Writes metrics (scalars) and images with `writer` at global_step."""
  summary = tf.compat.v1.Summary()
  for name, value in sorted(metrics.items()):
    summary.value.add(tag=name, simple_value=float(value))
  for i, image in enumerate(images):
    summary.value.append(eval_images.image_summary_value('%s/%d' % (VISUALIZATION_TAG, i),
                                                         image))
  writer.add_summary(summary, global_step)
  writer.flush()


def _export_visualizations(export_dir, global_step, images):
  paths.makedirs(export_dir)
  for i, image in enumerate(images):
    eval_images.write_png(paths.join(export_dir, 'export-%d-%d.png' % (global_step, i)),
                          image)


def _log_metrics(global_step, metrics):
  for name in sorted(metrics):
    logging.info('eval @ step %d: %s = %.4f', global_step, name, metrics[name])


def evaluate_checkpoint(eval_graph, checkpoint_path, eval_config, categories, writer,
                        session_config=None):
  """Evaluates one checkpoint, writes its summaries with `writer`; returns (metrics, step)."""
  global_step = checkpoint_step(checkpoint_path)
  logging.info('evaluating %s (step %d)', checkpoint_path, global_step)
  metrics, images, count = run_checkpoint(eval_graph, checkpoint_path, eval_config, categories,
                                          session_config)
  logging.info('evaluated %d examples of %s', count, checkpoint_path)
  _log_metrics(global_step, metrics)
  write_summaries(writer, global_step, metrics, images)
  if eval_config.visualization_export_dir:
    _export_visualizations(eval_config.visualization_export_dir, global_step, images)
  return metrics, global_step


# The evaluation loop -------------------------------------------------------------------------


def evaluate_with_result(create_input_dict_fn, create_model_fn, eval_config, categories,
                         checkpoint_dir, eval_dir, graph_hook_fn=None, num_steps=0,
                         run_once=False, eval_timeout=None, session_config=None,
                         keep_final=False):
  """Like `evaluate`, returning an EvalResult (metrics, step, stop reason, ...).

  `keep_final=True` (what `evaluate_from_configs` and trainer.eval use): with a
  known `num_steps`, eval_config.max_evals limits only the evaluations before
  the final checkpoint, which is always evaluated (max_evals 1: that one alone).
  """
  if not checkpoint_dir:
    raise ValueError('checkpoint_dir is empty: pass a checkpoint directory or prefix')
  if not eval_dir:
    raise ValueError('eval_dir is empty: pass the directory summaries go to')
  try:
    source = checkpoints.checkpoint_source(checkpoint_dir, may_wait=not run_once)
  except ValueError as e:
    raise ValueError('checkpoint_dir not found: %s' % e) from None
  single = source == checkpoints.SOURCE_PREFIX
  if eval_timeout is None:
    eval_timeout = eval_config.eval_timeout_secs
  if not single and not run_once and (source == checkpoints.SOURCE_PENDING or
                                      not tf.train.latest_checkpoint(checkpoint_dir)):
    logging.info('checkpoint_dir %s %s yet: waiting %s for training to write its first '
                 'checkpoint there', checkpoint_dir,
                 'does not exist' if source == checkpoints.SOURCE_PENDING else
                 'holds no checkpoint',
                 'up to %d s' % eval_timeout if eval_timeout else 'without a time limit')
  tf.io.gfile.makedirs(eval_dir)
  eval_graph = build_eval_graph(create_input_dict_fn, create_model_fn,
                                eval_config.ignore_groundtruth, graph_hook_fn)
  writer = summary_writer(eval_dir, eval_graph.graph if eval_config.save_graph else None)
  try:
    return _evaluation_loop(eval_graph, eval_config, categories, checkpoint_dir, writer,
                            num_steps, single or run_once, eval_timeout, session_config,
                            keep_final)
  finally:
    writer.close()


def _evaluation_loop(eval_graph, eval_config, categories, checkpoint_dir, writer, num_steps,
                     run_once, eval_timeout, session_config, keep_final=False):
  """Evaluates one or each new checkpoint; returns an EvalResult (see `_follow`)."""

  def one(path):
    return evaluate_checkpoint(eval_graph, path, eval_config, categories, writer,
                               session_config)

  if run_once:
    path = resolve_checkpoint(checkpoint_dir)
    metrics, step = one(path)
    return EvalResult(metrics, step, path, 1, STOP_RUN_ONCE)

  return _follow(one, eval_config, checkpoint_dir, num_steps, eval_timeout,
                 keep_final and bool(num_steps))


def _follow(one, eval_config, checkpoint_dir, num_steps, eval_timeout, keep_final):
  """Evaluates each new checkpoint with `one(path)` until a stop; returns an EvalResult.

  With `keep_final` (a known num_steps) max_evals caps only the checkpoints
  before the final one: past max_evals - 1 of them the rest are skipped, so
  the final checkpoint is always evaluated. Without it max_evals stops the loop.
  """
  evaluated = []  # (metrics, step, path) of each checkpoint evaluated
  earlier_cap = eval_config.max_evals - 1 if keep_final and eval_config.max_evals else None

  def evaluate_or_skip(path):
    if earlier_cap is not None and len(evaluated) >= earlier_cap:
      step = checkpoint_step(path)
      if step < num_steps:
        logging.info('skipping %s (step %d < num_steps %d): eval_config.max_evals=%d keeps '
                     'its last evaluation for the final checkpoint', path, step, num_steps,
                     eval_config.max_evals)
        return None
    metrics, step = one(path)
    evaluated.append((metrics, step, path))
    return metrics, step

  def stop_reason(unused_path, metrics_and_step, unused_count):
    if metrics_and_step is None:
      return None
    step = metrics_and_step[1]
    if num_steps and step >= num_steps:
      logging.info('evaluated the final checkpoint (step %d >= num_steps %d); stopping',
                   step, num_steps)
      return STOP_FINAL_CHECKPOINT
    if not keep_final and eval_config.max_evals and len(evaluated) >= eval_config.max_evals:
      logging.info('evaluated max_evals=%d checkpoints; stopping', eval_config.max_evals)
      return STOP_MAX_EVALS
    return None

  outcome = checkpoints.follow_checkpoints(
      checkpoint_dir, evaluate_or_skip, min_interval_secs=eval_config.eval_interval_secs,
      timeout=eval_timeout, stop_fn=stop_reason)
  metrics, step, path = evaluated[-1] if evaluated else ({}, None, None)
  return EvalResult(metrics, step, path, len(evaluated), outcome.stop_reason)


def evaluate(create_input_dict_fn, create_model_fn, eval_config, categories, checkpoint_dir,
             eval_dir, graph_hook_fn=None, num_steps=0, run_once=False, eval_timeout=None,
             session_config=None):
  """Evaluates one checkpoint, or each new one in a directory (the legacy OD evaluator).

  Args:
    create_input_dict_fn: returns a per-example tensor_dict.
    create_model_fn: returns the model, built with is_training=False.
    eval_config: an eval_pb2.EvalConfig.
    categories: list of {'id': int, 'name': str} (label map categories).
    checkpoint_dir: a checkpoint prefix, or a directory of checkpoints.
    eval_dir: summaries are written here.
    graph_hook_fn: optional callable run after the model is built.
    num_steps: stop after evaluating a checkpoint at this step or later
      (0: no such stop).
    run_once: evaluate the directory's latest checkpoint and return.
    eval_timeout: seconds to wait for a new checkpoint before stopping;
      None takes eval_config.eval_timeout_secs, 0 waits forever.
    session_config: optional ConfigProto for the eval sessions.

  Returns:
    the metrics dict of the last evaluated checkpoint ({} if none appeared).

  Raises:
    ValueError: on a missing checkpoint directory/prefix, an empty directory
      with run_once, a checkpoint that does not fit the model, or an eval
      input without examples.
  """
  return evaluate_with_result(create_input_dict_fn, create_model_fn, eval_config, categories,
                              checkpoint_dir, eval_dir, graph_hook_fn, num_steps, run_once,
                              eval_timeout, session_config).metrics


def categories_from_configs(configs):
  """The label map categories of the eval input (default names if none)."""
  model_config = configs['model']
  model_name = model_config.WhichOneof('model')
  num_classes = getattr(model_config, model_name).num_classes
  label_map_path = configs['eval_input_config'].label_map_path
  label_map = label_map_util.load_labelmap(label_map_path) if label_map_path else None
  return label_map_util.convert_label_map_to_categories(label_map, num_classes)


def evaluate_from_configs(configs, checkpoint_dir, eval_dir, run_once=False, eval_timeout=None,
                          eval_training_data=False, session_config=None, return_result=False):
  """Evaluates with the readers and model of a configs dict (config_util).

  Args:
    configs: the dict of `config_util.get_configs_from_pipeline_file`.
    checkpoint_dir, eval_dir, run_once, eval_timeout, session_config: see
      `evaluate`; the final step is `train_config.num_steps`, and max_evals
      never stops the evaluation before it (`keep_final`). Moving averages
      are restored when eval_config.use_moving_averages or
      train_config.optimizer.use_moving_average is set (as the exporter does).
    eval_training_data: evaluate on the train input reader instead.
    return_result: return the EvalResult instead of the metrics dict.

  Returns:
    the metrics dict (or the EvalResult).
  """
  input_config = type(configs['eval_input_config'])()
  input_config.CopyFrom(configs['train_input_config'] if eval_training_data
                        else configs['eval_input_config'])
  if not input_config.WhichOneof('input_reader'):
    raise ValueError('the pipeline config has no %s with input paths' %
                     ('train_input_reader' if eval_training_data else 'eval_input_reader'))
  # One pass over the data; eval_config.num_examples may stop earlier.
  input_config.num_epochs = 1

  def create_input_dict_fn():
    return input_reader_builder.build(input_config)

  def create_model_fn():
    return model_builder.build(configs['model'], is_training=False)

  eval_config = type(configs['eval_config'])()
  eval_config.CopyFrom(configs['eval_config'])
  eval_config.use_moving_averages = moving_averages.uses_moving_averages(
      configs['train_config'], eval_config)
  result = evaluate_with_result(
      create_input_dict_fn, create_model_fn, eval_config,
      categories_from_configs(configs), checkpoint_dir, eval_dir,
      num_steps=configs['train_config'].num_steps, run_once=run_once,
      eval_timeout=eval_timeout, session_config=session_config, keep_final=True)
  return result if return_result else result.metrics
