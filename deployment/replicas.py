"""Replica types, restart policies and TF_CONFIG of a job, shared by launch.py and tfjob.py.

A distributed job is a few replica types (Kubeflow's TFJob calls them
`tfReplicaSpecs`), each with a number of identical tasks, a command and a
restart policy:

    from deployment import replicas

    specs = [
        replicas.ReplicaSpec('chief', 1, ['python', '-m', 'trainer.train', ...]),
        replicas.ReplicaSpec('worker', 2, [...], restart_policy='ExitCode'),
        replicas.ReplicaSpec('ps', 1, [...]),
    ]
    addresses = ports.loopback_addresses(replicas.num_cluster_tasks(specs))
    cluster = replicas.local_cluster(specs, iter(addresses))   # {'chief': ['127.0.0.1:4321'], ...}
    os.environ['TF_CONFIG'] = replicas.tf_config(cluster, 'worker', 1)

On a `netns.Network` with one host per task (`netns_hosts(specs)`),
`netns_cluster` gives each task its host's address instead. The commands of
a job run locally come from `local_command` (a manifest's `python` is this
interpreter) and `evaluator_command` (trainer.eval beside trainer.train).

`tf_config` writes what the Kubeflow training operator injects into a pod:
the cluster (every replica type, the evaluator included, as the operator has
done since its PR #1146), the task (type lowercased, index) and
`"environment": "cloud"`. `deployment/cluster.py` reads it; the training
tasks leave the evaluator's entry out of their ClusterSpec, so its address
(which nothing listens on) is never contacted.

Restart policies are TFJob's (`should_restart` decides one exit):

| policy    | a task that exits with code c is restarted when            |
| --------- | ---------------------------------------------------------- |
| Never     | never                                                      |
| OnFailure | c != 0                                                     |
| ExitCode  | c is retryable: 128-255 other than 143 (exit_codes.py)     |
| Always    | always (also after exit 0)                                 |
"""

import collections
import json
import os
import sys

from deployment import exit_codes

NEVER = 'Never'
ON_FAILURE = 'OnFailure'
EXIT_CODE = 'ExitCode'
ALWAYS = 'Always'
RESTART_POLICIES = (NEVER, ON_FAILURE, EXIT_CODE, ALWAYS)

# Start order of the replica types. Parameter servers go up before anyone who
# connects to them, and the evaluator, which only reads checkpoints, comes last.
REPLICA_TYPES = ('ps', 'chief', 'master', 'worker', 'evaluator')
# The types of the training cluster (the tasks that run a gRPC server).
CLUSTER_TYPES = ('chief', 'master', 'worker', 'ps')
# The types TF_CONFIG["cluster"] lists: the operator adds the evaluator too.
TF_CONFIG_TYPES = CLUSTER_TYPES + ('evaluator',)
# On a netns network every task has an address of its own: all use the TFJob port.
NETNS_PORT = 2222
_PYTHON_NAMES = ('python', 'python3')


class ReplicaSpec(collections.namedtuple(
    'ReplicaSpec', ['replica_type', 'replicas', 'command', 'env', 'restart_policy'])):
  """One replica type of a job.

  Fields:
    replica_type: 'chief', 'master', 'worker', 'ps' or 'evaluator'.
    replicas: number of tasks of this type.
    command: argv list every task of this type runs.
    env: dict of extra environment variables for these tasks.
    restart_policy: one of RESTART_POLICIES.
  """

  def __new__(cls, replica_type, replicas, command, env=None, restart_policy=EXIT_CODE):
    return super().__new__(cls, replica_type, replicas, list(command), dict(env or {}),
                           restart_policy)


def check_specs(specs, source='replica specs'):
  """Validates a job's replica specs.

  Args:
    specs: list of `ReplicaSpec`.
    source: what to name in errors (a flag, a manifest file).

  Raises:
    ValueError: naming the replica type and what is wrong.
  """
  seen = set()
  for spec in specs:
    where = '%s: replica type %r' % (source, spec.replica_type)
    if spec.replica_type not in REPLICA_TYPES:
      raise ValueError('%s is unknown; expected one of %s' % (where, ', '.join(REPLICA_TYPES)))
    if spec.replica_type in seen:
      raise ValueError('%s is given twice' % where)
    seen.add(spec.replica_type)
    if isinstance(spec.replicas, bool) or not isinstance(spec.replicas, int) or (
        spec.replicas < 0):
      raise ValueError('%s: replicas must be an integer >= 0, got %r' % (where, spec.replicas))
    if spec.replica_type in ('chief', 'master', 'evaluator') and spec.replicas > 1:
      raise ValueError('%s: replicas must be 0 or 1, got %d' % (where, spec.replicas))
    if spec.restart_policy not in RESTART_POLICIES:
      raise ValueError('%s: restart policy must be one of %s, got %r' % (
          where, ', '.join(RESTART_POLICIES), spec.restart_policy))
    if spec.replicas and not spec.command:
      raise ValueError('%s has no command to run' % where)
  counts = {spec.replica_type: spec.replicas for spec in specs}
  if counts.get('chief') and counts.get('master'):
    raise ValueError('%s: a job has a chief or a master, not both' % source)
  if not any(counts.get(t) for t in ('chief', 'master', 'worker')):
    raise ValueError('%s: a job needs at least one chief, master or worker task' % source)


def should_restart(restart_policy, exit_code):
  """Whether a task that exited with `exit_code` is restarted under `restart_policy`.

  Args:
    restart_policy: one of RESTART_POLICIES.
    exit_code: the exit code (subprocess's -N for signal N is accepted).

  Returns:
    A bool.
  """
  code = exit_codes.normalize(exit_code)
  if restart_policy == ALWAYS:
    return True
  if restart_policy == ON_FAILURE:
    return code != 0
  if restart_policy == EXIT_CODE:
    return exit_codes.is_retryable(code)
  return False


def success_task(specs):
  """(type, index) of the task whose exit 0 means the job succeeded.

  The chief (or master) when there is one, otherwise worker 0 -- the same
  task `ClusterConfig.is_chief` names.
  """
  counts = {spec.replica_type: spec.replicas for spec in specs}
  for replica_type in ('chief', 'master'):
    if counts.get(replica_type):
      return replica_type, 0
  return 'worker', 0


def local_cluster(specs, addresses):
  """The TF_CONFIG cluster of `specs` on the given addresses.

  Args:
    specs: list of `ReplicaSpec`.
    addresses: iterator of 'host:port' strings, one taken per cluster task
      (e.g. iter(ports.loopback_addresses(n))).

  Returns:
    dict {type: ['host:port', ...]} in TF_CONFIG_TYPES order, the evaluator
    included (the operator's shape).
  """
  counts = {spec.replica_type: spec.replicas for spec in specs}
  return {replica_type: [next(addresses) for _ in range(counts[replica_type])]
          for replica_type in TF_CONFIG_TYPES if counts.get(replica_type)}


def num_cluster_tasks(specs):
  """How many addresses TF_CONFIG["cluster"] of `specs` lists (every task)."""
  return sum(spec.replicas for spec in specs if spec.replica_type in TF_CONFIG_TYPES)


def tf_config(cluster, task_type, task_index):
  """The TF_CONFIG JSON of one task, shaped like the training operator's."""
  return json.dumps({'cluster': cluster,
                     'task': {'type': task_type.lower(), 'index': task_index},
                     'environment': 'cloud'}, sort_keys=True)


def netns_hosts(specs):
  """Host names of a `netns.Network` for `specs`: '<type><index>' per task."""
  return ['%s%d' % (spec.replica_type, i) for spec in specs for i in range(spec.replicas)]


def netns_cluster(network, specs, port=NETNS_PORT):
  """The TF_CONFIG cluster of `specs` at the addresses of `network`'s hosts.

  Args:
    network: a created `netns.Network` with the hosts of `netns_hosts(specs)`.
    specs: list of `replicas.ReplicaSpec`.
    port: the gRPC port of every task (each host has an address of its own).

  Returns:
    dict {type: ['10.213.X.Y:port', ...]}, the evaluator included.
  """
  counts = {spec.replica_type: spec.replicas for spec in specs}
  return {t: ['%s:%d' % (network.address('%s%d' % (t, i)), port) for i in range(counts[t])]
          for t in TF_CONFIG_TYPES if counts.get(t)}


def local_command(command):
  """`command` with a leading `python`/`python3` replaced by this interpreter."""
  command = list(command)
  if command and os.path.basename(command[0]) in _PYTHON_NAMES:
    command[0] = sys.executable
  return command


def _flag_value(args, name):
  """The value of `--name=V` or `--name V` in a program's arguments, or None."""
  for i, arg in enumerate(args):
    if arg.startswith('--%s=' % name):
      return arg.split('=', 1)[1]
    if arg == '--%s' % name and i + 1 < len(args):
      return args[i + 1]
  return None


def evaluator_command(module, program_args, evaluator_module=None):
  """The evaluator's command for a job whose tasks run `module program_args`.

  trainer.train's evaluator is trainer.eval on the same pipeline config,
  reading the checkpoints of --train_dir and writing to train_dir/eval; any
  other program (trainer.model_main) runs itself as the evaluator.

  Raises:
    ValueError: when trainer.train's flags lack --train_dir.
  """
  if module == 'trainer.train' and evaluator_module in (None, 'trainer.eval'):
    train_dir = _flag_value(program_args, 'train_dir')
    if not train_dir:
      raise ValueError('--evaluator with --module=trainer.train needs --train_dir in the '
                       'program flags after --')
    args = ['--checkpoint_dir=%s' % train_dir,
            '--eval_dir=%s' % os.path.join(train_dir, 'eval')]
    config = _flag_value(program_args, 'pipeline_config_path')
    if config:
      args.insert(0, '--pipeline_config_path=%s' % config)
    return [sys.executable, '-m', 'trainer.eval'] + args
  return [sys.executable, '-m', evaluator_module or module] + list(program_args)
