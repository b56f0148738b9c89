r"""Kubeflow TFJob manifests: write one for a pipeline config, read one to run it locally.

Write the job (a `kubeflow.org/v1` TFJob plus a NetworkPolicy, one YAML file):

    python -m deployment.tfjob --job_name=shapes --namespace=ml \
        --image=registry.example.com/slimtrain:0.1 \
        --pipeline_config_path=/app/configs/ssd_shapes.config \
        --train_dir=gs://bucket/shapes/train --workers=2 --ps=1 --gpus_per_worker=2 \
        --output=shapes.yaml -- --num_train_steps=2000
    kubectl apply -f shapes.yaml

Program flags after `--` go to every training task. Each replica type (Chief,
Worker, PS, Evaluator) runs one container named `tensorflow` (the container
the training operator injects TF_CONFIG into) with the gRPC port 2222 named
`tfjob-port`, `restartPolicy: ExitCode` (see deployment/exit_codes.py) and the
job's `runPolicy.backoffLimit`. GPUs per worker become the container's
`nvidia.com/gpu` limit and trainer.train's `--num_clones`. The Evaluator runs
trainer.eval on `--train_dir` (trainer.model_main runs its own evaluator
role). TF's gRPC servers accept any peer, so the NetworkPolicy admits the
port only from pods carrying the job's `training.kubeflow.org/job-name` label.

Read a manifest (what `python -m deployment.launch --tfjob=FILE` does):

    job = tfjob.read_tfjob('shapes.yaml')
    job.specs            # [replicas.ReplicaSpec('chief', 1, [...command + args], ...), ...]
    service_addresses(job)   # {'worker': ['shapes-worker-0.ml.svc:2222', ...], ...}

Differs on purpose: the writer's default backoffLimit is 6 where the operator
has none; the reader runs only `command` + `args` and `env` values of the
first container (image, resources, volumes and `valueFrom` env are ignored).
"""

import collections
import os
import re
import sys

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import yaml

from core import config_util
from core import paths
from deployment import replicas as replicas_lib

API_VERSION = 'kubeflow.org/v1'
CONTAINER_NAME = 'tensorflow'
PORT_NAME = 'tfjob-port'
DEFAULT_PORT = 2222
JOB_NAME_LABEL = 'training.kubeflow.org/job-name'
# TFJob's replica type names; TF_CONFIG uses them lowercased.
MANIFEST_TYPES = {'Chief': 'chief', 'Master': 'master', 'Worker': 'worker', 'PS': 'ps',
                  'Evaluator': 'evaluator'}
_DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_QUANTITY = re.compile(r'^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$')

_KIND_NAMES = {int: 'an integer', str: 'a string', list: 'a list', dict: 'a mapping'}

TFJob = collections.namedtuple('TFJob', ['name', 'namespace', 'specs', 'backoff_limit', 'port'])


# ----------------------------------------------------------------------------
# Reading.

def _fail(source, key, message, value):
  raise ValueError('%s: %s %s, got %r' % (source, key, message, value))


def _get(mapping, key, source, path, kind, default=None):
  """mapping[key] checked to be a `kind` (default when absent)."""
  value = mapping.get(key, default) if isinstance(mapping, dict) else None
  if value is None:
    return default
  if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
    _fail(source, path, 'must be %s' % _KIND_NAMES[kind], value)
  return value


def _container(template, source, path):
  """The container the operator gives TF_CONFIG to: 'tensorflow', else the first."""
  containers = _get(_get(template, 'spec', source, path + '.spec', dict, {}), 'containers',
                    source, path + '.spec.containers', list, [])
  if not containers or not all(isinstance(c, dict) for c in containers):
    _fail(source, path + '.spec.containers', 'must list at least one container', containers)
  for container in containers:
    if container.get('name') == CONTAINER_NAME:
      return container
  return containers[0]


def _container_env(container, source, path):
  """{name: value} of the container's env; `valueFrom` entries are skipped."""
  env = {}
  for i, item in enumerate(_get(container, 'env', source, path + '.env', list, [])):
    if not isinstance(item, dict) or not isinstance(item.get('name'), str):
      _fail(source, '%s.env[%d]' % (path, i), 'must be {name: ..., value: ...}', item)
    if 'valueFrom' in item:
      logging.warning('%s: %s.env[%d] (%s) uses valueFrom, which runs only on Kubernetes; '
                      'not set locally', source, path, i, item['name'])
      continue
    env[item['name']] = str(item.get('value', ''))
  return env


def _container_port(container, source, path):
  for item in _get(container, 'ports', source, path + '.ports', list, []):
    if isinstance(item, dict) and item.get('name') == PORT_NAME:
      port = item.get('containerPort')
      if not isinstance(port, int) or not 0 < port < 65536:
        _fail(source, path + '.ports.containerPort', 'must be a port number', port)
      return port
  return DEFAULT_PORT


def _replica_spec(manifest_type, body, source):
  """(ReplicaSpec, port) of spec.tfReplicaSpecs[manifest_type]."""
  path = 'spec.tfReplicaSpecs.%s' % manifest_type
  if manifest_type not in MANIFEST_TYPES:
    _fail(source, path, 'is not a TFJob replica type (%s)' % ', '.join(MANIFEST_TYPES),
          manifest_type)
  if not isinstance(body, dict):
    _fail(source, path, 'must be a mapping', body)
  replicas = _get(body, 'replicas', source, path + '.replicas', int, 1)
  policy = _get(body, 'restartPolicy', source, path + '.restartPolicy', str,
                replicas_lib.NEVER)  # the operator's default
  if policy not in replicas_lib.RESTART_POLICIES:
    _fail(source, path + '.restartPolicy', 'must be one of %s' % ', '.join(
        replicas_lib.RESTART_POLICIES), policy)
  container_path = path + '.template.spec.containers[%s]' % CONTAINER_NAME
  container = _container(_get(body, 'template', source, path + '.template', dict, {}),
                         source, path + '.template')
  command = (_get(container, 'command', source, container_path + '.command', list, []) +
             _get(container, 'args', source, container_path + '.args', list, []))
  if not command or not all(isinstance(a, (str, int, float)) for a in command):
    _fail(source, container_path + '.command', 'must list the program to run (the image\'s '
          'entrypoint is not known locally)', command)
  spec = replicas_lib.ReplicaSpec(
      MANIFEST_TYPES[manifest_type], replicas, [str(a) for a in command],
      _container_env(container, source, container_path), policy)
  return spec, _container_port(container, source, container_path)


def _backoff_limit(spec, source):
  """runPolicy.backoffLimit, else the older spec.backoffLimit, else None."""
  run_policy = _get(spec, 'runPolicy', source, 'spec.runPolicy', dict, {})
  limit = _get(run_policy, 'backoffLimit', source, 'spec.runPolicy.backoffLimit', int)
  if limit is None:
    limit = _get(spec, 'backoffLimit', source, 'spec.backoffLimit', int)
  if limit is not None and limit < 0:
    _fail(source, 'spec.runPolicy.backoffLimit', 'must be >= 0', limit)
  return limit


def parse_tfjob(manifest, source='<manifest>'):
  """A TFJob manifest (a parsed YAML mapping) as a `TFJob`.

  Raises:
    ValueError: naming `source` and the key that is missing or wrong.
  """
  if not isinstance(manifest, dict) or manifest.get('kind') != 'TFJob':
    _fail(source, 'kind', 'must be TFJob', manifest.get('kind') if isinstance(
        manifest, dict) else manifest)
  if manifest.get('apiVersion') != API_VERSION:
    _fail(source, 'apiVersion', 'must be %s' % API_VERSION, manifest.get('apiVersion'))
  metadata = _get(manifest, 'metadata', source, 'metadata', dict, {})
  name = _get(metadata, 'name', source, 'metadata.name', str)
  if not name:
    _fail(source, 'metadata.name', 'must be set', name)
  namespace = _get(metadata, 'namespace', source, 'metadata.namespace', str, 'default')
  spec = _get(manifest, 'spec', source, 'spec', dict, {})
  replica_specs = _get(spec, 'tfReplicaSpecs', source, 'spec.tfReplicaSpecs', dict, {})
  if not replica_specs:
    _fail(source, 'spec.tfReplicaSpecs', 'must describe at least one replica type',
          replica_specs)
  parsed = [_replica_spec(t, body, source) for t, body in replica_specs.items()]
  specs = [s for s, _ in parsed]
  replicas_lib.check_specs(specs, source='%s: spec.tfReplicaSpecs' % source)
  ports = {port for _, port in parsed}
  port = ports.pop() if len(ports) == 1 else DEFAULT_PORT
  return TFJob(name, namespace, specs, _backoff_limit(spec, source), port)


def read_tfjob(path):
  """Reads the one TFJob of a (multi-document) YAML file; other kinds are skipped.

  Raises:
    ValueError: when the file is missing or holds no, several or a bad TFJob.
  """
  if not tf.io.gfile.exists(path):
    raise ValueError('%s does not exist' % path)
  with tf.io.gfile.GFile(path, 'r') as f:
    try:
      documents = [d for d in yaml.safe_load_all(f.read()) if d is not None]
    except yaml.YAMLError as e:
      raise ValueError('%s is not valid YAML: %s' % (path, e)) from None
  jobs = [d for d in documents if isinstance(d, dict) and d.get('kind') == 'TFJob']
  if len(jobs) != 1:
    raise ValueError('%s must hold exactly one document of kind TFJob, found %d' % (
        path, len(jobs)))
  return parse_tfjob(jobs[0], source=path)


def service_addresses(job):
  """{type: ['<job>-<type>-<i>.<namespace>.svc:<port>', ...]}, the operator's cluster."""
  return {spec.replica_type: ['%s-%s-%d.%s.svc:%d' % (
      job.name, spec.replica_type, i, job.namespace, job.port) for i in range(spec.replicas)]
          for spec in job.specs
          if spec.replicas and spec.replica_type in replicas_lib.CLUSTER_TYPES}


# ----------------------------------------------------------------------------
# Writing.

PROGRAMS = ('trainer.train', 'trainer.model_main')
# The flag each program takes its output directory from.
OUTPUT_DIR_FLAG = {'trainer.train': 'train_dir', 'trainer.model_main': 'model_dir'}

JobOptions = collections.namedtuple('JobOptions', [
    'job_name', 'namespace', 'image', 'pipeline_config_path', 'output_dir', 'program',
    'chief', 'workers', 'ps', 'evaluator', 'gpus_per_worker', 'cpu', 'memory', 'port',
    'backoff_limit', 'restart_policy', 'env', 'program_args', 'python'])


def job_options(job_name, image, pipeline_config_path, output_dir, **kwargs):
  """`JobOptions` with defaults: trainer.train, chief + 1 worker + 1 ps + evaluator."""
  defaults = dict(namespace='default', program='trainer.train', chief=True, workers=1, ps=1,
                  evaluator=True, gpus_per_worker=0, cpu=None, memory=None,
                  port=DEFAULT_PORT, backoff_limit=6, restart_policy=replicas_lib.EXIT_CODE,
                  env=None, program_args=(), python='python')
  defaults.update(kwargs)
  return JobOptions(job_name=job_name, image=image, pipeline_config_path=pipeline_config_path,
                    output_dir=output_dir, **defaults)


def _check_options(options):
  """Raises ValueError naming the flag of a bad option."""
  if not _DNS_LABEL.match(options.job_name or '') or len(options.job_name) > 63:
    _fail('--job_name', 'value', 'must be a DNS label (lowercase letters, digits, "-", '
          'at most 63 characters)', options.job_name)
  if not _DNS_LABEL.match(options.namespace or ''):
    _fail('--namespace', 'value', 'must be a DNS label', options.namespace)
  for flag in ('image', 'pipeline_config_path'):
    if not getattr(options, flag):
      _fail('--%s' % flag, 'value', 'is required', getattr(options, flag))
  if options.program not in PROGRAMS:
    _fail('--program', 'value', 'must be one of %s' % ', '.join(PROGRAMS), options.program)
  if not options.output_dir:
    _fail('--%s' % OUTPUT_DIR_FLAG[options.program], 'value',
          'is required with --program=%s' % options.program, options.output_dir)
  for flag in ('workers', 'ps', 'gpus_per_worker', 'backoff_limit'):
    if getattr(options, flag) < 0:
      _fail('--%s' % flag, 'value', 'must be >= 0', getattr(options, flag))
  if not options.chief and not options.workers:
    _fail('--workers', 'value', 'must be >= 1 with --nochief', options.workers)
  for flag in ('cpu', 'memory'):
    value = getattr(options, flag)
    if value and not _QUANTITY.match(value):
      _fail('--%s' % flag, 'value', 'must be a Kubernetes quantity like 4, 500m or 16Gi',
            value)
  if not 0 < options.port < 65536:
    _fail('--port', 'value', 'must be 1..65535', options.port)
  if options.restart_policy not in replicas_lib.RESTART_POLICIES:
    _fail('--restart_policy', 'value', 'must be one of %s' % ', '.join(
        replicas_lib.RESTART_POLICIES), options.restart_policy)


def _program_args(options, gpus):
  """Arguments of a training (or ps) task."""
  args = ['--pipeline_config_path=%s' % options.pipeline_config_path,
          '--%s=%s' % (OUTPUT_DIR_FLAG[options.program], options.output_dir)]
  if options.program == 'trainer.train' and gpus:
    args.append('--num_clones=%d' % gpus)
  return args + ['--alsologtostderr'] + list(options.program_args)


def _evaluator_command(options):
  """(command, args) of the evaluator."""
  if options.program == 'trainer.train':
    return ([options.python, '-m', 'trainer.eval'],
            ['--pipeline_config_path=%s' % options.pipeline_config_path,
             '--checkpoint_dir=%s' % options.output_dir,
             '--eval_dir=%s' % options.output_dir.rstrip('/') + '/eval', '--alsologtostderr'])
  # model_main's evaluator task (TF_CONFIG type "evaluator") runs continuous evaluation.
  return [options.python, '-m', options.program], _program_args(options, 0)


def _container_spec(options, command, args, gpus):
  container = {'name': CONTAINER_NAME, 'image': options.image, 'command': command,
               'args': args,
               'ports': [{'name': PORT_NAME, 'containerPort': options.port}]}
  if options.env:
    container['env'] = [{'name': k, 'value': v} for k, v in sorted(options.env.items())]
  requests = {k: getattr(options, k) for k in ('cpu', 'memory') if getattr(options, k)}
  resources = {}
  if requests:
    resources['requests'] = requests
  if gpus:
    resources['limits'] = {'nvidia.com/gpu': gpus}
  if resources:
    container['resources'] = resources
  return container


def _replica(options, replicas, command, args, gpus=0):
  return {'replicas': replicas, 'restartPolicy': options.restart_policy,
          'template': {'spec': {'containers': [
              _container_spec(options, command, args, gpus)]}}}


def tfjob_manifest(options):
  """The TFJob of `options` (a `JobOptions`) as a dict ready for YAML.

  Raises:
    ValueError: naming the flag of a bad option.
  """
  _check_options(options)
  command = [options.python, '-m', options.program]
  gpus = options.gpus_per_worker
  replica_specs = {}
  if options.chief:
    replica_specs['Chief'] = _replica(options, 1, command, _program_args(options, gpus), gpus)
  if options.workers:
    replica_specs['Worker'] = _replica(options, options.workers, command,
                                       _program_args(options, gpus), gpus)
  if options.ps:
    replica_specs['PS'] = _replica(options, options.ps, command, _program_args(options, 0))
  if options.evaluator:
    replica_specs['Evaluator'] = _replica(options, 1, *_evaluator_command(options))
  return {'apiVersion': API_VERSION, 'kind': 'TFJob',
          'metadata': {'name': options.job_name, 'namespace': options.namespace},
          'spec': {'runPolicy': {'backoffLimit': options.backoff_limit,
                                 'cleanPodPolicy': 'Running'},
                   'tfReplicaSpecs': replica_specs}}


def network_policy(options):
  """A NetworkPolicy: the job's pods accept the gRPC port only from pods of the job."""
  same_job = {'matchLabels': {JOB_NAME_LABEL: options.job_name}}
  return {'apiVersion': 'networking.k8s.io/v1', 'kind': 'NetworkPolicy',
          'metadata': {'name': '%s-grpc' % options.job_name, 'namespace': options.namespace},
          'spec': {'podSelector': same_job, 'policyTypes': ['Ingress'],
                   'ingress': [{'from': [{'podSelector': same_job}],
                                'ports': [{'protocol': 'TCP', 'port': options.port}]}]}}


class _PlainDumper(yaml.SafeDumper):
  """Writes repeated values out in full: no `&id001` anchors for people to decode."""

  def ignore_aliases(self, data):
    return True


def manifest_text(options):
  """The whole file: the TFJob, then the NetworkPolicy, as multi-document YAML."""
  header = '# Written by python -m deployment.tfjob; submit with kubectl apply -f <file>.\n'
  return header + yaml.dump_all([tfjob_manifest(options), network_policy(options)],
                                Dumper=_PlainDumper, sort_keys=False,
                                default_flow_style=False)


def write_manifest(options, path):
  """Writes `manifest_text(options)` to `path` atomically; returns `path`."""
  return paths.write_file_atomically(path, manifest_text(options))


# ----------------------------------------------------------------------------
# Command line.

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module is the program."""
  flags.DEFINE_string('job_name', None, 'TFJob name (a DNS label, e.g. shapes-ssd).')
  flags.DEFINE_string('namespace', 'default', 'Kubernetes namespace of the job.')
  flags.DEFINE_string('image', None, 'Container image with slimtrain installed.')
  flags.DEFINE_string('pipeline_config_path', None, 'Pipeline config path as the '
                      'containers see it (in the image or on remote storage).')
  flags.DEFINE_enum('program', 'trainer.train', list(PROGRAMS), 'What the tasks run.')
  flags.DEFINE_string('train_dir', None, 'Checkpoint directory for trainer.train '
                      '(gs:// and other remote paths work).')
  flags.DEFINE_string('model_dir', None, 'Model directory for trainer.model_main.')
  flags.DEFINE_boolean('chief', True, 'Add a Chief replica (otherwise worker 0 is chief).')
  flags.DEFINE_integer('workers', 1, 'Worker replicas.')
  flags.DEFINE_integer('ps', 1, 'PS replicas.')
  flags.DEFINE_boolean('evaluator', True, 'Add an Evaluator replica.')
  flags.DEFINE_integer('gpus_per_worker', 0, 'GPUs of each chief/worker pod '
                       '(nvidia.com/gpu limit; trainer.train gets --num_clones=N).')
  flags.DEFINE_string('cpu', None, 'CPU request of every pod, e.g. 4 or 500m.')
  flags.DEFINE_string('memory', None, 'Memory request of every pod, e.g. 16Gi.')
  flags.DEFINE_integer('port', DEFAULT_PORT, 'gRPC port of every task (named tfjob-port).')
  flags.DEFINE_integer('backoff_limit', 6, 'Pod restarts allowed across the job '
                       '(spec.runPolicy.backoffLimit).')
  flags.DEFINE_string('restart_policy', replicas_lib.EXIT_CODE, 'restartPolicy of every '
                      'replica: %s.' % ', '.join(replicas_lib.RESTART_POLICIES))
  flags.DEFINE_list('env', [], 'NAME=VALUE environment variables of every container, e.g. '
                    'GOOGLE_APPLICATION_CREDENTIALS=/secrets/gcs/key.json.')
  flags.DEFINE_string('python', 'python', 'Python interpreter inside the image.')
  flags.DEFINE_string('output', '-', 'Where to write the YAML ("-": standard output).')


def _env_flag(items):
  env = {}
  for item in items:
    name, sep, value = item.partition('=')
    if not sep or not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', name):
      raise app.UsageError('--env: %r is not NAME=VALUE' % item)
    env[name] = value
  return env


def options_from_flags(program_args):
  """`JobOptions` from the flags; raises app.UsageError naming a bad flag."""
  unused = 'model_dir' if FLAGS.program == 'trainer.train' else 'train_dir'
  if FLAGS[unused].value:
    raise app.UsageError('--%s is not used by --program=%s; give --%s' % (
        unused, FLAGS.program, OUTPUT_DIR_FLAG[FLAGS.program]))
  options = job_options(
      FLAGS.job_name, FLAGS.image, FLAGS.pipeline_config_path,
      FLAGS[OUTPUT_DIR_FLAG[FLAGS.program]].value, namespace=FLAGS.namespace,
      program=FLAGS.program, chief=FLAGS.chief, workers=FLAGS.workers, ps=FLAGS.ps,
      evaluator=FLAGS.evaluator, gpus_per_worker=FLAGS.gpus_per_worker, cpu=FLAGS.cpu,
      memory=FLAGS.memory, port=FLAGS.port, backoff_limit=FLAGS.backoff_limit,
      restart_policy=FLAGS.restart_policy, env=_env_flag(FLAGS.env),
      program_args=list(program_args), python=FLAGS.python)
  try:
    _check_options(options)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  return options


def main(argv):
  options = options_from_flags(argv[1:])
  if os.path.exists(options.pipeline_config_path):
    # Present here too (e.g. configs/ in this checkout): catch config errors before submitting.
    config_util.get_configs_from_pipeline_file(options.pipeline_config_path)
  if FLAGS.output == '-':
    sys.stdout.write(manifest_text(options))
  else:
    write_manifest(options, FLAGS.output)
    logging.info('Wrote TFJob %s/%s to %s', options.namespace, options.job_name, FLAGS.output)


if __name__ == '__main__':
  define_flags()
  app.run(main)
