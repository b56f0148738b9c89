"""The legacy training loop: clones, a batch queue and a Supervisor loop.

`train()` takes the same arguments as the Object Detection API's
`legacy/trainer.py` and builds the same graph: a BatchQueue of augmented
examples on the worker CPU, one model clone per device, clone losses and
gradients aggregated by `deployment.model_deploy`, gradient surgery from the
train config, and a Supervisor driven as `slim.learning.train` drives it
(`trainer.supervised_loop`).

    from trainer import trainer
    trainer.train(create_tensor_dict_fn, create_model_fn, train_config,
                  master='', task=0, num_clones=2, worker_replicas=1,
                  clone_on_cpu=True, ps_tasks=0, worker_job_name='worker',
                  is_chief=True, train_dir='/tmp/train')

    # The same in two steps: build, look at or extend the graph, run it.
    graph = trainer.build_training_graph(
        create_tensor_dict_fn, create_model_fn, train_config, task=0, num_clones=2,
        worker_replicas=1, clone_on_cpu=True, ps_tasks=0, worker_job_name='worker')
    trainer.run_training(graph, train_config, '/tmp/train')

Where we differ from the original, on purpose:

* `sync_replicas` works with `num_clones > 1` (the original refused).
* A batch size not divisible by the clones is an error, not a silent floor.
* Gradients are applied only after the total loss passed `check_numerics`
  and, by default, the global gradient norm is finite (core.numerics), so
  a NaN step leaves the variables (and the last checkpoint) intact, and the
  error names the step.
* Closing a session (after the last step, or once a step failed on a lost
  ps) is bounded by the fault runtime: `trainer.supervised_loop` runs the
  Supervisor session as `slim.learning.train` does, but closes it itself.
* One `Session.run` per step, with progress (loss, steps/sec, examples/sec,
  ETA) every `log_every_n_steps`; SIGTERM writes a checkpoint first.
* `update_trainable_variables` is honoured; `use_mixed_precision`,
  `use_xla` and `num_clones=-1` (one clone per visible GPU) are available.
  Each step whose update mixed precision's dynamic loss scale skips (inf or
  NaN gradients) is logged as a warning with the global step and the new
  loss scale; TF's rewrite skips them silently.
* With sync replicas, `startup_delay_steps` is ignored (tf-slim rejects the
  combination) and the end of training cannot hang (see
  deployment/sync_replicas.py). Otherwise a worker's wait for it is done by
  `TrainStepRunner` (not tf-slim), inside the cluster's session-start
  deadline, which each global step read re-arms.
* `train()` is `build_training_graph()` then `run_training()`, so a caller can
  inspect or extend the graph (a `TrainingGraph`) before running it.
* The run settings can come as one `trainer.train_settings.TrainSettings`
  (`train(..., settings=TrainSettings(train_dir=..., num_clones=2))`); the OD
  call shape keeps working beside it.

Models of the OD API's 2017 interface (`preprocess(images)` returning the images,
`predict(images)`, `loss(prediction_dict)`, `restore_map(from_detection_checkpoint=)`)
train unchanged beside the later ones: `core.model_generations` reads which calls a
model takes from the model itself.
"""

import collections
import contextlib
import functools

from core import logs as logging
import tensorflow as tf
import tf_slim as slim

from builders import deploy_config_builder
from builders import optimizer_builder
from builders import preprocessor_builder
from core import batch_util
from core import batcher
from core import fine_tune
from core import gradient_surgery
from core import label_map_util
from core import model as model_lib
from core import model_generations
from core import numerics
from core import paths
from core import preprocessor
from core import standard_fields as fields
from deployment import clone_batch
from deployment import cluster_runtime
from deployment import fault_runtime
from deployment import model_deploy
from deployment import replica_watch
from deployment import shard_restore
from deployment import sync_replicas
from trainer import supervised_loop
from trainer import train_settings
from trainer import training_loop

_LABEL_ID_OFFSET = fields.LABEL_ID_OFFSET


resolve_num_clones = deploy_config_builder.resolve_num_clones
TrainSettings = train_settings.TrainSettings


def batch_size_per_clone(train_config, num_clones):
  """Per-clone batch: batch_size // num_clones (// replicas with sync).

  Raises:
    ValueError: if batch_size is not divisible by num_clones (or by
      replicas_to_aggregate with sync_replicas).
  """
  batch_size = clone_batch.per_clone_batch_size(train_config.batch_size, num_clones,
                                                'train_config.batch_size')
  if train_config.sync_replicas:
    replicas = max(train_config.replicas_to_aggregate, 1)
    if batch_size % replicas:
      raise ValueError(
          'per-clone batch %d is not divisible by '
          'train_config.replicas_to_aggregate=%d' % (batch_size, replicas))
    batch_size //= replicas
  return batch_size


def create_input_queue(batch_size_per_clone, create_tensor_dict_fn,
                       batch_queue_capacity, num_batch_queue_threads,
                       prefetch_queue_capacity, data_augmentation_options):
  """Builds the augmented per-example input and the BatchQueue over it.

  Args:
    batch_size_per_clone: examples each clone dequeues per step.
    create_tensor_dict_fn: returns one decoded example as a tensor_dict.
    batch_queue_capacity: capacity of the batching queue.
    num_batch_queue_threads: threads filling it.
    prefetch_queue_capacity: capacity of the prefetch queue after it.
    data_augmentation_options: list of (function, kwargs) from
      preprocessor_builder.build.

  Returns:
    A `core.batcher.BatchQueue`.
  """
  tensor_dict = create_tensor_dict_fn()
  tensor_dict[fields.InputDataFields.image] = tf.cast(
      tf.expand_dims(tensor_dict[fields.InputDataFields.image], 0), tf.float32)
  if data_augmentation_options:
    func_arg_map = preprocessor.get_default_func_arg_map(
        include_label_weights=(
            fields.InputDataFields.groundtruth_weights in tensor_dict),
        include_multiclass_scores=(
            fields.InputDataFields.multiclass_scores in tensor_dict),
        include_instance_masks=(
            fields.InputDataFields.groundtruth_instance_masks in tensor_dict),
        include_keypoints=(
            fields.InputDataFields.groundtruth_keypoints in tensor_dict))
    tensor_dict = preprocessor.preprocess(
        tensor_dict, data_augmentation_options, func_arg_map=func_arg_map)
  return batcher.BatchQueue(
      tensor_dict,
      batch_size=batch_size_per_clone,
      batch_queue_capacity=batch_queue_capacity,
      num_batch_queue_threads=num_batch_queue_threads,
      prefetch_queue_capacity=prefetch_queue_capacity)


def _merge_boxes_with_multiple_labels(boxes, classes, num_classes):
  """Merges identical boxes into one box with k-hot classes."""
  unique_boxes, box_ids = tf.raw_ops.UniqueV2(x=boxes, axis=[0])[:2]
  one_hot = tf.one_hot(classes, num_classes, dtype=tf.float32)
  k_hot = tf.math.unsorted_segment_max(
      one_hot, box_ids, num_segments=tf.shape(unique_boxes)[0])
  return unique_boxes, k_hot


def get_inputs(input_queue, num_classes, merge_multiple_label_boxes=False,
               use_multiclass_scores=False):
  """Dequeues a batch and converts it to the model's groundtruth format.

  Returns:
    A 7-tuple of lists, one entry per example: images, keys, boxes,
    one-hot classes (background excluded), masks, keypoints, weights. The
    last three hold None for examples without that field.

  Raises:
    ValueError: if both merge_multiple_label_boxes and
      use_multiclass_scores are set.
  """
  if merge_multiple_label_boxes and use_multiclass_scores:
    raise ValueError('Using both merge_multiple_label_boxes and '
                     'use_multiclass_scores is not supported')
  read_data_list = input_queue.dequeue()

  def extract(read_data):
    image = read_data[fields.InputDataFields.image]
    key = read_data.get(fields.InputDataFields.source_id, '')
    boxes = read_data[fields.InputDataFields.groundtruth_boxes]
    classes = tf.cast(label_map_util.checked_class_ids(
        read_data[fields.InputDataFields.groundtruth_classes], num_classes,
        fields.InputDataFields.groundtruth_classes), tf.int32) - _LABEL_ID_OFFSET
    if merge_multiple_label_boxes:
      boxes, classes = _merge_boxes_with_multiple_labels(boxes, classes, num_classes)
    elif use_multiclass_scores:
      classes = tf.cast(read_data[fields.InputDataFields.multiclass_scores],
                        tf.float32)
    else:
      classes = tf.one_hot(classes, depth=num_classes, dtype=tf.float32)
    masks = read_data.get(fields.InputDataFields.groundtruth_instance_masks)
    keypoints = read_data.get(fields.InputDataFields.groundtruth_keypoints)
    if merge_multiple_label_boxes and (masks is not None or keypoints is not None):
      raise NotImplementedError('Multi-label support is only for boxes.')
    weights = read_data.get(fields.InputDataFields.groundtruth_weights)
    return image, key, boxes, classes, masks, keypoints, weights

  return zip(*map(extract, read_data_list))


def _create_classification_losses(model, read_data_list):
  images = [d[fields.InputDataFields.image] for d in read_data_list]
  # One label vector and one range check per batch, not per example (those
  # ran batch_size reshapes and checks every step); exactly one id per example.
  labels = tf.reshape(tf.stack([d[fields.InputDataFields.label] for d in read_data_list]),
                      [len(read_data_list)])
  labels = label_map_util.checked_class_ids(labels, model.num_classes,
                                            fields.InputDataFields.label)
  processed, true_image_shapes = model.preprocess(tf.concat(images, 0))
  model.provide_groundtruth(labels - _LABEL_ID_OFFSET)
  prediction_dict = model.predict(processed, true_image_shapes)
  return model.loss(prediction_dict, true_image_shapes)


def _create_losses(input_queue, create_model_fn, train_config):
  """Builds one clone: dequeue, preprocess, groundtruth, predict, loss.

  Adds every loss to the `tf.compat.v1.losses` collection, where
  `model_deploy` finds them by clone scope.
  """
  model = create_model_fn()
  if isinstance(model, model_lib.ClassificationModel):
    losses_dict = _create_classification_losses(model, input_queue.dequeue())
  else:
    (images, _, groundtruth_boxes_list, groundtruth_classes_list,
     groundtruth_masks_list, groundtruth_keypoints_list,
     groundtruth_weights_list) = get_inputs(
         input_queue, model.num_classes,
         train_config.merge_multiple_label_boxes,
         train_config.use_multiclass_scores)
    # A 2017 OD model (no true_image_shapes) is driven with the calls of its time.
    calls = model_generations.DetectionModelCalls(model)
    # Images of different sizes (keep_aspect_ratio_resizer) are padded to one
    # batch, their boxes moved into the padded frame.
    images, true_image_shapes, groundtruth_boxes_list = batch_util.pad_images(
        [calls.preprocess(image) for image in images], groundtruth_boxes_list)
    if any(mask is None for mask in groundtruth_masks_list):
      groundtruth_masks_list = None
    if any(kp is None for kp in groundtruth_keypoints_list):
      groundtruth_keypoints_list = None
    if any(w is None for w in groundtruth_weights_list):
      groundtruth_weights_list = None
    calls.provide_groundtruth(
        groundtruth_boxes_list, groundtruth_classes_list,
        groundtruth_masks_list, groundtruth_keypoints_list,
        groundtruth_weights_list=groundtruth_weights_list)
    prediction_dict = calls.predict(images, true_image_shapes)
    losses_dict = calls.loss(prediction_dict, true_image_shapes)
  for loss_tensor in losses_dict.values():
    tf.compat.v1.losses.add_loss(loss_tensor)


# Shared with trainer.model_lib's Estimator model_fn; kept here under their old names.
fine_tune_checkpoint_type = fine_tune.fine_tune_checkpoint_type
build_init_fn = fine_tune.build_init_fn
transform_gradients = gradient_surgery.transform_gradients


def _release_workers_then(sync_optimizer, on_finish):
  """An on_finish for the sync chief: unblock every worker, then `on_finish`."""
  def finish(sess, step):
    sync_optimizer.release_workers(sess)
    if on_finish is not None:
      on_finish(sess, step)
  return finish


def session_config(train_config, base=None):
  """The training session's ConfigProto: `base` (default: soft placement, as
  the original) plus XLA's global JIT level ON_1 when `train_config.use_xla`.

  On CPU, TF's auto-clustering also needs TF_XLA_FLAGS=--tf_xla_cpu_global_jit;
  GPUs need nothing more.

  Args:
    train_config: a `train_pb2.TrainConfig`.
    base: optional ConfigProto to start from (copied, not changed).

  Returns:
    A new `tf.compat.v1.ConfigProto`.
  """
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                    log_device_placement=False)
  if base is not None:
    config.CopyFrom(base)
  if train_config.use_xla:
    config.graph_options.optimizer_options.global_jit_level = (
        tf.compat.v1.OptimizerOptions.ON_1)
  return config



class TrainingGraph(collections.namedtuple('TrainingGraph', [
    'graph', 'train_tensor', 'step_after_update', 'saver', 'init_fn', 'summary_op',
    'sync_optimizer', 'replica_progress', 'mixed_precision_check'], defaults=(None, None))):
  """What `build_training_graph` built, and what `run_training` needs to run it.

  Fields:
    graph: the `tf.Graph` holding everything below.
    train_tensor: the checked total loss, evaluated after the update ran.
    step_after_update: the global step read after the update (a control
      dependency on `train_tensor`), so stopping at num_steps is exact.
    saver: the checkpoint `Saver` (replicated copies: copy 0 only).
    init_fn: callable(sess) restoring the fine-tune checkpoint, or None.
    summary_op: the merged summaries.
    sync_optimizer: the `deployment.sync_replicas.SyncReplicasOptimizer`, or
      None without `train_config.sync_replicas`.
    replica_progress: the sync replicas' delivery stamps
      (`deployment.replica_watch.ReplicaProgress`), or None.
    mixed_precision_check: with `train_config.use_mixed_precision`, the
      (update_skipped, loss_scale) tensors of `core.numerics.mixed_precision_check`,
      so the loop reports the steps the dynamic loss scale skips; else None.
  """


def build_training_graph(create_tensor_dict_fn, create_model_fn, train_config, task,
                         num_clones, worker_replicas, clone_on_cpu, ps_tasks,
                         worker_job_name, graph_hook_fn=None, deployment_options=None,
                         faults=None):
  """Builds the legacy trainer's graph in a new `tf.Graph`; runs nothing.

  Args are those of `train()` (see `TrainSettings`); `num_clones` may be -1
  (one per visible GPU).
  With sync replicas and `faults.replica_names`, each step also stamps, on
  the global step's ps, the step this replica delivered gradients for.
  With `train_config.use_mixed_precision` this turns on TF's process-global
  mixed precision rewrite; the caller turns it off after training (`train()`
  does).

  Returns:
    A `TrainingGraph`.

  Raises:
    ValueError: on an inconsistent configuration.
  """
  num_clones = resolve_num_clones(num_clones)
  detection_model = create_model_fn()
  per_clone_batch = batch_size_per_clone(train_config, num_clones)
  with tf.Graph().as_default() as graph:
    deploy_config = model_deploy.DeploymentConfig(
        num_clones=num_clones, clone_on_cpu=clone_on_cpu, replica_id=task,
        num_replicas=worker_replicas, num_ps_tasks=ps_tasks,
        worker_job_name=worker_job_name, **(deployment_options or {}))
    model_deploy.check_clone_devices(deploy_config)
    with tf.compat.v1.device(deploy_config.variables_device()):
      global_step = slim.create_global_step()
    summaries = set(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))
    clones = _build_clones(deploy_config, per_clone_batch, create_tensor_dict_fn,
                           create_model_fn, train_config)
    if graph_hook_fn:
      with tf.compat.v1.device(deploy_config.variables_device()):
        graph_hook_fn()
    replica_progress = None
    if train_config.sync_replicas and faults is not None and faults.watches_replicas:
      replica_progress = replica_watch.ReplicaProgress(faults.replica_names,
                                                         global_step.device)
    with tf.compat.v1.device(deploy_config.optimizer_device()):
      optimizer, sync_optimizer = _build_optimizer(train_config, worker_replicas,
                                                   global_step, summaries)
      train_tensor, step_after_update, mixed_check = _build_update(
          clones, optimizer, global_step, train_config,
          stamp=replica_progress and functools.partial(
              replica_progress.stamp_delivery, faults.replica_name, sync_optimizer))
    # In replicated mode only copy 0 is saved, under the original names. After a
    # lost ps, only its variables are restored (asynchronous training), from
    # the snapshot another ps holds when the chief keeps them.
    saver = shard_restore.ShardRestoringSaver(
        var_list=model_deploy.savable_variables(), partial=sync_optimizer is None,
        snapshot_interval_secs=faults.snapshot_interval_secs if faults is not None else 0,
        keep_checkpoint_every_n_hours=train_config.keep_checkpoint_every_n_hours)
    return TrainingGraph(
        graph=graph, train_tensor=train_tensor, step_after_update=step_after_update,
        saver=saver, init_fn=fine_tune.build_init_fn(detection_model, train_config),
        summary_op=_build_summary_op(summaries, clones[0].scope),
        sync_optimizer=sync_optimizer, replica_progress=replica_progress,
        mixed_precision_check=mixed_check)


def _build_clones(deploy_config, per_clone_batch, create_tensor_dict_fn, create_model_fn,
                  train_config):
  """The input queue on the inputs device, then one model clone per device."""
  data_augmentation_options = [
      preprocessor_builder.build(step) for step in train_config.data_augmentation_options]
  with tf.compat.v1.device(deploy_config.inputs_device()):
    input_queue = create_input_queue(
        per_clone_batch, create_tensor_dict_fn, train_config.batch_queue_capacity,
        train_config.num_batch_queue_threads, train_config.prefetch_queue_capacity,
        data_augmentation_options)
  model_fn = functools.partial(_create_losses, create_model_fn=create_model_fn,
                               train_config=train_config)
  return model_deploy.create_clones(deploy_config, model_fn, [input_queue])


def _build_optimizer(train_config, worker_replicas, global_step, summaries):
  """Returns (the optimizer to apply, the sync replicas optimizer or None).

  Adds the learning rate summaries to the `summaries` set.
  """
  optimizer, summary_vars = optimizer_builder.build_for_training(
      train_config, worker_replicas, global_step=global_step)
  for var in summary_vars:
    summaries.add(tf.compat.v1.summary.scalar(var.op.name, var, family='LearningRate'))
  sync_optimizer = None
  if train_config.sync_replicas:
    # Resizable: workers may join and leave a running job (trainer/train.py).
    optimizer = sync_optimizer = sync_replicas.SyncReplicasOptimizer(
        optimizer, replicas_to_aggregate=train_config.replicas_to_aggregate,
        total_num_replicas=worker_replicas, resizable=True)
  if train_config.use_mixed_precision:
    optimizer = tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite(
        optimizer, loss_scale='dynamic')
  return optimizer, sync_optimizer


def _build_update(clones, optimizer, global_step, train_config, stamp=None):
  """Returns (train_tensor, step_after_update, mixed_precision_check).

  The checked loss, the gradient surgery and one update; the last item is
  None without `train_config.use_mixed_precision`.

  `stamp`, when given, is callable(gradients) returning an op that records
  the step these gradients are for (`ReplicaProgress.stamp_delivery`).
  """
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS,
                                           clones[0].scope)
  regularization_losses = None if train_config.add_regularization_loss else []
  total_loss, grads_and_vars = model_deploy.optimize_clones(
      clones, optimizer, regularization_losses=regularization_losses)
  total_loss = tf.debugging.check_numerics(
      numerics.inject_nan_loss(total_loss, global_step, train_config.debug_nan_loss_at_step),
      training_loop.NAN_LOSS_MESSAGE)
  # The update waits for the numerics checks (the loss, and the gradient norm
  # in transform_gradients), so a NaN step changes nothing.
  grads_and_vars = gradient_surgery.transform_gradients(grads_and_vars, train_config,
                                                        wait_for=total_loss)
  update_ops.append(model_deploy.apply_gradients(clones, optimizer, grads_and_vars,
                                                 global_step=global_step))
  if stamp is not None:  # After apply_gradients created the sync local step.
    update_ops.append(stamp([g for g, _ in grads_and_vars]))
  update_op = tf.group(*update_ops, name='update_barrier')
  with tf.control_dependencies([update_op]):
    train_tensor = tf.identity(total_loss, name='train_op')
  with tf.control_dependencies([train_tensor]), tf.compat.v1.name_scope(
      'global_step_after_update'):
    step_after_update = global_step.read_value()  # already a read + identity
  mixed_check = None
  if train_config.use_mixed_precision:
    mixed_check = numerics.mixed_precision_check(grads_and_vars, optimizer, update_op)
  return train_tensor, step_after_update, mixed_check


def _build_summary_op(summaries, first_clone_scope):
  """Merges `summaries` with model variables, losses and the first clone's summaries."""
  for model_var in slim.get_model_variables():
    summaries.add(tf.compat.v1.summary.histogram('ModelVars/' + model_var.op.name, model_var))
  for loss_tensor in tf.compat.v1.losses.get_losses():
    summaries.add(tf.compat.v1.summary.scalar('Losses/' + loss_tensor.op.name, loss_tensor))
  summaries.add(tf.compat.v1.summary.scalar('Losses/TotalLoss',
                                            tf.compat.v1.losses.get_total_loss()))
  summaries |= set(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES,
                                               first_clone_scope))
  return tf.compat.v1.summary.merge(list(summaries), name='summary_op')


def run_training(training_graph, train_config, train_dir, master='', is_chief=True,
                 session_config_override=None, on_finish=None, startup_timeout_secs=600,
                 faults=None, on_new_session=None):
  """Runs a `TrainingGraph` in Supervisor sessions until num_steps or SIGTERM.

  `trainer.supervised_loop` drives the Supervisor as `slim.learning.train`
  does, and closes each session through the fault runtime, within its bound.

  Args:
    training_graph: from `build_training_graph`.
    train_config: the `train_pb2.TrainConfig` it was built from.
    train_dir, master, is_chief, session_config_override, on_finish,
      startup_timeout_secs, faults: as in `trainer.train_settings.TrainSettings`.
    on_new_session: optional callable(sess), run before the first step of
      each session (`training_loop.TrainStepRunner`).

  Returns:
    The last total loss.

  Raises:
    trainer.training_loop.TrainingPreempted: after SIGTERM.
    trainer.training_loop.NanLossError: when the loss became inf or NaN.
    TimeoutError: a non-chief task whose chief did not initialise the model.
    tf.errors.UnavailableError, tf.errors.AbortedError: a peer was lost (the
      recovery deadline of `faults.recovery` is running); calling
      `run_training` again with the same `training_graph` starts a new
      session on it.
  """
  faults = faults or fault_runtime.TaskFaults()
  sync_optimizer = training_graph.sync_optimizer
  startup_delay_steps = train_config.startup_delay_steps
  if sync_optimizer is not None and startup_delay_steps:
    logging.info('sync_replicas: ignoring startup_delay_steps=%g (tf-slim rejects it with '
                 'a sync optimizer)', startup_delay_steps)
    startup_delay_steps = 0
  if sync_optimizer is not None and is_chief:
    on_finish = _release_workers_then(sync_optimizer, on_finish)
  runner = training_loop.TrainStepRunner(
      number_of_steps=train_config.num_steps or None,
      examples_per_step=train_config.batch_size,
      log_every_n_steps=train_config.log_every_n_steps, is_chief=is_chief,
      saver=training_graph.saver, checkpoint_path=paths.join(train_dir, 'model.ckpt'),
      on_finish=on_finish, step_after_update=training_graph.step_after_update,
      mixed_precision_check=training_graph.mixed_precision_check,
      faults=faults, startup_delay_steps=startup_delay_steps, on_new_session=on_new_session,
      snapshots=getattr(training_graph.saver, 'snapshots', None) if is_chief else None,
      replica_monitor=training_graph.replica_progress and (
          replica_watch.ReplicaMonitor.for_task(
              training_graph.replica_progress,
              tf.compat.v1.train.get_global_step(training_graph.graph), faults,
              final_step=train_config.num_steps,
              saver=training_graph.saver if is_chief else None,
              checkpoint_path=paths.join(train_dir, 'model.ckpt'))))
  config = session_config(train_config, base=session_config_override)
  _reopen_for_a_new_session(training_graph.graph)
  with training_graph.graph.as_default():
    # From here to the first step, a hung ps would block without an error.
    runner.watch_session_start(startup_timeout_secs)
    try:
      if master and not is_chief:
        cluster_runtime.wait_for_model_ready(master, config, startup_timeout_secs)
      with runner.handle_sigterm(), faults.noting_lost_peers(lambda: runner.last_step):
        supervised_loop.run_supervised(
            training_graph.train_tensor, train_dir, step_fn=runner,
            bounded_session_fn=runner.session_for, master=master, is_chief=is_chief,
            session_config=config, init_fn=training_graph.init_fn,
            summary_op=training_graph.summary_op,
            save_summaries_secs=train_config.save_summaries_secs,
            save_interval_secs=train_config.save_interval_secs,
            sync_optimizer=sync_optimizer, saver=training_graph.saver,
            ignore_live_threads=sync_optimizer is not None)
    finally:
      runner.stop_watching()  # A rebuilt session arms it again.
  runner.raise_if_preempted()
  return runner.last_loss


def _reopen_for_a_new_session(graph):
  """Lets `supervised_loop.run_supervised` run a graph that an earlier session ran.

  Its Supervisor finalizes the graph, and each call first adds its own
  initializer and ready ops. After a lost ps the task runs the same graph
  in a new session instead of building it again: rebuilding a ResNet-50
  graph took 50 s of a 75 s recovery (benchmarks/RESULTS.md, ps failover).
  The few ops each call adds are small beside the model.
  """
  if graph.finalized:
    graph._unsafe_unfinalize()  # noqa: SLF001  (TF has no public way back)


def train(create_tensor_dict_fn, create_model_fn, train_config, master=None, task=None,
          num_clones=None, worker_replicas=None, clone_on_cpu=None, ps_tasks=None,
          worker_job_name=None, is_chief=None, train_dir=None, graph_hook_fn=None,
          settings=None, **more_settings):
  """Trains a model with clones, following the OD API's legacy trainer.

  `build_training_graph` followed by `run_training`. The run settings are one
  `trainer.train_settings.TrainSettings`; the OD API's arguments (master ...
  train_dir, positionally or by keyword) and slimtrain's later keywords
  (`session_config_override`, `on_finish`, `deployment_options`,
  `startup_timeout_secs`, `faults`) still work and override its fields.

  Args:
    create_tensor_dict_fn: returns one decoded example (a tensor_dict).
    create_model_fn: returns a new DetectionModel or ClassificationModel.
    train_config: a `train_pb2.TrainConfig` (read, never written).
    master, task, num_clones, worker_replicas, clone_on_cpu, ps_tasks,
      worker_job_name, is_chief, train_dir: the OD API's run arguments (see
      `TrainSettings`); None takes the field of `settings`.
    graph_hook_fn: optional callable run after the clones are built.
    settings: optional `TrainSettings` (default: its defaults; a train_dir
      must come from somewhere).
    **more_settings: other `TrainSettings` fields by keyword.

  Returns:
    The last total loss.

  Raises:
    ValueError: on an inconsistent configuration, or without a train_dir.
    TypeError: for a keyword that is no `TrainSettings` field.
    trainer.training_loop.TrainingPreempted: after SIGTERM (checkpoint
      written by the chief).
    trainer.training_loop.NanLossError: when the loss became inf or NaN.
    tf.errors.UnavailableError, tf.errors.AbortedError: a peer was lost.
  """
  run = train_settings.resolve(
      settings, more_settings, master=master, task=task, num_clones=num_clones,
      worker_replicas=worker_replicas, clone_on_cpu=clone_on_cpu, ps_tasks=ps_tasks,
      worker_job_name=worker_job_name, is_chief=is_chief, train_dir=train_dir)
  with mixed_precision_ends_with(train_config):
    training_graph = build_training_graph(
        create_tensor_dict_fn, create_model_fn, train_config, run.task, run.num_clones,
        run.worker_replicas, run.clone_on_cpu, run.ps_tasks, run.worker_job_name,
        graph_hook_fn=graph_hook_fn, deployment_options=run.deployment_options,
        faults=run.faults)
    return run_training(training_graph, train_config, run.train_dir, master=run.master,
                        is_chief=run.is_chief,
                        session_config_override=run.session_config_override,
                        on_finish=run.on_finish, startup_timeout_secs=run.startup_timeout_secs,
                        faults=run.faults)


@contextlib.contextmanager
def mixed_precision_ends_with(train_config):
  """A block after which TF's mixed precision rewrite is off again.

  `build_training_graph` turns the rewrite on for `train_config.use_mixed_precision`,
  and the switch is process-global: graphs built after training must not
  inherit it. Wrap the building and every run of the graph in this block.
  """
  try:
    yield
  finally:
    if train_config.use_mixed_precision:
      tf.compat.v1.mixed_precision.disable_mixed_precision_graph_rewrite()
