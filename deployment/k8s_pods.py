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
  it; a remote URL needs none, but only of a file system the image's
  TensorFlow opens: TF 2.21 opens gs:// itself, while s3://, hdfs://, az://
  need tensorflow-io's file systems imported by the programs
  (`extra_filesystems` says the image does that). The same holds for the
  pipeline config's path.
* Several training tasks need ps tasks (trainer.train puts the variables on
  them; without any it stops at start with "num_ps_tasks must be positive").
* GPUs are used: a chief/worker given GPUs runs trainer.train with
  `--num_clones=N --noclone_on_cpu`, whatever deploy_config.clone_on_cpu says.
* Security: pods run as a non-root user with no privilege escalation, no
  capabilities, the runtime's default seccomp profile and no service account
  token -- what the Pod Security "restricted" profile demands. Volumes get
  `fsGroup` (default: the user id) with `fsGroupChangePolicy: OnRootMismatch`
  (the ownership walk happens once, not at every start); `service_account`
  names the pods' identity for bucket access (GKE Workload Identity, EKS
  IRSA), which needs no token in the pod.
* Resources: every role gets CPU and memory requests and a memory limit
  (DEFAULT_RESOURCES, overridable); no pod is BestEffort, and a namespace
  whose ResourceQuota demands memory limits accepts the pods.
* Time: `active_deadline_secs` (default DEFAULT_ACTIVE_DEADLINE_SECS, 0 for
  none) ends a job whose ps or chief never starts, which would otherwise
  keep the running workers retrying (exit 129) forever.
* The evaluator follows training to its last checkpoint: it gets
  `--num_train_steps` when the job knows it (`num_train_steps`, else the
  program's own `--num_train_steps` after `--`).
* Grace: `terminationGracePeriodSeconds` is deploy_config.termination_grace_secs
  plus TERMINATION_MARGIN_SECS, so the tasks' own shutdown fits inside it.

Differs on purpose: `cpu`/`memory`/GPUs given for the workers apply to the
chief and workers only; ps and evaluator get their own (`resources`). The
memory limit equals the memory request unless `memory_limit` says otherwise:
a task over its request is then killed (137, retryable) instead of taking
memory other pods on the node were promised. CPU gets no limit (throttling a
ps slows every worker).
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
# A week: long enough for real training, short enough that a job stuck on a
# Pending ps or chief gives its GPUs back.
DEFAULT_ACTIVE_DEADLINE_SECS = 7 * 24 * 3600
# Requests (and, by the memory, the limit) of each role when none is given.
DEFAULT_RESOURCES = {'training': {'cpu': '4', 'memory': '16Gi'},
                     'ps': {'cpu': '2', 'memory': '4Gi'},
                     'evaluator': {'cpu': '2', 'memory': '8Gi'}}
# Remote file systems TensorFlow 2.21 opens without plugins ('ram' is per process: no use
# for sharing a train_dir between pods).
BUILTIN_FILESYSTEMS = ('gs',)
# Who provides the others, and the package to install.
FILESYSTEM_PROVIDERS = {'s3': 'tensorflow-io', 'hdfs': 'tensorflow-io',
                        'viewfs': 'tensorflow-io', 'har': 'tensorflow-io',
                        'az': 'tensorflow-io', 'http': 'tensorflow-io',
                        'https': 'tensorflow-io'}
PROGRAMS = ('trainer.train', 'trainer.model_main')
# The flag each program takes its output directory from.
OUTPUT_DIR_FLAG = {'trainer.train': 'train_dir', 'trainer.model_main': 'model_dir'}
ROLES = ('chief', 'worker', 'ps', 'evaluator')
# Keys of a role's `resources` entry.
RESOURCE_KEYS = ('cpu', 'memory', 'memory_limit', 'gpu')
KINDS = ('tfjob', 'jobset')
TOLERATION_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')
# Env names the engines set themselves.
RESERVED_ENV = ('TF_CONFIG', 'SLIMTRAIN_TASK_INDEX', 'JOB_COMPLETION_INDEX')
# Characters of the random suffix Kubernetes appends to a Job's pod names.
_POD_SUFFIX = '-abcde'

_DNS_1035 = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
_DNS_1123 = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_DNS_1123_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')
_QUANTITY = re.compile(r'^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$')
ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
# A label key: optional DNS-subdomain prefix and '/', then a name of <= 63 characters.
_LABEL_KEY = re.compile(r'^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*'
                        r'[A-Za-z0-9])?$')
_LABEL_VALUE = re.compile(r'^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')
_REMOTE_PATH = re.compile(r'^([a-z][a-z0-9+.-]*)://')
_NUM_TRAIN_STEPS_ARG = re.compile(r'^--num_train_steps=(\d+)$')

JobOptions = collections.namedtuple('JobOptions', [
    'job_name', 'namespace', 'image', 'pipeline_config_path', 'output_dir', 'program',
    'chief', 'workers', 'ps', 'evaluator', 'gpus_per_worker', 'cpu', 'memory', 'port',
    'backoff_limit', 'restart_policy', 'env', 'program_args', 'python',
    # Added with JobSet (issue 27).
    'resources', 'pvc', 'mount_path', 'termination_grace_secs', 'run_as_user',
    'active_deadline_secs', 'ttl_secs_after_finished', 'gang_scheduling', 'scheduler_name',
    'kueue_queue', 'priority_class', 'node_selector', 'tolerations', 'max_restarts',
    # Added with issue 47.
    'service_account', 'fs_group', 'memory_limit', 'extra_filesystems', 'num_train_steps',
    'evaluator_restart'])

# One role of a job: its pods' count, program, GPUs and resource requests.
Role = collections.namedtuple('Role', ['name', 'replicas', 'command', 'args', 'gpus',
                                       'requests', 'memory_limit'])
# What a JobSet does when the evaluator's Job fails: recreate that Job alone
# (failurePolicy action RestartJobAndIgnoreMaxRestarts, JobSet >= v0.12), or
# the whole JobSet (older controllers, which refuse that action).
EVALUATOR_RESTARTS = ('alone', 'whole_job')


def job_options(job_name, image, pipeline_config_path, output_dir, **kwargs):
  """`JobOptions` with defaults: trainer.train, chief + 1 worker + 1 ps + evaluator.

  Args:
    job_name, image, pipeline_config_path, output_dir: the job's essentials
      (output_dir is trainer.train's --train_dir or model_main's --model_dir).
    **kwargs: any other `JobOptions` field; `resources` is {role: {'cpu': ..,
      'memory': .., 'gpu': N}} for ps and evaluator (chief and workers take
      `cpu`, `memory`, `gpus_per_worker`); `env` {NAME: value};
      `node_selector` {key: value}; `tolerations` a list of toleration dicts;
      `active_deadline_secs` 0 for no deadline; `num_train_steps` None when
      unknown; `extra_filesystems` URL schemes the image opens beyond gs.
  """
  defaults = dict(namespace='default', program='trainer.train', chief=True, workers=1, ps=1,
                  evaluator=True, gpus_per_worker=0, cpu=None, memory=None,
                  port=DEFAULT_PORT, backoff_limit=6, restart_policy=replicas_lib.EXIT_CODE,
                  env=None, program_args=(), python='python', resources=None, pvc=None,
                  mount_path=DEFAULT_MOUNT_PATH,
                  termination_grace_secs=DEFAULT_TERMINATION_GRACE_SECS,
                  run_as_user=DEFAULT_RUN_AS_USER,
                  active_deadline_secs=DEFAULT_ACTIVE_DEADLINE_SECS,
                  ttl_secs_after_finished=None, gang_scheduling=False, scheduler_name=None,
                  kueue_queue=None, priority_class=None, node_selector=None, tolerations=None,
                  max_restarts=3, service_account=None, fs_group=None, memory_limit=None,
                  extra_filesystems=(), num_train_steps=None, evaluator_restart='alone')
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


def _check_filesystem(options, flag, path):
  """Refuses a URL whose file system the programs in the image cannot open."""
  match = _REMOTE_PATH.match(path or '')
  if not match:
    return
  scheme = match.group(1)
  if scheme in BUILTIN_FILESYSTEMS or scheme in (options.extra_filesystems or ()):
    return
  if scheme == 'ram':
    fail(flag, 'is in one process\'s memory (ram://): no other pod sees it; use gs:// or '
         'a --pvc', path)
  provider = FILESYSTEM_PROVIDERS.get(scheme)
  how = ('%s provides it: install a %s build matching the image\'s TensorFlow (its last '
         'release, 0.37.1, is built for TensorFlow 2.16) and have Python import '
         'tensorflow_io at start (e.g. a sitecustomize.py with "import tensorflow_io"), '
         'then pass --extra_filesystems=%s' % (provider, provider, scheme) if provider
         else 'no known package provides it')
  fail(flag, 'uses %s://, which TensorFlow 2.21 cannot open (it opens local paths and '
       '%s); %s. Or use a gs:// bucket, or mount the storage as a ReadWriteMany '
       'volume (e.g. a CSI driver for the bucket) and give --pvc' % (
           scheme, ', '.join('%s://' % b for b in BUILTIN_FILESYSTEMS), how), path)


def derived_names(options, kind):
  """{what: name} of the longest names the engine derives from the job name.

  Args:
    options: `JobOptions`.
    kind: 'tfjob' or 'jobset'.

  Returns:
    A dict like {'pod': 'shapes-evaluator-0-abcde', 'service': ...}; TFJob
    names pods and services `<job>-<role>-<index>`, and the evaluator's own
    Job's pod is `<job>-evaluator-<5 random>`; JobSet names Jobs
    `<job>-<role>-0`, pod hostnames `<job>-<role>-0-<index>` and pods that
    plus Kubernetes' 5-character suffix.
  """
  longest = {}

  def keep(what, name):
    if len(name) > len(longest.get(what, '')):
      longest[what] = name

  for role in roles(options):
    last = role.replicas - 1
    if kind == 'tfjob' and role.name == 'evaluator':
      # A batch/v1 Job of its own beside the TFJob (tfjob.evaluator_job).
      keep('evaluator pod', '%s-evaluator%s' % (options.job_name, _POD_SUFFIX))
    elif kind == 'tfjob':
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
  for scheme in options.extra_filesystems or ():
    if not re.match(r'^[a-z][a-z0-9+.-]*$', scheme):
      fail('extra_filesystems', 'must list URL schemes like s3,hdfs', scheme)
  _check_filesystem(options, 'pipeline_config_path', options.pipeline_config_path)
  _check_filesystem(options, OUTPUT_DIR_FLAG[options.program], options.output_dir)
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


def _quantity_bytes(text):
  """Bytes of a memory quantity like 16Gi, 500M or 1e9 (None when it is not one)."""
  match = re.match(r'^([0-9]+(?:\.[0-9]+)?)(k|Ki|M|Mi|G|Gi|T|Ti|m)?$', str(text))
  if not match:
    return None
  scale = {None: 1, 'm': 1e-3, 'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, 'Ki': 2 ** 10,
           'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40}[match.group(2)]
  return float(match.group(1)) * scale


def _check_memory_limit(flag, role, memory, limit):
  request, most = _quantity_bytes(memory), _quantity_bytes(limit)
  if request is not None and most is not None and most < request:
    fail(flag, 'of %s: the memory limit %s is below the memory request %s (Kubernetes '
         'refuses the pod)' % (role, limit, memory), limit)


def _check_resources(options):
  if options.memory_limit and not _QUANTITY.match(options.memory_limit):
    fail('memory_limit', 'must be a Kubernetes quantity like 16Gi', options.memory_limit)
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
  for role in roles(options):
    flag = 'memory_limit' if role.name in ('chief', 'worker') else 'resources'
    _check_memory_limit(flag, role.name, role.requests.get('memory'), role.memory_limit)


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
    if not ENV_NAME.match(name):
      fail('env', 'must be NAME=VALUE with NAME a C identifier', name)
  _check_storage(options)
  if options.termination_grace_secs <= 0:
    fail('termination_grace_secs', 'must be > 0', options.termination_grace_secs)
  if options.run_as_user is None or options.run_as_user <= 0:
    fail('run_as_user', 'must be a user id > 0 (pods run as non-root)', options.run_as_user)
  if options.fs_group is not None and options.fs_group < 0:
    fail('fs_group', 'must be a group id >= 0', options.fs_group)
  if options.service_account is not None and (
      not _DNS_1123_SUBDOMAIN.match(options.service_account) or
      len(options.service_account) > 253):
    fail('service_account', 'must be a ServiceAccount name (lowercase letters, digits, '
         '"-" and ".")', options.service_account)
  for flag in ('active_deadline_secs', 'ttl_secs_after_finished', 'num_train_steps'):
    value = getattr(options, flag)
    if value is not None and value < 0:
      fail(flag, 'must be >= 0' + (' (0: no deadline)' if flag == 'active_deadline_secs'
                                   else ''), value)
  if options.evaluator_restart not in EVALUATOR_RESTARTS:
    fail('evaluator_restart', 'must be one of %s' % ', '.join(EVALUATOR_RESTARTS),
         options.evaluator_restart)
  _check_num_train_steps(options)
  _check_scheduling(options, kind)


def _steps_in_program_args(options):
  """N of a `--num_train_steps=N` among the program's own flags, else None."""
  for arg in options.program_args or ():
    match = _NUM_TRAIN_STEPS_ARG.match(str(arg))
    if match:
      return int(match.group(1))
  return None


def _check_num_train_steps(options):
  given = _steps_in_program_args(options)
  if options.num_train_steps is not None and given is not None and (
      given != options.num_train_steps):
    fail('num_train_steps', 'differs from --num_train_steps=%d after "--" (the training '
         'tasks\' own): give one of them' % given, options.num_train_steps)


def num_train_steps(options):
  """The job's training steps as far as the writer knows them, else None."""
  if options.num_train_steps is not None:
    return options.num_train_steps
  return _steps_in_program_args(options)


# ----------------------------------------------------------------------------
# Roles and pods.

def _program_args(options, gpus):
  """Arguments of a training (or ps) task; GPUs are always used when given."""
  args = ['--pipeline_config_path=%s' % options.pipeline_config_path,
          '--%s=%s' % (OUTPUT_DIR_FLAG[options.program], options.output_dir)]
  if options.program == 'trainer.train' and gpus:
    # The flag wins over a config's clone_on_cpu: true, which would idle the GPUs.
    args += ['--num_clones=%d' % gpus, '--noclone_on_cpu']
  args += ['--alsologtostderr'] + list(options.program_args)
  if options.num_train_steps is not None and _steps_in_program_args(options) is None:
    # Told to the writer only: every task must still train (and evaluate) to the same step.
    args.append('--num_train_steps=%d' % options.num_train_steps)
  return args


def _evaluator_command(options):
  """(command, args) of the evaluator: it ends after evaluating the last step's checkpoint."""
  if options.program == 'trainer.train':
    args = ['--pipeline_config_path=%s' % options.pipeline_config_path,
            '--checkpoint_dir=%s' % options.output_dir,
            '--eval_dir=%s' % options.output_dir.rstrip('/') + '/eval', '--alsologtostderr']
    steps = num_train_steps(options)
    if steps is not None:
      args.append('--num_train_steps=%d' % steps)
    return [options.python, '-m', 'trainer.eval'], args
  # model_main's evaluator task (TF_CONFIG type "evaluator") runs continuous evaluation up
  # to the --num_train_steps the training tasks get too.
  return [options.python, '-m', options.program], _program_args(options, 0)


def _requests(values, role):
  """{'cpu': .., 'memory': ..} of `values` (a role's given resources), defaults filled in."""
  defaults = DEFAULT_RESOURCES[role]
  return {k: values.get(k) or defaults[k] for k in ('cpu', 'memory')}


def _role(options, name, replicas, command, args, gpus, values):
  requests = _requests(values, 'training' if name in ('chief', 'worker') else name)
  return Role(name, replicas, command, args, gpus, requests,
              values.get('memory_limit') or requests['memory'])


def roles(options):
  """The `Role`s of the job, in chief, worker, ps, evaluator order (absent ones left out)."""
  command = [options.python, '-m', options.program]
  gpus = options.gpus_per_worker
  training = {'cpu': options.cpu, 'memory': options.memory,
              'memory_limit': options.memory_limit}
  resources = options.resources or {}
  result = []
  if options.chief:
    result.append(_role(options, 'chief', 1, command, _program_args(options, gpus), gpus,
                        training))
  if options.workers:
    result.append(_role(options, 'worker', options.workers, command,
                        _program_args(options, gpus), gpus, training))
  if options.ps:
    result.append(_role(options, 'ps', options.ps, command, _program_args(options, 0), 0,
                        resources.get('ps', {})))
  if options.evaluator:
    evaluator = resources.get('evaluator', {})
    result.append(_role(options, 'evaluator', 1, *_evaluator_command(options),
                        gpus=evaluator.get('gpu', 0), values=evaluator))
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
  """The pod's part: a non-root user and group, the volumes' group, default seccomp.

  `fsGroupChangePolicy: OnRootMismatch` makes the kubelet walk a volume to
  set its group only when the volume's root does not have it yet, so a big
  train_dir does not slow every pod start. Volumes whose driver ignores
  fsGroup (most ReadWriteMany CSI drivers: NFS, Filestore, EFS, Azure Files)
  must already be writable by `run_as_user` (docs/kubernetes.md, "Storage").
  """
  fs_group = options.run_as_user if options.fs_group is None else options.fs_group
  return {'runAsNonRoot': True, 'runAsUser': options.run_as_user,
          'runAsGroup': options.run_as_user, 'fsGroup': fs_group,
          'fsGroupChangePolicy': 'OnRootMismatch',
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
  limits = {'memory': role.memory_limit}
  if role.gpus:
    limits[GPU_RESOURCE] = role.gpus
  spec['resources'] = {'requests': dict(role.requests), 'limits': limits}
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
  if options.service_account:
    # Bucket access by the pods' identity (GKE Workload Identity, EKS IRSA); neither needs
    # the API token mounted.
    spec['serviceAccountName'] = options.service_account
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
