r"""Kubernetes manifests of a training job: write a TFJob or a JobSet, read a TFJob back.

Write the job (one YAML file: the job, then a NetworkPolicy):

    python -m deployment.tfjob --kind=jobset --job_name=shapes --namespace=ml \
        --image=registry.example.com/slimtrain:0.1 \
        --pipeline_config_path=/app/configs/ssd_shapes.config \
        --train_dir=gs://bucket/shapes/train --workers=2 --ps=1 --gpus_per_worker=2 \
        --output=shapes.yaml -- --num_train_steps=2000
    kubectl apply -f shapes.yaml

`--kind=tfjob` (the default) writes a `kubeflow.org/v1` TFJob for the
Kubeflow training operator (Trainer v1, no longer maintained); `--kind=jobset`
a `jobset.x-k8s.io/v1alpha2` JobSet (deployment/jobset.py), which needs only
the JobSet controller. Both carry the same pods (deployment/k8s_pods.py):
program flags after `--` go to every training task; each role runs one
container named `tensorflow` with the gRPC port 2222 named `tfjob-port`, a
restricted security context, the config's termination grace plus a margin,
the shared volume (`--pvc`, `--mount_path`) and the scheduling flags. GPUs
per worker become the `nvidia.com/gpu` limit of chief and workers and
trainer.train's `--num_clones=N --noclone_on_cpu`. The evaluator runs
trainer.eval on `--train_dir` (trainer.model_main runs its own evaluator
role). TF's gRPC servers accept any peer, so the NetworkPolicy admits the
port only from pods of the same job. From Python, `manifests(options, kind)`
gives the documents as dicts.

Read a TFJob (what `python -m deployment.launch --tfjob=FILE` does):

    job = tfjob.read_tfjob('shapes.yaml')
    job.specs            # [replicas.ReplicaSpec('chief', 1, [...command + args], ...), ...]
    service_addresses(job)   # {'worker': ['shapes-worker-0.ml.svc:2222', ...], ...}

Differs on purpose: the writer's default backoffLimit is 6 where the operator
has none; the reader runs only `command` + `args` and `env` values of the
first container (image, resources, volumes and `valueFrom` env are ignored).
"""

import collections
import json
import os
import sys

from absl import app
from absl import flags
from core import logs as logging
import tensorflow as tf
import yaml

from core import config_util
from core import paths
from deployment import k8s_flags
from deployment import k8s_pods
from deployment import k8s_sizes
from deployment import replicas as replicas_lib

API_VERSION = 'kubeflow.org/v1'
CONTAINER_NAME = k8s_pods.CONTAINER_NAME
PORT_NAME = k8s_pods.PORT_NAME
DEFAULT_PORT = k8s_pods.DEFAULT_PORT
JOB_NAME_LABEL = 'training.kubeflow.org/job-name'
# Labels of the TFJob's evaluator Job, by which the reader finds it.
PART_OF_LABEL = 'app.kubernetes.io/part-of'
COMPONENT_LABEL = 'app.kubernetes.io/component'
KUEUE_QUEUE_LABEL = 'kueue.x-k8s.io/queue-name'
# TFJob's replica type names; TF_CONFIG uses them lowercased.
MANIFEST_TYPES = {'Chief': 'chief', 'Master': 'master', 'Worker': 'worker', 'PS': 'ps',
                  'Evaluator': 'evaluator'}

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


def manifest_header(manifest, kind, api_version, source):
  """(name, namespace, spec) of a parsed manifest that must be of `kind` and `api_version`.

  Raises:
    ValueError: naming `source` and the key that is missing or wrong.
  """
  if not isinstance(manifest, dict) or manifest.get('kind') != kind:
    _fail(source, 'kind', 'must be %s' % kind, manifest.get('kind') if isinstance(
        manifest, dict) else manifest)
  if manifest.get('apiVersion') != api_version:
    _fail(source, 'apiVersion', 'must be %s' % api_version, manifest.get('apiVersion'))
  metadata = _get(manifest, 'metadata', source, 'metadata', dict, {})
  name = _get(metadata, 'name', source, 'metadata.name', str)
  if not name:
    _fail(source, 'metadata.name', 'must be set', name)
  namespace = _get(metadata, 'namespace', source, 'metadata.namespace', str, 'default')
  return name, namespace, _get(manifest, 'spec', source, 'spec', dict, {})


def parse_tfjob(manifest, source='<manifest>'):
  """A TFJob manifest (a parsed YAML mapping) as a `TFJob`.

  Raises:
    ValueError: naming `source` and the key that is missing or wrong.
  """
  name, namespace, spec = manifest_header(manifest, 'TFJob', API_VERSION, source)
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


def read_one_of_kind(path, kind):
  """The one document of `kind` ('TFJob', 'JobSet') in a multi-document YAML file.

  Documents of other kinds (the NetworkPolicy the writer adds) are skipped.

  Raises:
    ValueError: when the file is missing, is not YAML, or holds no or several of `kind`.
  """
  if not tf.io.gfile.exists(path):
    raise ValueError('%s does not exist' % path)
  with tf.io.gfile.GFile(path, 'r') as f:
    try:
      documents = [d for d in yaml.safe_load_all(f.read()) if d is not None]
    except yaml.YAMLError as e:
      raise ValueError('%s is not valid YAML: %s' % (path, e)) from None
  jobs = [d for d in documents if isinstance(d, dict) and d.get('kind') == kind]
  if len(jobs) != 1:
    raise ValueError('%s must hold exactly one document of kind %s, found %d' % (
        path, kind, len(jobs)))
  return jobs[0]


def _evaluator_spec(document, source):
  """The ReplicaSpec of a TFJob's evaluator Job (`evaluator_job`)."""
  from deployment import jobset  # pylint: disable=import-outside-toplevel
  path = 'Job %s' % document.get('metadata', {}).get('name')
  job_spec = _get(document, 'spec', source, path + '.spec', dict, {})
  template = _get(job_spec, 'template', source, path + '.spec.template', dict, {})
  container = _container(template, source, path + '.spec.template')
  container_path = path + '.spec.template.spec.containers[%s]' % container.get('name')
  command = (_get(container, 'command', source, container_path + '.command', list, []) +
             _get(container, 'args', source, container_path + '.args', list, []))
  if not command or not all(isinstance(a, (str, int, float)) for a in command):
    _fail(source, container_path + '.command', 'must list the program to run', command)
  env = _container_env(container, source, container_path)
  env.pop('TF_CONFIG', None)  # the launcher gives every task its own
  policy = jobset._local_restart_policy(  # pylint: disable=protected-access
      job_spec, _get(template, 'spec', source, path + '.spec.template.spec', dict, {}),
      source, path + '.spec')
  return replicas_lib.ReplicaSpec('evaluator', 1, [str(a) for a in command], env, policy)


def read_tfjob(path):
  """Reads the one TFJob of a (multi-document) YAML file, with its evaluator Job if any.

  The evaluator is the batch/v1 Job labelled part of the TFJob with
  component evaluator (what the writer makes); other documents are skipped.

  Raises:
    ValueError: when the file is missing or holds no, several or a bad TFJob.
  """
  job = parse_tfjob(read_one_of_kind(path, 'TFJob'), source=path)
  with tf.io.gfile.GFile(path, 'r') as f:
    documents = [d for d in yaml.safe_load_all(f.read()) if isinstance(d, dict)]
  evaluators = [d for d in documents if d.get('kind') == 'Job' and (
      d.get('metadata') or {}).get('labels', {}).get(PART_OF_LABEL) == job.name and (
          d.get('metadata') or {}).get('labels', {}).get(COMPONENT_LABEL) == 'evaluator']
  if evaluators:
    if any(s.replica_type == 'evaluator' for s in job.specs) or len(evaluators) > 1:
      _fail(path, 'Job %s-evaluator' % job.name, 'must be the only evaluator of TFJob %s'
            % job.name, len(evaluators))
    specs = job.specs + [_evaluator_spec(evaluators[0], path)]
    replicas_lib.check_specs(specs, source='%s: spec.tfReplicaSpecs' % path)
    job = job._replace(specs=specs)
  return job


def service_addresses(job):
  """{type: ['<job>-<type>-<i>.<namespace>.svc:<port>', ...]}, the operator's cluster.

  The evaluator included: the operator creates its service and lists it in
  every pod's TF_CONFIG.
  """
  return {spec.replica_type: ['%s-%s-%d.%s.svc:%d' % (
      job.name, spec.replica_type, i, job.namespace, job.port) for i in range(spec.replicas)]
          for spec in job.specs
          if spec.replicas and spec.replica_type in replicas_lib.TF_CONFIG_TYPES}


# ----------------------------------------------------------------------------
# Writing (the pods themselves come from k8s_pods, shared with jobset.py).

PROGRAMS = k8s_pods.PROGRAMS
OUTPUT_DIR_FLAG = k8s_pods.OUTPUT_DIR_FLAG
JobOptions = k8s_pods.JobOptions
job_options = k8s_pods.job_options
# The TFJob replica type of each role.
_MANIFEST_TYPE = {'chief': 'Chief', 'worker': 'Worker', 'ps': 'PS', 'evaluator': 'Evaluator'}


def _replica_roles(options):
  """The roles that are TFJob replicas: all but the evaluator, which is a Job of its own."""
  return [role for role in k8s_pods.roles(options) if role.name != 'evaluator']


def _run_policy(options):
  policy = {'backoffLimit': options.backoff_limit, 'cleanPodPolicy': 'Running'}
  if options.active_deadline_secs:
    policy['activeDeadlineSeconds'] = options.active_deadline_secs
  if options.ttl_secs_after_finished is not None:
    policy['ttlSecondsAfterFinished'] = options.ttl_secs_after_finished
  if options.gang_scheduling:
    # The operator makes a PodGroup of this for the gang scheduler (volcano,
    # scheduler-plugins): no pod starts before all of them can.
    scheduling = {'minAvailable': sum(r.replicas for r in _replica_roles(options))}
    if options.priority_class:
      scheduling['priorityClass'] = options.priority_class
    policy['schedulingPolicy'] = scheduling
  return policy


def tfjob_manifest(options):
  """The TFJob of `options` (a `JobOptions`) as a dict ready for YAML.

  Raises:
    ValueError: naming the flag of a bad option.
  """
  k8s_pods.check_options(options, 'tfjob')
  replica_specs = {}
  for role in _replica_roles(options):
    replica_specs[_MANIFEST_TYPE[role.name]] = {
        'replicas': role.replicas, 'restartPolicy': options.restart_policy,
        'template': {'spec': k8s_pods.pod_spec(options, role)}}
  metadata = {'name': options.job_name, 'namespace': options.namespace}
  if options.kueue_queue:
    metadata['labels'] = {KUEUE_QUEUE_LABEL: options.kueue_queue}
  return {'apiVersion': API_VERSION, 'kind': 'TFJob', 'metadata': metadata,
          'spec': {'runPolicy': _run_policy(options), 'tfReplicaSpecs': replica_specs}}


def evaluator_job(options):
  """The TFJob's evaluator: a batch/v1 Job beside it, so it outlives and never fails it.

  As a TFJob replica the evaluator would be deleted the moment the chief
  succeeds (cleanPodPolicy) and its exit 1 would fail the training. As a Job
  of its own it follows training to the last checkpoint (it gets
  --num_train_steps), evaluates it and completes, whenever the TFJob ends;
  its failures count against its own backoffLimit only. model_main's
  evaluator gets the TF_CONFIG of an evaluator outside the cluster.
  """
  role = [r for r in k8s_pods.roles(options) if r.name == 'evaluator'][0]
  env = []
  if options.program == 'trainer.model_main':
    env = [{'name': 'TF_CONFIG', 'value': json.dumps(
        {'cluster': {}, 'environment': 'cloud', 'task': {'index': 0, 'type': 'evaluator'}},
        sort_keys=True)}]
  policy = options.restart_policy
  pod_restart = 'Never' if policy in (replicas_lib.EXIT_CODE, replicas_lib.NEVER) else (
      replicas_lib.ON_FAILURE)
  pod = k8s_pods.pod_spec(options, role, env, restart_policy=pod_restart)
  pod['containers'][0].pop('ports')  # it serves nothing; nothing connects to it
  spec = {'backoffLimit': 0 if policy == replicas_lib.NEVER else options.backoff_limit}
  if options.active_deadline_secs:
    spec['activeDeadlineSeconds'] = options.active_deadline_secs
  if options.ttl_secs_after_finished is not None:
    spec['ttlSecondsAfterFinished'] = options.ttl_secs_after_finished
  if policy == replicas_lib.EXIT_CODE:
    from deployment import jobset  # pylint: disable=import-outside-toplevel
    spec['podFailurePolicy'] = jobset.pod_failure_policy(permanent_fails_job=False)
  spec['template'] = {'spec': pod}
  labels = {PART_OF_LABEL: options.job_name, COMPONENT_LABEL: 'evaluator'}
  if options.kueue_queue:
    labels[KUEUE_QUEUE_LABEL] = options.kueue_queue
  return {'apiVersion': 'batch/v1', 'kind': 'Job',
          'metadata': {'name': '%s-evaluator' % options.job_name,
                       'namespace': options.namespace, 'labels': labels},
          'spec': spec}


def network_policy(options):
  """The TFJob's NetworkPolicy: its pods accept the gRPC port only from pods of the job."""
  return k8s_pods.network_policy(options, JOB_NAME_LABEL)


def manifests(options, kind='tfjob'):
  """Every object of the job, as dicts ready for YAML, in the order to create them.

  The NetworkPolicy comes first, so no pod of the job runs a moment without
  it; then the TFJob or JobSet; then, for a TFJob with an evaluator, the
  evaluator's Job (`evaluator_job`).

  Args:
    options: `JobOptions`.
    kind: 'tfjob' (a kubeflow.org/v1 TFJob) or 'jobset' (a jobset.x-k8s.io/v1alpha2 JobSet).

  Raises:
    ValueError: naming the flag of a bad option.
  """
  from deployment import jobset  # pylint: disable=import-outside-toplevel
  if kind == 'jobset':
    return [jobset.network_policy(options), jobset.jobset_manifest(options)]
  if kind != 'tfjob':
    k8s_pods.fail('kind', 'must be one of %s' % ', '.join(k8s_pods.KINDS), kind)
  documents = [network_policy(options), tfjob_manifest(options)]
  if options.evaluator:
    documents.append(evaluator_job(options))
  return documents


class _PlainDumper(yaml.SafeDumper):
  """Writes repeated values out in full: no `&id001` anchors for people to decode."""

  def ignore_aliases(self, data):
    return True


def _represent_list(dumper, data):
  # A long list of numbers (a podFailurePolicy's exit codes) on a few lines, not one each.
  flow = len(data) > 8 and all(type(item) is int for item in data)  # pylint: disable=unidiomatic-typecheck
  return dumper.represent_sequence('tag:yaml.org,2002:seq', data, flow_style=flow)


_PlainDumper.add_representer(list, _represent_list)


def manifest_text(options, kind='tfjob'):
  """The whole file: `manifests(options, kind)` as multi-document YAML."""
  header = '# Written by python -m deployment.tfjob; submit with kubectl apply -f <file>.\n'
  return header + yaml.dump_all(manifests(options, kind), Dumper=_PlainDumper,
                                sort_keys=False, default_flow_style=False)


def write_manifest(options, path, kind='tfjob'):
  """Writes `manifest_text(options, kind)` to `path` atomically; returns `path`."""
  return paths.write_file_atomically(path, manifest_text(options, kind))


# ----------------------------------------------------------------------------
# Command line.

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module is the program."""
  flags.DEFINE_enum('kind', 'tfjob', list(k8s_pods.KINDS), 'What to write: a Kubeflow TFJob '
                    '(needs the unmaintained training operator) or a JobSet (needs the JobSet '
                    'controller).')
  flags.DEFINE_string('job_name', None, 'Job name (a DNS-1035 label, e.g. shapes-ssd).')
  flags.DEFINE_string('namespace', 'default', 'Kubernetes namespace of the job.')
  flags.DEFINE_string('image', None, 'Container image with slimtrain installed.')
  flags.DEFINE_string('pipeline_config_path', None, 'Pipeline config path as the '
                      'containers see it (in the image or on remote storage).')
  flags.DEFINE_enum('program', 'trainer.train', list(PROGRAMS), 'What the tasks run.')
  flags.DEFINE_string('train_dir', None, 'Checkpoint directory for trainer.train: a remote '
                      'URL (gs://, s3://) or a path under --mount_path with --pvc.')
  flags.DEFINE_string('model_dir', None, 'Model directory for trainer.model_main (as '
                      '--train_dir).')
  flags.DEFINE_string('pvc', None, 'A ReadWriteMany PersistentVolumeClaim every pod mounts '
                      'at --mount_path (needed for a local --train_dir/--model_dir).')
  flags.DEFINE_string('mount_path', k8s_pods.DEFAULT_MOUNT_PATH, 'Where --pvc is mounted.')
  flags.DEFINE_boolean('chief', True, 'Add a chief (otherwise worker 0 is chief).')
  flags.DEFINE_integer('workers', 1, 'Worker replicas.')
  flags.DEFINE_integer('ps', 1, 'PS replicas (>= 1 with more than one training task).')
  flags.DEFINE_boolean('evaluator', True, 'Add an evaluator.')
  flags.DEFINE_integer('gpus_per_worker', 0, 'GPUs of each chief/worker pod '
                       '(nvidia.com/gpu limit; trainer.train gets --num_clones=N '
                       '--noclone_on_cpu).')
  flags.DEFINE_string('cpu', None, 'CPU request of each chief/worker pod, e.g. 4 or 500m '
                      '(default %s).' % k8s_pods.DEFAULT_RESOURCES['training']['cpu'])
  flags.DEFINE_string('memory', None, 'Memory request (and limit) of each chief/worker pod, '
                      'e.g. 16Gi (default %s).' % k8s_pods.DEFAULT_RESOURCES['training'][
                          'memory'])
  flags.DEFINE_string('memory_limit', None, 'Memory limit of each chief/worker pod when it '
                      'is to exceed --memory.')
  flags.DEFINE_multi_string('resources', [], 'Requests of the ps or evaluator pods, '
                            'ROLE:KEY=VALUE[,KEY=VALUE] with KEY cpu, memory, memory_limit '
                            'or gpu (evaluator), e.g. ps:cpu=2,memory=8Gi; repeatable. '
                            'Defaults: ps cpu=%s and memory from the model\'s variables '
                            '(%s when the config is not readable here), evaluator cpu=%s, '
                            'memory=%s.' % (
                                k8s_pods.DEFAULT_RESOURCES['ps']['cpu'],
                                k8s_pods.DEFAULT_RESOURCES['ps']['memory'],
                                k8s_pods.DEFAULT_RESOURCES['evaluator']['cpu'],
                                k8s_pods.DEFAULT_RESOURCES['evaluator']['memory']))
  flags.DEFINE_integer('port', k8s_pods.DEFAULT_PORT, 'gRPC port of every task (named '
                       'tfjob-port).')
  flags.DEFINE_integer('backoff_limit', 6, 'Pod restarts allowed (TFJob: '
                       'spec.runPolicy.backoffLimit; JobSet: each Job\'s backoffLimit).')
  flags.DEFINE_integer('max_restarts', 3, 'JobSet only: whole-job restarts after a Job '
                       'failed with retryable codes (failurePolicy.maxRestarts).')
  flags.DEFINE_string('restart_policy', replicas_lib.EXIT_CODE, 'restartPolicy of every '
                      'replica: %s (JobSet: ExitCode, OnFailure or Never).' % ', '.join(
                          replicas_lib.RESTART_POLICIES))
  flags.DEFINE_multi_string('env', [], 'NAME=VALUE environment variable of every container '
                            '(repeatable; the first "=" splits, commas are kept), e.g. '
                            'GOOGLE_APPLICATION_CREDENTIALS=/secrets/gcs/key.json.')
  flags.DEFINE_integer('termination_grace_secs', None, 'The tasks\' own grace after SIGTERM '
                       '(default: deploy_config.termination_grace_secs of the config when it '
                       'is readable here, else %d); pods get %d s more.' % (
                           k8s_pods.DEFAULT_TERMINATION_GRACE_SECS,
                           k8s_pods.TERMINATION_MARGIN_SECS))
  flags.DEFINE_integer('run_as_user', k8s_pods.DEFAULT_RUN_AS_USER, 'Non-root user (and '
                       'group) id the containers run as; on a volume whose driver ignores '
                       'fsGroup, the uid that owns the train directory.')
  flags.DEFINE_integer('fs_group', None, 'Group id of the pods\' volumes (fsGroup, with '
                       'fsGroupChangePolicy OnRootMismatch; default: --run_as_user).')
  flags.DEFINE_string('service_account', None, 'ServiceAccount of the pods, for bucket '
                      'access by Workload Identity (GKE) or IRSA (EKS).')
  flags.DEFINE_list('extra_filesystems', [], 'URL schemes the image\'s programs can open '
                    'beyond gs:// (e.g. s3 when tensorflow_io is imported at start).')
  flags.DEFINE_integer('num_train_steps', None, 'Steps the job trains: the evaluator stops '
                       'after evaluating that step\'s checkpoint (default: '
                       'train_config.num_steps when the config is readable here, or '
                       '--num_train_steps after "--"; 0: no end).')
  flags.DEFINE_enum('evaluator_restart', 'alone', list(k8s_pods.EVALUATOR_RESTARTS),
                    'JobSet: when the evaluator\'s Job fails, recreate it alone (JobSet '
                    '>= v0.12) or the whole JobSet (older controllers).')
  flags.DEFINE_integer('active_deadline_secs', k8s_pods.DEFAULT_ACTIVE_DEADLINE_SECS,
                       'Fail the job after this many seconds, 0 for never (TFJob: '
                       'runPolicy.activeDeadlineSeconds; JobSet: each Job\'s).')
  flags.DEFINE_integer('ttl_secs_after_finished', None, 'Delete the finished job after this '
                       'many seconds.')
  flags.DEFINE_boolean('gang_scheduling', False, 'TFJob: start all pods or none '
                       '(runPolicy.schedulingPolicy.minAvailable; needs --scheduler_name).')
  flags.DEFINE_string('scheduler_name', None, 'Pods\' schedulerName, e.g. volcano.')
  flags.DEFINE_string('kueue_queue', None, 'Kueue LocalQueue: the job is admitted as a whole '
                      '(label kueue.x-k8s.io/queue-name).')
  flags.DEFINE_string('priority_class', None, 'Pods\' priorityClassName.')
  flags.DEFINE_multi_string('node_selector', [], 'KEY=VALUE node label the GPU pods (all '
                            'pods when none has GPUs) must have; repeatable.')
  flags.DEFINE_multi_string('toleration', [], 'KEY[=VALUE][:EFFECT] taint the GPU pods '
                            '(all pods when none has GPUs) tolerate, e.g. '
                            'nvidia.com/gpu:NoSchedule; repeatable.')
  flags.DEFINE_string('python', 'python', 'Python interpreter inside the image.')
  flags.DEFINE_string('output', '-', 'Where to write the YAML ("-": standard output).')


def options_from_flags(program_args, deploy_config=None, config_defaults=None):
  """`JobOptions` from the flags; raises app.UsageError naming a bad flag.

  Args:
    program_args: flags after `--`, for every training task.
    deploy_config: the config's `DeployConfig` when it is readable here (its
      termination_grace_secs is the default of --termination_grace_secs).
    config_defaults: what the readable config gives (`defaults_from_config`):
      {'num_train_steps': N, 'ps_memory': '1280Mi'}, entries left out when unknown.
  """
  config_defaults = config_defaults or {}
  unused = 'model_dir' if FLAGS.program == 'trainer.train' else 'train_dir'
  if FLAGS[unused].value:
    raise app.UsageError('--%s is not used by --program=%s; give --%s' % (
        unused, FLAGS.program, OUTPUT_DIR_FLAG[FLAGS.program]))
  grace = FLAGS.termination_grace_secs
  if grace is None:
    grace = (deploy_config.termination_grace_secs if deploy_config is not None
             else k8s_pods.DEFAULT_TERMINATION_GRACE_SECS)
  try:
    resources = k8s_flags.parse_resources(FLAGS.resources)
    if 'ps_memory' in config_defaults and 'memory' not in resources.get('ps', {}):
      resources.setdefault('ps', {})['memory'] = config_defaults['ps_memory']
    steps = FLAGS.num_train_steps
    if steps is None and not any(str(a).startswith('--num_train_steps=')
                                 for a in program_args):
      steps = config_defaults.get('num_train_steps')
    options = job_options(
        FLAGS.job_name, FLAGS.image, FLAGS.pipeline_config_path,
        FLAGS[OUTPUT_DIR_FLAG[FLAGS.program]].value, namespace=FLAGS.namespace,
        program=FLAGS.program, chief=FLAGS.chief, workers=FLAGS.workers, ps=FLAGS.ps,
        evaluator=FLAGS.evaluator, gpus_per_worker=FLAGS.gpus_per_worker, cpu=FLAGS.cpu,
        memory=FLAGS.memory, port=FLAGS.port, backoff_limit=FLAGS.backoff_limit,
        restart_policy=FLAGS.restart_policy, env=k8s_flags.parse_env(FLAGS.env),
        program_args=list(program_args), python=FLAGS.python,
        resources=resources, pvc=FLAGS.pvc,
        mount_path=FLAGS.mount_path, termination_grace_secs=grace,
        run_as_user=FLAGS.run_as_user, active_deadline_secs=FLAGS.active_deadline_secs,
        ttl_secs_after_finished=FLAGS.ttl_secs_after_finished,
        gang_scheduling=FLAGS.gang_scheduling, scheduler_name=FLAGS.scheduler_name,
        kueue_queue=FLAGS.kueue_queue, priority_class=FLAGS.priority_class,
        node_selector=k8s_flags.parse_key_values('node_selector', FLAGS.node_selector),
        tolerations=[k8s_flags.parse_toleration(t) for t in FLAGS.toleration],
        max_restarts=FLAGS.max_restarts, service_account=FLAGS.service_account,
        fs_group=FLAGS.fs_group, memory_limit=FLAGS.memory_limit,
        extra_filesystems=tuple(FLAGS.extra_filesystems), num_train_steps=steps,
        evaluator_restart=FLAGS.evaluator_restart)
    manifests(options, FLAGS.kind)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  return options


def check_against_config(options, deploy_config):
  """Raises app.UsageError when the config would leave the pods' GPUs idle.

  trainer.train gets --noclone_on_cpu with GPUs; trainer.model_main has no
  such flag and takes clone_on_cpu from the config.
  """
  if (options.program == 'trainer.model_main' and options.gpus_per_worker and
      deploy_config.clone_on_cpu):
    raise app.UsageError(
        '--gpus_per_worker=%d with --program=trainer.model_main: %s sets '
        'deploy_config.clone_on_cpu: true, so the GPUs would sit idle; set it to false '
        '(and num_clones: -1 for one clone per GPU)' % (options.gpus_per_worker,
                                                         options.pipeline_config_path))


def main(argv):
  deploy_config = None
  config_defaults = {}
  if FLAGS.pipeline_config_path and os.path.exists(FLAGS.pipeline_config_path):
    # Present here too (e.g. configs/ in this checkout): catch config errors before submitting.
    configs = config_util.get_configs_from_pipeline_file(FLAGS.pipeline_config_path)
    deploy_config = configs['deploy_config']
    wants_ps_memory = FLAGS.ps and not any(
        item.startswith('ps:') and 'memory=' in item for item in FLAGS.resources)
    config_defaults = k8s_sizes.defaults_from_config(configs, FLAGS.ps, wants_ps_memory)
  else:
    logging.warning('%s is not readable here: terminationGracePeriodSeconds assumes '
                    'termination_grace_secs=%d unless --termination_grace_secs is given, the '
                    'ps memory is %s unless --resources=ps:memory=... is, and the evaluator '
                    'learns the last step only from --num_train_steps',
                    FLAGS.pipeline_config_path, k8s_pods.DEFAULT_TERMINATION_GRACE_SECS,
                    k8s_pods.DEFAULT_RESOURCES['ps']['memory'])
  options = options_from_flags(argv[1:], deploy_config, config_defaults)
  if FLAGS.kind == 'tfjob' and options.kueue_queue and (
      options.ttl_secs_after_finished is not None):
    logging.warning('--kueue_queue with --ttl_secs_after_finished: training-operator before '
                    'v1.8.1 leaves a TFJob that Kueue preempts Running (kubeflow/trainer#2239); '
                    'use v1.8.1 or later')
  if deploy_config is not None:
    check_against_config(options, deploy_config)
  if FLAGS.output == '-':
    sys.stdout.write(manifest_text(options, FLAGS.kind))
  else:
    write_manifest(options, FLAGS.output, FLAGS.kind)
    logging.info('Wrote %s %s/%s to %s', 'JobSet' if FLAGS.kind == 'jobset' else 'TFJob',
                 options.namespace, options.job_name, FLAGS.output)


if __name__ == '__main__':
  define_flags()
  app.run(main)
