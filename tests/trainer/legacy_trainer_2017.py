"""A user's copy of the OD API's 2017 `trainer.py`, ported by changing its imports only.

The calls, their argument names and their return shapes are those of the 2017 file:
`util_ops.padded_one_hot_encoding(indices=, depth=, left_pad=)`,
`util_ops.merge_boxes_with_multiple_labels(boxes, classes, num_classes)` (three values),
`optimizer_builder.build(train_config.optimizer, global_summaries)` returning the
optimizer alone, the DetectionModel calls of that time (`preprocess(images)` returns the
images, `predict(images)`, `loss(prediction_dict)`,
`restore_map(from_detection_checkpoint=...)`), `variables_helper` on the gradients and
`slim.learning.train` at the end. Only the import lines differ from the user's file
(`object_detection.X` -> `X`, `tf.contrib.slim` -> `tf_slim`, `tensorflow` ->
`tensorflow.compat.v1`). tests/trainer/test_od_2017.py runs it.
"""

import functools

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


def _create_input_queue(batch_size_per_clone, create_tensor_dict_fn, batch_queue_capacity,
                        num_batch_queue_threads, prefetch_queue_capacity,
                        data_augmentation_options):
  tensor_dict = create_tensor_dict_fn()
  tensor_dict[fields.InputDataFields.image] = tf.expand_dims(
      tensor_dict[fields.InputDataFields.image], 0)
  images = tensor_dict[fields.InputDataFields.image]
  tensor_dict[fields.InputDataFields.image] = tf.to_float(images)
  if data_augmentation_options:
    tensor_dict = preprocessor.preprocess(tensor_dict, data_augmentation_options)
  return batcher.BatchQueue(
      tensor_dict, batch_size=batch_size_per_clone,
      batch_queue_capacity=batch_queue_capacity,
      num_batch_queue_threads=num_batch_queue_threads,
      prefetch_queue_capacity=prefetch_queue_capacity)


def _get_inputs(input_queue, num_classes, merge_multiple_label_boxes=False):
  read_data_list = input_queue.dequeue()
  label_id_offset = 1

  def extract_images_and_targets(read_data):
    image = read_data[fields.InputDataFields.image]
    location_gt = read_data[fields.InputDataFields.groundtruth_boxes]
    classes_gt = tf.cast(read_data[fields.InputDataFields.groundtruth_classes], tf.int32)
    classes_gt -= label_id_offset
    if merge_multiple_label_boxes:
      location_gt, classes_gt, _ = util_ops.merge_boxes_with_multiple_labels(
          location_gt, classes_gt, num_classes)
      classes_gt = tf.cast(classes_gt, tf.float32)
    else:
      classes_gt = util_ops.padded_one_hot_encoding(
          indices=classes_gt, depth=num_classes, left_pad=0)
    masks_gt = read_data.get(fields.InputDataFields.groundtruth_instance_masks)
    return image, location_gt, classes_gt, masks_gt

  return zip(*map(extract_images_and_targets, read_data_list))


def _create_losses(input_queue, create_model_fn, train_config):
  detection_model = create_model_fn()
  (images, groundtruth_boxes_list, groundtruth_classes_list, groundtruth_masks_list
   ) = _get_inputs(input_queue, detection_model.num_classes,
                   train_config.merge_multiple_label_boxes)
  images = [detection_model.preprocess(image) for image in images]
  images = tf.concat(images, 0)
  if any(mask is None for mask in groundtruth_masks_list):
    groundtruth_masks_list = None
  detection_model.provide_groundtruth(groundtruth_boxes_list, groundtruth_classes_list,
                                      groundtruth_masks_list)
  prediction_dict = detection_model.predict(images)
  losses_dict = detection_model.loss(prediction_dict)
  for loss_tensor in losses_dict.values():
    tf.losses.add_loss(loss_tensor)


def train(create_tensor_dict_fn, create_model_fn, train_config, master, task, num_clones,
          worker_replicas, clone_on_cpu, ps_tasks, worker_job_name, is_chief, train_dir):
  detection_model = create_model_fn()
  data_augmentation_options = [
      preprocessor_builder.build(step) for step in train_config.data_augmentation_options]

  with tf.Graph().as_default():
    deploy_config = model_deploy.DeploymentConfig(
        num_clones=num_clones, clone_on_cpu=clone_on_cpu, replica_id=task,
        num_replicas=worker_replicas, num_ps_tasks=ps_tasks,
        worker_job_name=worker_job_name)

    with tf.device(deploy_config.variables_device()):
      global_step = slim.create_global_step()

    with tf.device(deploy_config.inputs_device()):
      input_queue = _create_input_queue(
          train_config.batch_size // num_clones, create_tensor_dict_fn,
          train_config.batch_queue_capacity, train_config.num_batch_queue_threads,
          train_config.prefetch_queue_capacity, data_augmentation_options)

    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
    global_summaries = set([])

    model_fn = functools.partial(_create_losses, create_model_fn=create_model_fn,
                                 train_config=train_config)
    clones = model_deploy.create_clones(deploy_config, model_fn, [input_queue])
    first_clone_scope = clones[0].scope
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_clone_scope)

    with tf.device(deploy_config.optimizer_device()):
      training_optimizer = optimizer_builder.build(train_config.optimizer,
                                                   global_summaries)

    sync_optimizer = None
    if train_config.sync_replicas:
      training_optimizer = tf.train.SyncReplicasOptimizer(
          training_optimizer, replicas_to_aggregate=train_config.replicas_to_aggregate,
          total_num_replicas=worker_replicas)
      sync_optimizer = training_optimizer

    init_fn = None
    if train_config.fine_tune_checkpoint:
      var_map = detection_model.restore_map(
          from_detection_checkpoint=train_config.from_detection_checkpoint)
      available_var_map = variables_helper.get_variables_available_in_checkpoint(
          var_map, train_config.fine_tune_checkpoint)
      init_saver = tf.train.Saver(available_var_map)

      def initializer_fn(sess):
        init_saver.restore(sess, train_config.fine_tune_checkpoint)
      init_fn = initializer_fn

    with tf.device(deploy_config.optimizer_device()):
      total_loss, grads_and_vars = model_deploy.optimize_clones(
          clones, training_optimizer, regularization_losses=None)
      total_loss = tf.check_numerics(total_loss, 'LossTensor is inf or nan.')
      if train_config.bias_grad_multiplier:
        biases_regex_list = ['.*/biases']
        grads_and_vars = variables_helper.multiply_gradients_matching_regex(
            grads_and_vars, biases_regex_list, multiplier=train_config.bias_grad_multiplier)
      if train_config.freeze_variables:
        grads_and_vars = variables_helper.freeze_gradients_matching_regex(
            grads_and_vars, train_config.freeze_variables)
      if train_config.gradient_clipping_by_norm > 0:
        with tf.name_scope('clip_grads'):
          grads_and_vars = slim.learning.clip_gradient_norms(
              grads_and_vars, train_config.gradient_clipping_by_norm)
      grad_updates = training_optimizer.apply_gradients(grads_and_vars,
                                                        global_step=global_step)
      update_ops.append(grad_updates)
      update_op = tf.group(*update_ops)
      with tf.control_dependencies([update_op]):
        train_tensor = tf.identity(total_loss, name='train_op')

    for model_var in slim.get_model_variables():
      global_summaries.add(tf.summary.histogram(model_var.op.name, model_var))
    for loss_tensor in tf.losses.get_losses():
      global_summaries.add(tf.summary.scalar(loss_tensor.op.name, loss_tensor))
    global_summaries.add(tf.summary.scalar('TotalLoss', tf.losses.get_total_loss()))
    summaries |= set(tf.get_collection(tf.GraphKeys.SUMMARIES, first_clone_scope))
    summaries |= global_summaries
    summary_op = tf.summary.merge(list(summaries), name='summary_op')

    session_config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    keep_checkpoint_every_n_hours = train_config.keep_checkpoint_every_n_hours
    saver = tf.train.Saver(keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours)

    slim.learning.train(
        train_tensor, logdir=train_dir, master=master, is_chief=is_chief,
        session_config=session_config, startup_delay_steps=train_config.startup_delay_steps,
        init_fn=init_fn, summary_op=summary_op,
        number_of_steps=(train_config.num_steps if train_config.num_steps else None),
        save_summaries_secs=120, sync_optimizer=sync_optimizer, saver=saver)
