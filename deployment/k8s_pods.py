r"""What every Kubernetes engine runs for a slimtrain job: roles, pod specs, names, policy.

A job is a few roles (chief, worker, ps, evaluator); each role becomes pods
that run one container named `tensorflow`. Which engine creates the pods --
the Kubeflow TFJob operator (deployment/tfjob.py) or JobSet
(deployment/jobset.py) -- changes only the wrapper around the pod templates
this module writes, so both kinds get the same commands, resources, storage,
security context and scheduling settings:

    options = k8s_pods.job_options('shapes', 'registry.example.com/slimtrain:0.1',
                                   '/app/configs/ssd_shapes.config',
                                   'gs://bucket/shapes/train', workers=2, gpus_per_worker=2)
    k8s_pods.check_options(options, kind='jobset')
    for role in k8s_pods.roles(options):
      pod_spec = k8s_pods.pod_spec(options, role)   # a core/v1 PodSpec as a dict

The rules the writer enforces, each an error that names the flag to change:

* Names: the job name is a DNS-1035 label (TFJob's webhook rejects a leading
  digit), and the longest name the engine derives from it -- TFJob's
  `<job>-evaluator-0` pods and services, JobSet's
  `<job>-<role>-0-<index>-<5 random>` pods -- fits in 63 characters.
* Storage: every pod must see the same train_dir, so a local path needs a
  ReadWriteMany claim (`pvc`) mounted at `mount_path` with the directory under
  it; a remote URL (gs://, s3://, ...) needs none.
* Several training tasks need ps tasks (trainer.train puts the variables on
  them; without any it stops at start with "num_ps_tasks must be positive").
* GPUs are used: a chief/worker given GPUs runs trainer.train with
  `--num_clones=N --noclone_on_cpu`, whatever deploy_config.clone_on_cpu says.
* Security: pods run as a non-root user with no privilege escalation, no
  capabilities, the runtime's default seccomp profile and no service account
  token -- what the Pod Security "restricted" profile demands.
* Grace: `terminationGracePeriodSeconds` is deploy_config.termination_grace_secs
  plus TERMINATION_MARGIN_SECS, so the tasks' own shutdown fits inside it.

Differs on purpose: `cpu`/`memory`/GPUs given for the workers apply to the
chief and workers only; ps and evaluator get their own (`resources`), none by
default.
"""

import collections
import os
import re

from deployment import replicas as replicas_lib

CONTAINER_NAME = 'tensorflow'
PORT_NAME = 'tfjob-port'
DEFAULT_PORT = 2222
GPU_RESOURCE = 'nvidia.com/gpu'
DEFAULT_MOUNT_PATH = '/mnt/shared'
VOLUME_NAME = 'shared'
# Seconds Kubernetes waits beyond the tasks' own grace: the process needs a
# moment to get the signal, and the last log lines to be flushed.
TERMINATION_MARGIN_SECS = 15
DEFAULT_TERMINATION_GRACE_SECS = 25  # deploy_config.termination_grace_secs' default
DEFAULT_RUN_AS_USER = 1000
PROGRAMS = ('trainer.train', 'trainer.model_main')
# The flag each program takes its output directory from.
OUTPUT_DIR_FLAG = {'trainer.train': 'train_dir', 'trainer.model_main': 'model_dir'}
ROLES = ('chief', 'worker', 'ps', 'evaluator')
# Keys of a role's `resources` entry.
RESOURCE_KEYS = ('cpu', 'memory', 'gpu')
KINDS = ('tfjob', 'jobset')
TOLERATION_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')
# Env names the engines set themselves.
RESERVED_ENV = ('TF_CONFIG', 'SLIMTRAIN_TASK_INDEX', 'JOB_COMPLETION_INDEX')
# Characters of the random suffix Kubernetes appends to a Job's pod names.
_POD_SUFFIX = '-abcde'

_DNS_1035 = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
_DNS_1123 = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_QUANTITY = re.compile(r'^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$')
_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
# A label key: optional DNS-subdomain prefix and '/', then a name of <= 63 characters.
_LABEL_KEY = re.compile(r'^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*'
                        r'[A-Za-z0-9])?$')
_LABEL_VALUE = re.compile(r'^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')
_REMOTE_PATH = re.compile(r'^[a-z][a-z0-9+.-]*://')

JobOptions = collections.namedtuple('JobOptions', [
    'job_name', 'namespace', 'image', 'pipeline_config_path', 'output_dir', 'program',
    'chief', 'workers', 'ps', 'evaluator', 'gpus_per_worker', 'cpu', 'memory', 'port',
    'backoff_limit', 'restart_policy', 'env', 'program_args', 'python',
    # Added with JobSet (issue 27).
    'resources', 'pvc', 'mount_path', 'termination_grace_secs', 'run_as_user',
    'active_deadline_secs', 'ttl_secs_after_finished', 'gang_scheduling', 'scheduler_name',
    'kueue_queue', 'priority_class', 'node_selector', 'tolerations', 'max_restarts'])

# One role of a job: its pods' count, program, GPUs and resource requests.
Role = collections.namedtuple('Role', ['name', 'replicas', 'command', 'args', 'gpus',
                                       'requests'])


def job_options(job_name, image, pipeline_config_path, output_dir, **kwargs):
  """`JobOptions` with defaults: trainer.train, chief + 1 worker + 1 ps + evaluator.

  Args:
    job_name, image, pipeline_config_path, output_dir: the job's essentials
      (output_dir is trainer.train's --train_dir or model_main's --model_dir).
    **kwargs: any other `JobOptions` field; `resources` is {role: {'cpu': ..,
      'memory': .., 'gpu': N}} for ps and evaluator (chief and workers take
      `cpu`, `memory`, `gpus_per_worker`); `env` {NAME: value};
      `node_selector` {key: value}; `tolerations` a list of toleration dicts.
  """
  defaults = dict(namespace='default', program='trainer.train', chief=True, workers=1, ps=1,
                  evaluator=True, gpus_per_worker=0, cpu=None, memory=None,
                  port=DEFAULT_PORT, backoff_limit=6, restart_policy=replicas_lib.EXIT_CODE,
                  env=None, program_args=(), python='python', resources=None, pvc=None,
                  mount_path=DEFAULT_MOUNT_PATH,
                  termination_grace_secs=DEFAULT_TERMINATION_GRACE_SECS,
                  run_as_user=DEFAULT_RUN_AS_USER, active_deadline_secs=None,
                  ttl_secs_after_finished=None, gang_scheduling=False, scheduler_name=None,
                  kueue_queue=None, priority_class=None, node_selector=None, tolerations=None,
                  max_restarts=3)
  defaults.update(kwargs)
  return JobOptions(job_name=job_name, image=image, pipeline_config_path=pipeline_config_path,
                    output_dir=output_dir, **defaults)


def fail(flag, message, value):
  """Raises the writer's ValueError: '--flag: value <message>, got <value>'."""
  raise ValueError('--%s: value %s, got %r' % (flag, message, value))


# ----------------------------------------------------------------------------
# Checks.

def is_remote(path):
  """Whether `path` is a URL (gs://, s3://, hdfs://): shared by every pod without a volume."""
  return bool(_REMOTE_PATH.match(path or ''))


def derived_names(options, kind):
  """{what: name} of the longest names the engine derives from the job name.

  Args:
    options: `JobOptions`.
    kind: 'tfjob' or 'jobset'.

  Returns:
    A dict like {'pod': 'shapes-evaluator-0-abcde', 'service': ...}; TFJob
    names pods and services `<job>-<role>-<index>`; JobSet names Jobs
    `<job>-<role>-0`, pod hostnames `<job>-<role>-0-<index>` and pods that
    plus Kubernetes' 5-character suffix.
  """
  longest = {}

  def keep(what, name):
    if len(name) > len(longest.get(what, '')):
      longest[what] = name

  for role in roles(options):
    last = role.replicas - 1
    if kind == 'tfjob':
      keep('pod and service', '%s-%s-%d' % (options.job_name, role.name, last))
    else:
      keep('job', '%s-%s-0' % (options.job_name, role.name))
      keep('pod hostname', '%s-%s-0-%d' % (options.job_name, role.name, last))
      keep('pod', '%s-%s-0-%d%s' % (options.job_name, role.name, last, _POD_SUFFIX))
  return longest


def _check_names(options, kind):
  if not _DNS_1035.match(options.job_name or '') or len(options.job_name) > 63:
    fail('job_name', 'must be a DNS-1035 label (a lowercase letter first, then lowercase '
         'letters, digits and "-", at most 63 characters)', options.job_name)
  if not _DNS_1123.match(options.namespace or '') or len(options.namespace) > 63:
    fail('namespace', 'must be a DNS label', options.namespace)
  for what, name in sorted(derived_names(options, kind).items()):
    if len(name) > 63:
      fail('job_name', 'is too long for --kind=%s: it makes the %s name %r (%d characters, '
           'at most 63); shorten it by %d' % (kind, what, name, len(name), len(name) - 63),
           options.job_name)


def _check_storage(options):
  flag = '--%s' % OUTPUT_DIR_FLAG[options.program]
  if is_remote(options.output_dir):
    return
  if not os.path.isabs(options.output_dir):
    fail(OUTPUT_DIR_FLAG[options.program], 'must be an absolute path or a URL',
         options.output_dir)
  if not options.pvc:
    fail(OUTPUT_DIR_FLAG[options.program],
         'is a directory in each pod\'s own file system: the chief, the workers, the '
         'evaluator and a restarted pod would each see a different, empty one. Add '
         '--pvc=<ReadWriteMany claim> (mounted at --mount_path, default %s) with %s under '
         'it, or give a remote %s (gs://..., s3://...)' % (DEFAULT_MOUNT_PATH, flag, flag),
         options.output_dir)
  mount = os.path.normpath(options.mount_path or '')
  if not os.path.isabs(mount):
    fail('mount_path', 'must be an absolute path', options.mount_path)
  output = os.path.normpath(options.output_dir)
  if output != mount and not output.startswith(mount.rstrip('/') + '/'):
    fail(OUTPUT_DIR_FLAG[options.program], 'is not on the shared volume: --pvc=%s is '
         'mounted at --mount_path=%s; put %s under it' % (options.pvc, mount, flag),
         options.output_dir)


def _check_resources(options):
  for role, values in sorted((options.resources or {}).items()):
    if role not in ('ps', 'evaluator'):
      fail('resources', 'sets ps and evaluator only (chief and workers take --cpu, --memory '
           'and --gpus_per_worker)', role)
    for key, value in values.items():
      if key not in RESOURCE_KEYS:
        fail('resources', 'of %s: %r is not one of %s' % (role, key, ', '.join(RESOURCE_KEYS)),
             value)
      if key == 'gpu' and (role != 'evaluator' or not isinstance(value, int) or value < 0):
        fail('resources', 'of %s: gpu is a count >= 0 of the evaluator' % role, value)
      if key != 'gpu' and not _QUANTITY.match(str(value)):
        fail('resources', 'of %s: %s must be a Kubernetes quantity like 4, 500m or 16Gi'
             % (role, key), value)


def _check_scheduling(options, kind):
  for key, value in sorted((options.node_selector or {}).items()):
    if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value) or len(value) > 63:
      fail('node_selector', 'must be KEY=VALUE with a label key and value', '%s=%s' % (
          key, value))
  for toleration in options.tolerations or []:
    if not _LABEL_KEY.match(toleration.get('key', '')) or toleration.get(
        'effect', 'NoSchedule') not in TOLERATION_EFFECTS:
      fail('toleration', 'must be KEY[=VALUE][:EFFECT] with EFFECT one of %s' % ', '.join(
          TOLERATION_EFFECTS), toleration)
  for flag in ('scheduler_name', 'priority_class', 'kueue_queue'):
    value = getattr(options, flag)
    if value is not None and not _DNS_1123.match(value):
      fail(flag, 'must be a DNS label', value)
  if options.gang_scheduling:
    if kind == 'jobset':
      fail('gang_scheduling', 'is a TFJob field; a JobSet is admitted as a whole by Kueue: '
           'use --kueue_queue=<local queue>', options.gang_scheduling)
    if not options.scheduler_name:
      fail('gang_scheduling', 'needs a gang scheduler: add --scheduler_name (e.g. volcano)',
           options.gang_scheduling)


def check_options(options, kind='tfjob'):
  """Raises ValueError naming the flag of a bad option.

  Args:
    options: `JobOptions`.
    kind: 'tfjob' or 'jobset' (the names each derives, what each supports).
  """
  if kind not in KINDS:
    fail('kind', 'must be one of %s' % ', '.join(KINDS), kind)
  for flag in ('image', 'pipeline_config_path'):
    if not getattr(options, flag):
      fail(flag, 'is required', getattr(options, flag))
  if options.program not in PROGRAMS:
    fail('program', 'must be one of %s' % ', '.join(PROGRAMS), options.program)
  if not options.output_dir:
    fail(OUTPUT_DIR_FLAG[options.program], 'is required with --program=%s' % options.program,
         options.output_dir)
  for flag in ('workers', 'ps', 'gpus_per_worker', 'backoff_limit', 'max_restarts'):
    if getattr(options, flag) < 0:
      fail(flag, 'must be >= 0', getattr(options, flag))
  if not options.chief and not options.workers:
    fail('workers', 'must be >= 1 with --nochief', options.workers)
  training_tasks = int(bool(options.chief)) + options.workers
  if training_tasks > 1 and not options.ps:
    fail('ps', 'must be >= 1 with %d training tasks (chief and workers): the variables live '
         'on the ps tasks, and a job without them stops at start with "num_ps_tasks must be '
         'positive"; use --ps=1, or one training task' % training_tasks, options.ps)
  _check_names(options, kind)
  for flag in ('cpu', 'memory'):
    value = getattr(options, flag)
    if value and not _QUANTITY.match(value):
      fail(flag, 'must be a Kubernetes quantity like 4, 500m or 16Gi', value)
  _check_resources(options)
  if not 0 < options.port < 65536:
    fail('port', 'must be 1..65535', options.port)
  if options.restart_policy not in replicas_lib.RESTART_POLICIES:
    fail('restart_policy', 'must be one of %s' % ', '.join(replicas_lib.RESTART_POLICIES),
         options.restart_policy)
  for name in (options.env or {}):
    if name in RESERVED_ENV:
      fail('env', '%s is set by the engine for each pod; it cannot be given' % name, name)
    if not _ENV_NAME.match(name):
      fail('env', 'must be NAME=VALUE with NAME a C identifier', name)
  _check_storage(options)
  if options.termination_grace_secs <= 0:
    fail('termination_grace_secs', 'must be > 0', options.termination_grace_secs)
  if options.run_as_user is None or options.run_as_user <= 0:
    fail('run_as_user', 'must be a user id > 0 (pods run as non-root)', options.run_as_user)
  for flag in ('active_deadline_secs', 'ttl_secs_after_finished'):
    value = getattr(options, flag)
    if value is not None and (value < 0 or flag == 'active_deadline_secs' and value == 0):
      fail(flag, 'must be > 0' if flag == 'active_deadline_secs' else 'must be >= 0', value)
  _check_scheduling(options, kind)


# ----------------------------------------------------------------------------
# Roles and pods.

def _program_args(options, gpus):
  """Arguments of a training (or ps) task; GPUs are always used when given."""
  args = ['--pipeline_config_path=%s' % options.pipeline_config_path,
          '--%s=%s' % (OUTPUT_DIR_FLAG[options.program], options.output_dir)]
  if options.program == 'trainer.train' and gpus:
    # The flag wins over a config's clone_on_cpu: true, which would idle the GPUs.
    args += ['--num_clones=%d' % gpus, '--noclone_on_cpu']
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


def _requests(cpu, memory):
  return {k: v for k, v in (('cpu', cpu), ('memory', memory)) if v}


def roles(options):
  """The `Role`s of the job, in chief, worker, ps, evaluator order (absent ones left out)."""
  command = [options.python, '-m', options.program]
  gpus = options.gpus_per_worker
  training = _requests(options.cpu, options.memory)
  resources = options.resources or {}
  result = []
  if options.chief:
    result.append(Role('chief', 1, command, _program_args(options, gpus), gpus, training))
  if options.workers:
    result.append(Role('worker', options.workers, command, _program_args(options, gpus),
                       gpus, training))
  if options.ps:
    ps = resources.get('ps', {})
    result.append(Role('ps', options.ps, command, _program_args(options, 0), 0,
                       _requests(ps.get('cpu'), ps.get('memory'))))
  if options.evaluator:
    evaluator = resources.get('evaluator', {})
    result.append(Role('evaluator', 1, *_evaluator_command(options),
                       gpus=evaluator.get('gpu', 0),
                       requests=_requests(evaluator.get('cpu'), evaluator.get('memory'))))
  return result


def success_role(options):
  """The role whose success is the job's: the chief, else the workers (worker 0 is chief)."""
  return 'chief' if options.chief else 'worker'


def pod_count(options):
  """How many pods the job runs at once."""
  return sum(role.replicas for role in roles(options))


def container_security_context():
  """The container's part of the Pod Security "restricted" profile."""
  return {'allowPrivilegeEscalation': False, 'capabilities': {'drop': ['ALL']},
          'runAsNonRoot': True}


def pod_security_context(options):
  """The pod's part: a non-root user (group and volume group the same id), default seccomp."""
  return {'runAsNonRoot': True, 'runAsUser': options.run_as_user,
          'runAsGroup': options.run_as_user, 'fsGroup': options.run_as_user,
          'seccompProfile': {'type': 'RuntimeDefault'}}


def _uses_node_placement(options, role):
  """Whether --node_selector/--toleration apply to `role`: GPU pods, or all without GPUs."""
  if any(r.gpus for r in roles(options)):
    return bool(role.gpus)
  return True


def container(options, role, env_prefix=()):
  """The `tensorflow` container of `role`'s pods.

  Args:
    options: `JobOptions`.
    role: a `Role`.
    env_prefix: env entries (dicts) the engine puts before the user's --env
      (JobSet's index and TF_CONFIG).
  """
  spec = {'name': CONTAINER_NAME, 'image': options.image, 'command': list(role.command),
          'args': list(role.args),
          'ports': [{'name': PORT_NAME, 'containerPort': options.port}]}
  env = list(env_prefix) + [{'name': k, 'value': v}
                            for k, v in sorted((options.env or {}).items())]
  if env:
    spec['env'] = env
  resources = {}
  if role.requests:
    resources['requests'] = dict(role.requests)
  if role.gpus:
    resources['limits'] = {GPU_RESOURCE: role.gpus}
  if resources:
    spec['resources'] = resources
  if options.pvc:
    spec['volumeMounts'] = [{'name': VOLUME_NAME, 'mountPath': options.mount_path}]
  spec['securityContext'] = container_security_context()
  return spec


def pod_spec(options, role, env_prefix=(), restart_policy=None):
  """The PodSpec (a dict) of `role`'s pods.

  Args:
    options: `JobOptions`.
    role: a `Role`.
    env_prefix: see `container`.
    restart_policy: the pod's restartPolicy, or None to leave it to the engine.
  """
  spec = {}
  if restart_policy:
    spec['restartPolicy'] = restart_policy
  spec['automountServiceAccountToken'] = False
  spec['terminationGracePeriodSeconds'] = (options.termination_grace_secs +
                                           TERMINATION_MARGIN_SECS)
  spec['securityContext'] = pod_security_context(options)
  if options.priority_class:
    spec['priorityClassName'] = options.priority_class
  if options.scheduler_name:
    spec['schedulerName'] = options.scheduler_name
  if _uses_node_placement(options, role):
    if options.node_selector:
      spec['nodeSelector'] = dict(sorted(options.node_selector.items()))
    if options.tolerations:
      spec['tolerations'] = [dict(t) for t in options.tolerations]
  spec['containers'] = [container(options, role, env_prefix)]
  if options.pvc:
    spec['volumes'] = [{'name': VOLUME_NAME,
                        'persistentVolumeClaim': {'claimName': options.pvc}}]
  return spec


def network_policy(options, job_label):
  """A NetworkPolicy: the job's pods accept the gRPC port only from pods of the job.

  Args:
    options: `JobOptions`.
    job_label: the label key the engine puts on every pod of the job, with
      the job's name as its value.
  """
  same_job = {'matchLabels': {job_label: options.job_name}}
  return {'apiVersion': 'networking.k8s.io/v1', 'kind': 'NetworkPolicy',
          'metadata': {'name': '%s-grpc' % options.job_name, 'namespace': options.namespace},
          'spec': {'podSelector': same_job, 'policyTypes': ['Ingress'],
                   'ingress': [{'from': [{'podSelector': same_job}],
                                'ports': [{'protocol': 'TCP', 'port': options.port}]}]}}


# ----------------------------------------------------------------------------
# Flag values.

def parse_env(items):
  """{NAME: VALUE} of repeated NAME=VALUE items; the first '=' splits, commas stay.

  Raises:
    ValueError: naming --env and the bad item.
  """
  env = {}
  for item in items:
    name, sep, value = item.partition('=')
    if not sep or not _ENV_NAME.match(name):
      fail('env', 'must be NAME=VALUE', item)
    env[name] = value
  return env


def parse_key_values(flag, items):
  """{KEY: VALUE} of repeated KEY=VALUE items (--node_selector)."""
  result = {}
  for item in items:
    key, sep, value = item.partition('=')
    if not sep or not key:
      fail(flag, 'must be KEY=VALUE', item)
    result[key] = value
  return result


def parse_toleration(item):
  """A toleration dict of 'KEY[=VALUE][:EFFECT]' (no VALUE: operator Exists).

  `nvidia.com/gpu:NoSchedule` tolerates the taint GPU node pools usually carry.
  """
  rest, _, effect = item.partition(':')
  key, sep, value = rest.partition('=')
  toleration = {'key': key, 'operator': 'Equal' if sep else 'Exists'}
  if sep:
    toleration['value'] = value
  if effect:
    toleration['effect'] = effect
  if not key or effect and effect not in TOLERATION_EFFECTS:
    fail('toleration', 'must be KEY[=VALUE][:EFFECT] with EFFECT one of %s' % ', '.join(
        TOLERATION_EFFECTS), item)
  return toleration


def parse_resources(items):
  """{role: {'cpu': .., 'memory': .., 'gpu': N}} of repeated 'ROLE:KEY=VALUE[,KEY=VALUE]'.

  E.g. `--resources=ps:cpu=2,memory=8Gi --resources=evaluator:cpu=4,gpu=1`.
  """
  result = {}
  for item in items:
    role, sep, body = item.partition(':')
    if not sep or role not in ROLES or not body:
      fail('resources', 'must be ROLE:KEY=VALUE[,KEY=VALUE...] with ROLE ps or evaluator',
           item)
    values = result.setdefault(role, {})
    for pair in body.split(','):
      key, sep, value = pair.partition('=')
      if not sep or key not in RESOURCE_KEYS:
        fail('resources', 'of %s: %r is not KEY=VALUE with KEY one of %s' % (
            role, pair, ', '.join(RESOURCE_KEYS)), item)
      if key == 'gpu':
        if not value.isdigit():
          fail('resources', 'of %s: gpu must be a count' % role, item)
        value = int(value)
      values[key] = value
  return result
