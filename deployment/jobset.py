r"""JobSet manifests: a slimtrain job for the JobSet controller, without any operator.

A JobSet (`jobset.x-k8s.io/v1alpha2`, kubernetes-sigs/jobset) is a list of
replicated Jobs. The writer makes one Indexed Job per role -- chief, worker,
ps, evaluator -- whose N pods run at once (`completions` = `parallelism` =
N). With `network.enableDNSHostnames` each pod gets a stable name,
`<jobset>-<role>-0-<index>.<subdomain>`, so every pod's TF_CONFIG can be
written into the manifest: the cluster lists those names, and the task index
comes from the pod's own completion index (the downward API gives it as
SLIMTRAIN_TASK_INDEX, and Kubernetes expands `$(SLIMTRAIN_TASK_INDEX)` in
the next env value). Our programs read TF_CONFIG as they do under TFJob.

    python -m deployment.tfjob --kind=jobset --job_name=shapes ... --output=job.yaml
    python -m deployment.launch --jobset=job.yaml     # the same job, on this machine

The exit-code contract (deployment/exit_codes.py) maps onto Kubernetes'
own mechanisms under the default `--restart_policy=ExitCode`:

* a pod that exits 1-127 (permanent) fails its Job at once (Job
  `podFailurePolicy`, action FailJob), and the JobSet fails without a
  restart (`failurePolicy` rule on the Job failure reason PodFailurePolicy);
* a pod that exits 128-255 (retryable, 143 included) is replaced by the Job
  with a pod of the same index and name, counted against the Job's
  `backoffLimit` (pods must have `restartPolicy: Never` for this);
* a pod evicted or preempted by Kubernetes (condition DisruptionTarget) is
  replaced without being counted;
* a Job past its backoffLimit restarts the whole JobSet, at most
  `failurePolicy.maxRestarts` (--max_restarts) times;
* a Job running past `activeDeadlineSeconds` (--active_deadline_secs,
  a week by default) fails the JobSet (reason DeadlineExceeded);
* the JobSet succeeds when the chief's Job (the workers' without a chief)
  and the evaluator's Job have completed (`successPolicy`): the evaluator
  gets `--num_train_steps` and exits 0 once it has evaluated the last
  checkpoint, even one written after the chief exited; the controller then
  deletes the ps Jobs;
* the evaluator never fails training: its pods' exit codes all count
  against its own Job's backoffLimit (no FailJob rule), and a Job that
  spends it is recreated alone, not counted against maxRestarts (rule
  `evaluatorRestartsAlone`, action RestartJobAndIgnoreMaxRestarts, JobSet
  v0.12 or later; `--evaluator_restart=whole_job` leaves the rule out for
  older controllers, which refuse the action: the failure then restarts the
  whole JobSet, counted, and training resumes from its last checkpoint).

Read one back (what the launcher does):

    job = jobset.read_jobset('job.yaml')
    job.specs          # [replicas.ReplicaSpec('chief', 1, [...]), ...]
    job.task_env       # {'worker:1': {'SLIMTRAIN_TASK_INDEX': '1', ...}}, per pod
    job.tf_configs     # {'worker:1': '{"cluster": ..., "task": {"index": 1, ...}}'}

Differs on purpose: the reader needs `replicas: 1` per replicated Job and
Indexed Jobs with completions = parallelism (what the writer makes); the
launcher does not repeat whole-JobSet restarts (`maxRestarts`), takes the
smallest backoffLimit of the Jobs for the job, and ends the job on exit 143
as it does for TFJob.
"""

import collections
import json
import re

from core import logs as logging

from deployment import k8s_pods
from deployment import replicas as replicas_lib
from deployment import tfjob

API_VERSION = 'jobset.x-k8s.io/v1alpha2'
JOBSET_NAME_LABEL = 'jobset.sigs.k8s.io/jobset-name'
INDEX_ANNOTATION = 'batch.kubernetes.io/job-completion-index'
INDEX_ENV = 'SLIMTRAIN_TASK_INDEX'
# What Kubernetes sets itself in each container of an Indexed Job (after the manifest's env).
COMPLETION_INDEX_ENV = 'JOB_COMPLETION_INDEX'
PERMANENT_EXIT_CODES = list(range(1, 128))
_INDEX_FIELD_PATHS = ("metadata.annotations['%s']" % INDEX_ANNOTATION,
                      "metadata.labels['%s']" % INDEX_ANNOTATION)
_INDEX_PLACEHOLDER = '"@INDEX@"'
# $$ (an escaped "$") or $(NAME), as Kubernetes expands env values, command and args.
_EXPANSION = re.compile(r'\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)')

JobSet = collections.namedtuple('JobSet', ['name', 'namespace', 'specs', 'backoff_limit', 'port',
                                           'task_env', 'tf_configs', 'addresses'])


# ----------------------------------------------------------------------------
# Writing.

def pod_address(options, role, index):
  """'<jobset>-<role>-0-<index>.<subdomain>:<port>', a pod's stable gRPC address."""
  return '%s-%s-0-%d.%s:%d' % (options.job_name, role, index, options.job_name, options.port)


def cluster(options):
  """The TF_CONFIG cluster of the job: {role: [pod addresses]}.

  The evaluator is listed too, as the TFJob operator lists it; the training
  tasks leave it out of their ClusterSpec (`deployment.cluster`).
  """
  counts = {role.name: role.replicas for role in k8s_pods.roles(options)}
  return {role: [pod_address(options, role, i) for i in range(counts[role])]
          for role in replicas_lib.TF_CONFIG_TYPES if counts.get(role)}


def _tf_config_value(options, role):
  """TF_CONFIG of `role`'s pods, its index left to `$(SLIMTRAIN_TASK_INDEX)`."""
  text = json.dumps({'cluster': cluster(options), 'environment': 'cloud',
                     'task': {'index': '@INDEX@', 'type': role}}, sort_keys=True)
  return text.replace(_INDEX_PLACEHOLDER, '$(%s)' % INDEX_ENV)


def _env_prefix(options, role):
  return [{'name': INDEX_ENV, 'valueFrom': {'fieldRef': {'fieldPath': _INDEX_FIELD_PATHS[0]}}},
          {'name': 'TF_CONFIG', 'value': _tf_config_value(options, role)}]


def pod_failure_policy(permanent_fails_job=True):
  """1-127 fail the Job; a pod Kubernetes itself disrupted is replaced uncounted.

  Args:
    permanent_fails_job: False for the evaluator, whose every failure is
      counted against its Job's backoffLimit instead (the Job controller's
      growing delay between attempts then paces a crash loop, and the JobSet
      recreates the Job alone when the limit is spent).
  """
  rules = [{'action': 'Ignore',
            'onPodConditions': [{'type': 'DisruptionTarget', 'status': 'True'}]}]
  if permanent_fails_job:
    rules.append({'action': 'FailJob',
                  'onExitCodes': {'containerName': k8s_pods.CONTAINER_NAME, 'operator': 'In',
                                  'values': PERMANENT_EXIT_CODES}})
  return {'rules': rules}


def _job_spec(options, role):
  policy = options.restart_policy
  spec = {'completionMode': 'Indexed', 'completions': role.replicas,
          'parallelism': role.replicas,
          'backoffLimit': 0 if policy == replicas_lib.NEVER else options.backoff_limit}
  if options.active_deadline_secs:
    spec['activeDeadlineSeconds'] = options.active_deadline_secs
  if policy == replicas_lib.EXIT_CODE:
    spec['podFailurePolicy'] = pod_failure_policy(role.name != 'evaluator')
  pod_restart = replicas_lib.ON_FAILURE if policy == replicas_lib.ON_FAILURE else 'Never'
  spec['template'] = {'spec': k8s_pods.pod_spec(options, role, _env_prefix(options, role.name),
                                                restart_policy=pod_restart)}
  return spec


def _failure_policy(options):
  """Rules in order: the evaluator's own failures, then permanent ones, else restart all."""
  rules = []
  if options.evaluator and options.evaluator_restart == 'alone':
    # The evaluator's Job spent its backoffLimit: recreate it alone, uncounted, so that
    # neither training nor maxRestarts feels it (a deadline still ends the job).
    rules.append({'name': 'evaluatorRestartsAlone', 'action': 'RestartJobAndIgnoreMaxRestarts',
                  'onJobFailureReasons': ['BackoffLimitExceeded'],
                  'targetReplicatedJobs': ['evaluator']})
  reasons = ['PodFailurePolicy']
  if options.active_deadline_secs:
    reasons.append('DeadlineExceeded')
  rules.append({'name': 'permanentFailure', 'action': 'FailJobSet',
                'onJobFailureReasons': reasons})
  # Any other Job failure (backoffLimit spent on retryable codes) restarts the JobSet.
  return {'maxRestarts': options.max_restarts, 'rules': rules}


def _success_policy(options):
  """Done when training is and, with one, when the evaluator evaluated the last checkpoint."""
  targets = [k8s_pods.success_role(options)]
  if options.evaluator:
    targets.append('evaluator')
  return {'operator': 'All', 'targetReplicatedJobs': targets}


def jobset_manifest(options):
  """The JobSet of `options` (a `k8s_pods.JobOptions`) as a dict ready for YAML.

  Raises:
    ValueError: naming the flag of a bad option.
  """
  k8s_pods.check_options(options, 'jobset')
  if options.restart_policy == replicas_lib.ALWAYS:
    k8s_pods.fail('restart_policy', 'cannot be Always for a JobSet: the pods of a Job must '
                  'end (use ExitCode, OnFailure or Never)', options.restart_policy)
  metadata = {'name': options.job_name, 'namespace': options.namespace}
  if options.kueue_queue:
    metadata['labels'] = {tfjob.KUEUE_QUEUE_LABEL: options.kueue_queue}
  spec = {'network': {'enableDNSHostnames': True, 'subdomain': options.job_name,
                      'publishNotReadyAddresses': True},
          'successPolicy': _success_policy(options),
          'failurePolicy': _failure_policy(options)}
  if options.ttl_secs_after_finished is not None:
    spec['ttlSecondsAfterFinished'] = options.ttl_secs_after_finished
  spec['replicatedJobs'] = [{'name': role.name, 'replicas': 1,
                             'template': {'spec': _job_spec(options, role)}}
                            for role in k8s_pods.roles(options)]
  return {'apiVersion': API_VERSION, 'kind': 'JobSet', 'metadata': metadata, 'spec': spec}


def network_policy(options):
  """The JobSet's NetworkPolicy (pods selected by the controller's jobset-name label)."""
  return k8s_pods.network_policy(options, JOBSET_NAME_LABEL)


# ----------------------------------------------------------------------------
# Reading.

_get = tfjob._get  # pylint: disable=protected-access
_fail = tfjob._fail  # pylint: disable=protected-access


def expand(text, env):
  """`text` with `$(NAME)` replaced by env[NAME] and `$$` by `$`, as Kubernetes does.

  A reference to a name not in `env` stays as written.
  """
  def replace(match):
    if match.group(0) == '$$':
      return '$'
    return env.get(match.group(1), match.group(0))
  return _EXPANSION.sub(replace, text)


def pod_env(container, index, source, path):
  """The env of one pod (completion index `index`) as Kubernetes gives it.

  Values are expanded in order (a value sees the names before it); the
  downward API's completion index is `index`; other `valueFrom` entries are
  skipped with a warning; JOB_COMPLETION_INDEX comes last, as Kubernetes adds it.
  """
  env = {}
  for i, item in enumerate(_get(container, 'env', source, path + '.env', list, [])):
    if not isinstance(item, dict) or not isinstance(item.get('name'), str):
      _fail(source, '%s.env[%d]' % (path, i), 'must be {name: ..., value: ...}', item)
    if 'valueFrom' in item:
      field = (item['valueFrom'] or {}).get('fieldRef', {}).get('fieldPath')
      if field in _INDEX_FIELD_PATHS:
        env[item['name']] = str(index)
      elif index == 0:
        logging.warning('%s: %s.env[%d] (%s) uses valueFrom, which runs only on Kubernetes; '
                        'not set locally', source, path, i, item['name'])
      continue
    env[item['name']] = expand(str(item.get('value', '')), env)
  env[COMPLETION_INDEX_ENV] = str(index)
  return env


def _local_restart_policy(job_spec, pod_spec, source, path):
  """The launcher's restart policy for a Job's pods."""
  rules = _get(_get(job_spec, 'podFailurePolicy', source, path + '.podFailurePolicy', dict, {}),
               'rules', source, path + '.podFailurePolicy.rules', list, [])
  for rule in rules:
    if not isinstance(rule, dict):
      _fail(source, path + '.podFailurePolicy.rules', 'must be a list of mappings', rule)
    codes = rule.get('onExitCodes')
    if rule.get('action') == 'FailJob' and isinstance(codes, dict):
      if codes.get('operator') == 'In' and codes.get('values') == PERMANENT_EXIT_CODES:
        return replicas_lib.EXIT_CODE
      logging.warning('%s: %s.podFailurePolicy: only FailJob on exit codes 1-127 (the '
                      'exit-code contract) is followed locally; other failures are '
                      'restarted', source, path)
  if pod_spec.get('restartPolicy') == 'Always':
    _fail(source, path + '.template.spec.restartPolicy', 'must be Never or OnFailure in a Job',
          'Always')
  return replicas_lib.ON_FAILURE


def _replicated_job(i, body, source):
  """(ReplicaSpec, backoffLimit, port, {task: env}) of spec.replicatedJobs[i]."""
  path = 'spec.replicatedJobs[%d]' % i
  if not isinstance(body, dict):
    _fail(source, path, 'must be a mapping', body)
  role = _get(body, 'name', source, path + '.name', str)
  if role not in replicas_lib.REPLICA_TYPES:
    _fail(source, path + '.name', 'must name a role (%s)' % ', '.join(
        replicas_lib.REPLICA_TYPES), role)
  if _get(body, 'replicas', source, path + '.replicas', int, 1) != 1:
    _fail(source, path + '.replicas', 'must be 1 (one Indexed Job per role) to run locally',
          body.get('replicas'))
  job_path = path + '.template.spec'
  job_spec = _get(_get(body, 'template', source, path + '.template', dict, {}), 'spec', source,
                  job_path, dict, {})
  if job_spec.get('completionMode') != 'Indexed':
    _fail(source, job_path + '.completionMode', 'must be Indexed (each pod needs its task '
          'index)', job_spec.get('completionMode'))
  replicas = _get(job_spec, 'completions', source, job_path + '.completions', int, 1)
  parallelism = _get(job_spec, 'parallelism', source, job_path + '.parallelism', int, 1)
  if parallelism != replicas:
    _fail(source, job_path + '.parallelism', 'must equal completions (%d): every task of a '
          'cluster runs at once' % replicas, parallelism)
  backoff_limit = _get(job_spec, 'backoffLimit', source, job_path + '.backoffLimit', int, 6)
  template = _get(job_spec, 'template', source, job_path + '.template', dict, {})
  container = tfjob._container(template, source, job_path + '.template')  # pylint: disable=protected-access
  container_path = job_path + '.template.spec.containers[%s]' % container.get('name')
  raw = (_get(container, 'command', source, container_path + '.command', list, []) +
         _get(container, 'args', source, container_path + '.args', list, []))
  if not raw or not all(isinstance(a, (str, int, float)) for a in raw):
    _fail(source, container_path + '.command', 'must list the program to run (the image\'s '
          'entrypoint is not known locally)', raw)
  envs = [pod_env(container, index, source, container_path) for index in range(replicas)]
  commands = [[expand(str(a), env) for a in raw] for env in envs]
  if any(command != commands[0] for command in commands):
    _fail(source, container_path + '.args', 'must be the same for every index to run locally '
          '(the index reaches the task through TF_CONFIG)', raw)
  policy = _local_restart_policy(job_spec, _get(template, 'spec', source, job_path, dict, {}),
                                 source, job_path)
  spec = replicas_lib.ReplicaSpec(role, replicas, commands[0] if commands else raw,
                                  restart_policy=policy)
  port = tfjob._container_port(container, source, container_path)  # pylint: disable=protected-access
  return spec, backoff_limit, port, {'%s:%d' % (role, i): env for i, env in enumerate(envs)}


def parse_jobset(manifest, source='<manifest>'):
  """A JobSet manifest (a parsed YAML mapping) as a `JobSet`.

  Returns:
    `JobSet(name, namespace, specs, backoff_limit, port, task_env, tf_configs,
    addresses)`: backoff_limit is the smallest of the Jobs'; task_env {'type:i':
    env} the env of each pod without TF_CONFIG; tf_configs {'type:i': TF_CONFIG
    text or None} as each pod gets it; addresses {type: ['<pod>.<subdomain>:<port>',
    ...]} the stable pod names.

  Raises:
    ValueError: naming `source` and the key that is missing or wrong.
  """
  name, namespace, spec = tfjob.manifest_header(manifest, 'JobSet', API_VERSION, source)
  jobs = _get(spec, 'replicatedJobs', source, 'spec.replicatedJobs', list, [])
  if not jobs:
    _fail(source, 'spec.replicatedJobs', 'must list at least one replicated Job', jobs)
  network = _get(spec, 'network', source, 'spec.network', dict, {})
  subdomain = _get(network, 'subdomain', source, 'spec.network.subdomain', str, name)
  parsed = [_replicated_job(i, body, source) for i, body in enumerate(jobs)]
  specs = [p[0] for p in parsed]
  replicas_lib.check_specs(specs, source='%s: spec.replicatedJobs' % source)
  ports = {p[2] for p in parsed}
  port = ports.pop() if len(ports) == 1 else k8s_pods.DEFAULT_PORT
  task_env, tf_configs = {}, {}
  for _, _, _, envs in parsed:
    for task, env in envs.items():
      tf_configs[task] = env.pop('TF_CONFIG', None)
      task_env[task] = env
  addresses = {s.replica_type: ['%s-%s-0-%d.%s:%d' % (name, s.replica_type, i, subdomain, port)
                                for i in range(s.replicas)]
               for s in specs if s.replicas and s.replica_type in replicas_lib.TF_CONFIG_TYPES}
  return JobSet(name, namespace, specs, min(p[1] for p in parsed), port, task_env, tf_configs,
                addresses)


def read_jobset(path):
  """Reads the one JobSet of a (multi-document) YAML file; other kinds are skipped.

  Raises:
    ValueError: when the file is missing or holds no, several or a bad JobSet.
  """
  return parse_jobset(tfjob.read_one_of_kind(path, 'JobSet'), source=path)


def local_addresses(job, local_cluster):
  """{stable pod address: local address} for the launcher's cluster."""
  return {name: local for t, names in job.addresses.items()
          for name, local in zip(names, local_cluster.get(t, []))}


def check_tf_configs(job, local_cluster, source):
  """Checks each pod's TF_CONFIG against the one the launcher gives that task.

  The pod addresses are mapped to the launcher's; everything else (cluster
  shape, task type and index, environment) must be what the task gets here.

  Raises:
    ValueError: naming the pod and the difference.
  """
  mapping = local_addresses(job, local_cluster)
  for task, text in sorted(job.tf_configs.items()):
    replica_type, index = task.split(':')
    expected = json.loads(replicas_lib.tf_config(local_cluster, replica_type, int(index)))
    if text is None:
      if replicas_lib.num_cluster_tasks(job.specs) > 1:
        raise ValueError('%s: pod %s has no TF_CONFIG env; its task cannot find the cluster'
                         % (source, task))
      continue
    try:
      got = json.loads(text)
    except ValueError as e:
      raise ValueError('%s: TF_CONFIG of pod %s is not JSON after expansion (%s): %s' % (
          source, task, e, text)) from None
    if isinstance(got, dict) and isinstance(got.get('cluster'), dict):
      got['cluster'] = {t: [mapping.get(a, a) for a in addresses] if isinstance(
          addresses, list) else addresses for t, addresses in got['cluster'].items()}
    if got != expected:
      raise ValueError('%s: pod %s gets TF_CONFIG %s (pod names mapped to this machine: %s); '
                       'its task is %s' % (source, task, text, json.dumps(got, sort_keys=True),
                                           json.dumps(expected, sort_keys=True)))
