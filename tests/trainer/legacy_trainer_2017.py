"""A user's own detection trainer of 2017, moved onto slimtrain by changing its imports.

In 2017 people who trained Object Detection API models often kept their own training
script beside their model code, written against the interfaces of that year. This file
plays that script for tests/trainer/test_od_2017.py, which checks that such a program
still runs once `object_detection.X` reads `X`, `tf.contrib.slim` reads `tf_slim` and
`tensorflow` reads `tensorflow.compat.v1`. It leans on the 2017 call shapes that
slimtrain keeps answering:

  * `optimizer_builder.build(optimizer_config, summary_set)` returns only the optimizer
    and puts its learning-rate summary into `summary_set`;
  * `util_ops.padded_one_hot_encoding(indices=, depth=, left_pad=)` and the three-result
    `util_ops.merge_boxes_with_multiple_labels(boxes, classes, num_classes)`;
  * a DetectionModel of that time: `preprocess(images)` gives back the images alone,
    then `predict(images)`, `loss(predictions)` and
    `restore_map(from_detection_checkpoint=...)`;
  * `variables_helper` to edit gradients, and `slim.learning.train` as the loop.

Usage, as the test calls it:

    legacy_trainer_2017.train(create_tensor_dict_fn, create_model_fn, train_config,
                              master='', task=0, num_clones=1, worker_replicas=1,
                              clone_on_cpu=True, ps_tasks=0, worker_job_name='worker',
                              is_chief=True, train_dir='/tmp/train')
"""

import tensorflow.compat.v1 as tf
import tf_slim as slim

from builders import optimizer_builder
from builders import preprocessor_builder
from core import batcher
from core import preprocessor
from core import standard_fields as fields
from deployment import model_deploy
from utils import ops as util_ops
from utils import variables_helper

_KEYS = fields.InputDataFields

# Class ids in the records start at 1 (0 is the background); the model counts from 0.
_RECORD_CLASS_BASE = 1

# Variables whose gradients `bias_grad_multiplier` scales.
_BIAS_VARIABLES = ['.*/biases']

# How often slim.learning.train writes the merged summaries.
_SUMMARY_SECONDS = 120


def _batched_examples(create_tensor_dict_fn, train_config, examples_per_clone):
  """Reads one example, augments it if the config asks, and queues batches of it.

  Args:
    create_tensor_dict_fn: returns one example as a dict keyed by `InputDataFields`.
    train_config: the TrainConfig (augmentation options and queue sizes).
    examples_per_clone: how many examples one clone takes per step.

  Returns:
    A `batcher.BatchQueue`; `dequeue()` gives a list of example dicts.
  """
  augmentation = [preprocessor_builder.build(option)
                  for option in train_config.data_augmentation_options]
  example = create_tensor_dict_fn()
  # The preprocessor works on a float batch of one image.
  example[_KEYS.image] = tf.cast(tf.expand_dims(example[_KEYS.image], axis=0), tf.float32)
  if augmentation:
    example = preprocessor.preprocess(example, augmentation)
  return batcher.BatchQueue(example,
                            batch_size=examples_per_clone,
                            batch_queue_capacity=train_config.batch_queue_capacity,
                            num_batch_queue_threads=train_config.num_batch_queue_threads,
                            prefetch_queue_capacity=train_config.prefetch_queue_capacity)


def _box_targets(example, num_classes, merge_labels):
  """Boxes and float class rows of one dequeued example.

  Args:
    example: one dequeued example dict.
    num_classes: the model's number of classes, background excluded.
    merge_labels: when true, a box that carries several labels becomes one box whose
      class row is k-hot; otherwise each label is its own one-hot row.

  Returns:
    (boxes [N, 4], classes [N, num_classes] float32).
  """
  boxes = example[_KEYS.groundtruth_boxes]
  labels = tf.cast(example[_KEYS.groundtruth_classes], tf.int32) - _RECORD_CLASS_BASE
  if merge_labels:
    unique_boxes, k_hot, _ = util_ops.merge_boxes_with_multiple_labels(
        boxes, labels, num_classes)
    return unique_boxes, tf.cast(k_hot, tf.float32)
  one_hot = util_ops.padded_one_hot_encoding(indices=labels, depth=num_classes, left_pad=0)
  return boxes, one_hot


class _DetectorLosses(object):
  """The `model_fn` each clone runs: a fresh detector whose losses go to `tf.losses`."""

  def __init__(self, create_model_fn, merge_labels):
    self._create_model_fn = create_model_fn
    self._merge_labels = merge_labels

  def __call__(self, example_queue):
    detector = self._create_model_fn()
    images, boxes, classes, masks = [], [], [], []
    for example in example_queue.dequeue():
      example_boxes, example_classes = _box_targets(
          example, detector.num_classes, self._merge_labels)
      boxes.append(example_boxes)
      classes.append(example_classes)
      masks.append(example.get(_KEYS.groundtruth_instance_masks))
      images.append(detector.preprocess(example[_KEYS.image]))
    # Masks only count when every example of the batch has them.
    if not all(mask is not None for mask in masks):
      masks = None
    detector.provide_groundtruth(boxes, classes, masks)
    predictions = detector.predict(tf.concat(images, axis=0))
    for _, loss in sorted(detector.loss(predictions).items()):
      tf.losses.add_loss(loss)


def _edit_gradients(gradients, train_config):
  """Scales bias gradients, drops frozen variables and clips, as far as the config says.

  Args:
    gradients: (gradient, variable) pairs summed over the clones.
    train_config: the TrainConfig.

  Returns:
    The edited (gradient, variable) pairs.
  """
  multiplier = train_config.bias_grad_multiplier
  if multiplier:
    gradients = variables_helper.multiply_gradients_matching_regex(
        gradients, _BIAS_VARIABLES, multiplier=multiplier)
  frozen = train_config.freeze_variables
  if frozen:
    gradients = variables_helper.freeze_gradients_matching_regex(gradients, frozen)
  max_norm = train_config.gradient_clipping_by_norm
  if max_norm > 0:
    with tf.name_scope('clip_grads'):
      gradients = slim.learning.clip_gradient_norms(gradients, max_norm)
  return gradients


def _step_op(deploy_config, clones, train_config, worker_replicas, global_step):
  """Builds the optimizer and the op that trains one step on all clones.

  Args:
    deploy_config: the `model_deploy.DeploymentConfig`.
    clones: what `model_deploy.create_clones` returned.
    train_config: the TrainConfig.
    worker_replicas: number of worker tasks (for synchronous replicas).
    global_step: the global step variable.

  Returns:
    (train_tensor: the total loss, run after the update; the SyncReplicasOptimizer or
    None; the set of summaries the optimizer builder added).
  """
  optimizer_summaries = set()
  with tf.device(deploy_config.optimizer_device()):
    optimizer = optimizer_builder.build(train_config.optimizer, optimizer_summaries)
    sync_optimizer = None
    if train_config.sync_replicas:
      optimizer = sync_optimizer = tf.train.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=train_config.replicas_to_aggregate,
          total_num_replicas=worker_replicas)
    loss, gradients = model_deploy.optimize_clones(clones, optimizer,
                                                   regularization_losses=None)
    loss = tf.check_numerics(loss, 'LossTensor is inf or nan.')
    apply_op = optimizer.apply_gradients(_edit_gradients(gradients, train_config),
                                         global_step=global_step)
    # Batch norm statistics and other updates come from the first clone only.
    first_clone_updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
    with tf.control_dependencies([tf.group(apply_op, *first_clone_updates)]):
      train_tensor = tf.identity(loss, name='train_op')
  return train_tensor, sync_optimizer, optimizer_summaries


def _fine_tune_init_fn(detector, train_config):
  """Returns an `init_fn(session)` restoring the fine-tune checkpoint, or None.

  Only the variables of the detector's restore map that the checkpoint holds (same name
  and shape) are restored; the rest keep their initial values.
  """
  checkpoint = train_config.fine_tune_checkpoint
  if not checkpoint:
    return None
  restore_map = detector.restore_map(
      from_detection_checkpoint=train_config.from_detection_checkpoint)
  in_checkpoint = variables_helper.get_variables_available_in_checkpoint(
      restore_map, checkpoint)
  fine_tune_saver = tf.train.Saver(in_checkpoint)

  def init_fn(session):
    fine_tune_saver.restore(session, checkpoint)
  return init_fn


def _merged_summaries(kept, first_clone_scope):
  """Merges `kept` with the first clone's summaries and the loss / variable summaries."""
  summaries = set(kept)
  summaries.update(tf.get_collection(tf.GraphKeys.SUMMARIES, first_clone_scope))
  summaries.add(tf.summary.scalar('TotalLoss', tf.losses.get_total_loss()))
  summaries.update(tf.summary.scalar(loss.op.name, loss) for loss in tf.losses.get_losses())
  summaries.update(tf.summary.histogram(variable.op.name, variable)
                   for variable in slim.get_model_variables())
  return tf.summary.merge(sorted(summaries, key=lambda summary: summary.name),
                          name='summary_op')


def train(create_tensor_dict_fn, create_model_fn, train_config, master, task, num_clones,
          worker_replicas, clone_on_cpu, ps_tasks, worker_job_name, is_chief, train_dir):
  """Trains a detection model with tf_slim's training loop.

  Args:
    create_tensor_dict_fn: returns one input example (a dict of tensors).
    create_model_fn: returns a new DetectionModel; called once per clone.
    train_config: a train_pb2.TrainConfig.
    master: address of the TensorFlow session target ('' for in-process).
    task: this worker's index.
    num_clones: model copies on this worker; `batch_size` is split among them.
    worker_replicas: how many workers train together.
    clone_on_cpu: put the clones on the CPU.
    ps_tasks: number of parameter servers (0 keeps variables local).
    worker_job_name: the workers' job name in the cluster.
    is_chief: whether this worker initializes, checkpoints and writes summaries.
    train_dir: where checkpoints and event files go.
  """
  # A detector of its own answers which variables to restore (its restore_map reads the
  # training graph's variables when called).
  detector_for_restore = create_model_fn() if train_config.fine_tune_checkpoint else None
  with tf.Graph().as_default():
    deploy_config = model_deploy.DeploymentConfig(
        worker_job_name=worker_job_name, replica_id=task, num_replicas=worker_replicas,
        num_ps_tasks=ps_tasks, num_clones=num_clones, clone_on_cpu=clone_on_cpu)
    with tf.device(deploy_config.inputs_device()):
      example_queue = _batched_examples(create_tensor_dict_fn, train_config,
                                        train_config.batch_size // num_clones)
    # Summaries made so far (the input queues') are kept; of the clones', the first's.
    input_summaries = tf.get_collection(tf.GraphKeys.SUMMARIES)
    with tf.device(deploy_config.variables_device()):
      global_step = slim.get_or_create_global_step()

    clones = model_deploy.create_clones(
        deploy_config,
        _DetectorLosses(create_model_fn, train_config.merge_multiple_label_boxes),
        [example_queue])
    train_tensor, sync_optimizer, optimizer_summaries = _step_op(
        deploy_config, clones, train_config, worker_replicas, global_step)
    init_fn = _fine_tune_init_fn(detector_for_restore, train_config)
    summary_op = _merged_summaries(set(input_summaries) | optimizer_summaries,
                                   clones[0].scope)

    checkpoint_saver = tf.train.Saver(
        keep_checkpoint_every_n_hours=train_config.keep_checkpoint_every_n_hours)
    slim.learning.train(
        train_tensor,
        train_dir,
        master=master,
        is_chief=is_chief,
        global_step=global_step,
        number_of_steps=train_config.num_steps or None,
        init_fn=init_fn,
        saver=checkpoint_saver,
        summary_op=summary_op,
        save_summaries_secs=_SUMMARY_SECONDS,
        startup_delay_steps=train_config.startup_delay_steps,
        sync_optimizer=sync_optimizer,
        # Ops without a kernel for the chosen device fall back to the CPU.
        session_config=tf.ConfigProto(allow_soft_placement=True))
