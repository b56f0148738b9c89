r"""Training command line: one process per chief / worker / ps task.

Single machine, two clones on two GPUs:

    python -m trainer.train --pipeline_config_path=configs/ssd_shapes.config \
        --train_dir=/tmp/train --num_clones=2

A cluster: every task gets the same flags and its own TF_CONFIG, e.g.

    TF_CONFIG='{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"],
                            "ps": ["host2:2222"]},
                "task": {"type": "worker", "index": 0}}'

A ps task serves until the chief (and then every worker) reports that
training is over, then exits 0 (129, retryable, if the chief disappears for
longer than `deploy_config.chief_timeout_secs` or reports that the job
failed). Training tasks started before their ps tasks wait for them, logging
every few seconds, and exit 1 with a clear error after
`deploy_config.startup_timeout_secs`. Chief/master/worker tasks train. When
TF_CONFIG is present it wins over --master/--task/--worker_replicas/--ps_tasks
(a conflict is logged); a grpc:// --master without TF_CONFIG is waited for the
same way, and exits 129 when it stays unreachable. The chief copies the pipeline config to
`train_dir/pipeline.config`; before that, at start, it checks that it can
create and delete a file in train_dir, and exits 1 naming the path, its uid
and the fix when it cannot. After SIGTERM the chief writes a checkpoint and
every task (ps included) exits 143 within `deploy_config.termination_grace_secs`;
a NaN loss exits 1 naming the step. A lost ps makes the training tasks
start a new session on the graph they built, and the chief restores what
that ps held from its snapshot or the latest checkpoint (129 after
`deploy_config.recovery_timeout_secs`); a sync replica missing for
`deploy_config.replica_timeout_secs` makes every task exit 129. Any other
uncaught failure exits by its class (deployment/exit_codes.py): 129 for one
known to pass (tf.errors Unavailable/DeadlineExceeded/Aborted, a storage
EIO/ETIMEDOUT/ECONNRESET, a GPU that failed to initialise), 1 otherwise. See
docs/fault_tolerance.md.
"""

import functools

from absl import app
from absl import flags
from core import logs as logging

from builders import deploy_config_builder
from builders import graph_rewriter_builder
from builders import input_reader_builder
from builders import model_builder
from core import checkpoints
from core import config_util
from deployment import cluster as cluster_lib
from deployment import cluster_check
from deployment import cluster_runtime
from deployment import elastic
from deployment import exit_codes
from deployment import fault_runtime
from deployment import fault_tolerance
from deployment import startup_checks
from deployment import sync_replicas
from trainer import trainer
from trainer import training_loop

FLAGS = flags.FLAGS
# Set when this worker left a running asynchronous job on SIGTERM: nothing of it is left
# to save, so it exits without the interpreter's slow teardown (deployment/elastic.py).
_left_the_job = []
# A --master of this scheme is waited for before a session is opened on it.
_GRPC = 'grpc://'

def define_flags():
  """Defines the flags; called only when this module runs as the program.

  Several command modules share flag names (`--pipeline_config_path`), so
  defining them at import would clash when one process imports two of them.
  """
  flags.DEFINE_string('train_dir', '', 'Directory for checkpoints and summaries.')
  flags.DEFINE_string('pipeline_config_path', '',
                      'Path to a text-format TrainEvalPipelineConfig.')
  flags.DEFINE_integer('num_clones', None,
                       'Clones per worker (-1: one per GPU); default from '
                       'deploy_config.num_clones.')
  flags.DEFINE_boolean('clone_on_cpu', None,
                       'Put clones on the CPU; default from deploy_config.')
  flags.DEFINE_string('master', '', 'gRPC target of the TF master (no TF_CONFIG).')
  flags.DEFINE_integer('task', 0, 'Task index of this worker (no TF_CONFIG).')
  flags.DEFINE_integer('worker_replicas', 1, 'Number of workers (no TF_CONFIG).')
  flags.DEFINE_integer('ps_tasks', 0, 'Number of ps tasks (no TF_CONFIG).')
  flags.DEFINE_integer('num_train_steps', None,
                       'Overrides train_config.num_steps when set.')


def _resolve_cluster(cluster):
  """Returns (master, task, worker_replicas, ps_tasks, worker_job_name, is_chief)."""
  if not cluster.is_distributed:
    return (FLAGS.master, FLAGS.task, FLAGS.worker_replicas, FLAGS.ps_tasks,
            'worker', FLAGS.task == 0)
  from_tf_config = {'master': cluster.master, 'task': cluster.task_index,
                    'worker_replicas': cluster.num_worker_replicas,
                    'ps_tasks': cluster.num_ps_tasks}
  conflicts = ['--%s=%s (TF_CONFIG: %s)' % (name, FLAGS[name].value, value)
               for name, value in from_tf_config.items()
               if FLAGS[name].present and FLAGS[name].value != value]
  if conflicts:
    logging.warning('TF_CONFIG wins over conflicting flags: %s', ', '.join(conflicts))
  return (cluster.master, cluster.task_index, cluster.num_worker_replicas,
          cluster.num_ps_tasks, cluster.worker_job_name, cluster.is_chief)


def run(argv=None):
  """Runs this task's role; returns the process exit code."""
  del argv
  if not FLAGS.train_dir:
    raise app.UsageError('--train_dir is required')
  overrides = {}
  if FLAGS.num_train_steps is not None:
    overrides['train_config.num_steps'] = FLAGS.num_train_steps
  configs = config_util.get_configs_from_pipeline_file(
      FLAGS.pipeline_config_path, overrides=overrides,
      required_sections=config_util.TRAIN_SECTIONS)
  graph_rewriter_builder.check_configs(configs, is_training=True)
  config_util.check_label_maps(configs)
  deploy_config = configs['deploy_config']
  timeouts = deploy_config_builder.cluster_timeouts(deploy_config)
  cluster = cluster_lib.ClusterConfig.from_tf_config()
  # A cluster task restarted after its job ended; one process just restores and stops.
  if cluster.is_distributed and _already_finished(configs['train_config'].num_steps):
    return exit_codes.DONE

  # A ps job may gain and lose workers while it runs (deployment/elastic.py); the
  # rounds of a sync-replicas job follow the count (deployment/sync_replicas.py).
  if cluster.task_type == 'ps':
    try:
      server = cluster_check.start_server_and_agree(cluster, timeouts.startup, resizable=True)
      return fault_runtime.serve_ps(
          server, cluster, timeouts,
          # The cluster check has just talked to the chief.
          chief_seen=cluster.is_distributed and not cluster.is_chief)
    except cluster_check.ClusterMismatchError as e:
      logging.error('%s', e)
      return exit_codes.PERMANENT
    except (fault_runtime.TaskFailed, fault_runtime.TrainingPreempted) as e:
      return e.code  # 129 (logged) or 143.
    except (cluster_runtime.StartupTimeoutError, TimeoutError) as e:
      logging.error('%s', e)
      return exit_codes.RETRYABLE
  if cluster.task_type == 'evaluator':
    raise app.UsageError('an evaluator task runs trainer.eval, not trainer.train')

  master, task, worker_replicas, ps_tasks, worker_job_name, is_chief = (
      _resolve_cluster(cluster))
  if is_chief:  # Before anything is built or waited for: fail in seconds, not at a save.
    try:
      startup_checks.check_writable(FLAGS.train_dir, '--train_dir')
    except startup_checks.NotWritableError as e:
      logging.error('%s', e)
      return exit_codes.PERMANENT
  if not cluster.is_distributed and master.startswith(_GRPC):
    # A session on an unreachable target blocks forever; wait like for a peer.
    try:
      cluster_runtime.wait_for_tasks([master[len(_GRPC):]], deploy_config.startup_timeout_secs,
                                     what='the --master')
    except cluster_runtime.StartupTimeoutError as e:
      logging.error('%s', e)
      return exit_codes.RETRYABLE
  train_config = configs['train_config']
  session_config = trainer.session_config(train_config)
  elastic_job = cluster.is_distributed and bool(cluster.num_ps_tasks)
  if cluster.is_distributed:
    session_config.device_filters.extend(cluster.device_filters)
    if cluster.num_ps_tasks:
      try:
        cluster_runtime.wait_for_tasks(cluster.cluster_spec.job_tasks('ps'),
                                     deploy_config.startup_timeout_secs)
        master = _start_training_server(cluster, timeouts).target
        cluster.propagate_cluster(session_config)
      except cluster_check.ClusterMismatchError as e:
        logging.error('%s', e)
        return exit_codes.PERMANENT
      except (cluster_runtime.StartupTimeoutError, TimeoutError) as e:
        logging.error('%s', e)
        return exit_codes.RETRYABLE
  if is_chief:
    config_util.save_pipeline_config(
        config_util.create_pipeline_proto_from_configs(configs), FLAGS.train_dir)

  input_config = configs['train_input_config']
  # With TF_CONFIG the chief reads place 0 and worker i place i + 1 (task_index
  # alone gave the chief and worker 0 the same files and left the last unread).
  num_shards, shard = cluster.input_shard if cluster.is_distributed else (worker_replicas, task)
  create_tensor_dict_fn = functools.partial(
      input_reader_builder.build, input_config,
      num_worker_replicas=num_shards, task_index=shard,
      skip_corrupt_records=train_config.skip_corrupt_records)
  create_model_fn = functools.partial(
      model_builder.build, model_config=configs['model'], is_training=True)
  deploy = deploy_config_builder.build(deploy_config, num_clones=FLAGS.num_clones,
                                       clone_on_cpu=FLAGS.clone_on_cpu)
  logging.info('%s', deploy_config_builder.placement_text(
      deploy, deploy_config, FLAGS.num_clones, FLAGS.clone_on_cpu))
  faults = fault_runtime.TaskFaults(timeouts, cluster, master, is_chief,
                                    sync_replicas=train_config.sync_replicas)

  training_graph = []  # Built once: a session rebuilt after a lost peer runs it again.
  sync_members = _SyncMembers(cluster, is_chief, training_graph) if (
      elastic_job and train_config.sync_replicas) else None

  def train_once():
    if not training_graph:
      logging.info('building the training graph')
      training_graph.append(trainer.build_training_graph(
          create_tensor_dict_fn, create_model_fn, train_config, task, deploy.num_clones,
          worker_replicas, deploy.clone_on_cpu, ps_tasks, worker_job_name,
          deployment_options=deploy.deployment_options, faults=faults))
    trainer.run_training(training_graph[0], train_config, FLAGS.train_dir, master=master,
                         is_chief=is_chief, session_config_override=session_config,
                         startup_timeout_secs=deploy_config.startup_timeout_secs,
                         faults=faults,
                         on_new_session=sync_members and sync_members.on_new_session)

  # Without the chief nobody saves a worker's work: a worker exits retryable then.
  stop_watching_chief = faults.watch_chief()
  members = None
  try:
    with faults.leaving_on_sigterm(elastic_job and not is_chief, functools.partial(
        elastic.announce, cluster, elastic.LEFT,
        timeout_secs=min(5, timeouts.termination_grace))), (
        trainer.mixed_precision_ends_with(train_config)):
      members = _join(cluster, master, is_chief, sync_members) if elastic_job else None
      trained = _train_until_done(train_once, cluster, faults, train_config.num_steps)
    if not trained:
      return exit_codes.DONE  # The ps tasks have exited: nobody to tell.
  except fault_runtime.TrainingPreempted as e:
    logging.warning('%s', e)
    if elastic_job and not is_chief:  # removed (a scale-down) or preempted alone
      faults.leave()  # Unless the training loop already did, before its close.
      _left_the_job.append(True)
    if ps_tasks:
      fault_runtime.signal_preempted(master, cluster, timeouts)
    return exit_codes.PREEMPTED
  except (training_loop.NanLossError, TimeoutError) as e:
    logging.error('%s', e.message if hasattr(e, 'message') else e)
    return exit_codes.PERMANENT
  finally:
    stop_watching_chief.set()
    if members is not None:
      members.stop()
  if cluster.is_distributed and ps_tasks:
    cluster_runtime.signal_training_done(master, cluster)
  return exit_codes.DONE


def _start_training_server(cluster, timeouts):
  """Starts the server of a chief or worker of a ps cluster after its cluster check.

  Returns:
    The started server; a worker new to the running job boots as a joiner.
  """
  if cluster.is_chief:
    return cluster_check.start_server_and_agree(cluster, timeouts.startup, resizable=True)
  server, _ = elastic.start_worker_server(cluster, timeouts.startup, resizable=True)
  return server


def _join(cluster, master, is_chief, sync_members=None):
  """A ps job: the chief logs who joins and leaves, a worker says it joined.

  A worker of a sync-replicas job tells the chief only before its first step
  (`_SyncMembers`): the chief's rounds count it from then on.

  Returns:
    The chief's running `elastic.MembershipLog`; None for a worker.
  """
  if is_chief:
    return elastic.MembershipLog(
        cluster, master, on_change=sync_members and sync_members.workers_changed).start()
  if sync_members is None:
    elastic.announce(cluster, elastic.JOINED)
  cluster_runtime.signal_training_done(master, cluster, timeout_secs=10,
                                       status=cluster_runtime.JOINED)
  return None


class _SyncMembers(object):
  """A sync-replicas ps job whose workers join and leave: what each task does about it.

  The chief's rounds take as many gradients as there are replicas
  (`sync_replicas.ReplicaResizer`), from the chief's count of workers
  (`elastic.MembershipLog`); a worker announces that it joined right before
  its first step, so that no round waits for it while it builds its graph.

  Args:
    cluster: this task's `ClusterConfig`.
    is_chief: whether this task is the chief.
    training_graph: the list that holds the `TrainingGraph` once built.
  """

  def __init__(self, cluster, is_chief, training_graph):
    self._cluster = cluster
    self._is_chief = is_chief
    self._training_graph = training_graph
    # The chief (or master) is a replica too: the training tasks beyond the workers.
    self._chiefs = cluster.num_worker_replicas - len(cluster.cluster.get('worker', []))
    # Only the chief sets the counts.
    self._resizer = sync_replicas.ReplicaResizer(cluster.num_worker_replicas) if (
        is_chief) else None
    self._announced = False

  def workers_changed(self, workers):
    """The chief's MembershipLog counted `workers` workers."""
    self._resizer.set_replicas(self._chiefs + workers)

  def on_new_session(self, sess):
    """Before the first step of each session."""
    if self._is_chief:
      self._resizer.attach(sess, self._training_graph[0].sync_optimizer)
    elif not self._announced:
      self._announced = elastic.announce(self._cluster, elastic.JOINED)


def _already_finished(num_steps):
  """Whether train_dir already holds the end of training (a task restarted after the job).

  Its peers have exited, so waiting for them would only end in a timeout.
  """
  step = checkpoints.finished_step(FLAGS.train_dir, num_steps)
  if step is None:
    return False
  logging.info('training already finished: %s holds a checkpoint at global step %d >= '
               'num_steps=%d; nothing to do', FLAGS.train_dir, step, num_steps)
  return True


def _train_until_done(train_once, cluster, faults, num_steps):
  """Runs `train_once()`; after a lost peer, waits for the ps tasks and runs it again.

  Each run after the first makes a new session on the same graph: the chief
  restores what the lost ps held, the workers wait for it. `faults.recovery` bounds the whole
  recovery (deploy_config.recovery_timeout_secs; past it, exit retryable).
  A lost ps with `num_steps` reached in train_dir is the end of the job.

  Returns:
    True when this task trained to its end, False when it found the job
    finished by the others after losing its ps.
  """
  while True:
    try:
      train_once()
      return True
    except fault_tolerance.PEER_ERRORS as e:
      if faults.recovery is None:
        raise
      if _already_finished(num_steps):  # The ps exited at the end of the job.
        return False
      faults.note_lost_peer(e, None)
      faults.recovery.wait_for_peers()
      logging.info('starting a new session on the training graph')


def main(argv):
  code = run(argv)
  if _left_the_job:
    fault_tolerance.exit_without_teardown(code)
  fault_tolerance.exit_process(code)


if __name__ == '__main__':
  define_flags()
  app.run(exit_codes.main_with_exit_codes(main, 'trainer.train'))
