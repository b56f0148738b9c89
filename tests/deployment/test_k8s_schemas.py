"""Our Kubernetes manifests against the published schemas, offline (tests/deployment/k8s_schema.py).

What `python -m deployment.tfjob` writes must pass the TFJob CRD of Kubeflow
training-operator release-1.9 (unknown fields forbidden) with every replica's
pod template passing Kubernetes 1.33's PodTemplateSpec, and its NetworkPolicy
Kubernetes' own schema; a hand-written JobSet of the shape we mean to write
(k8s_schemas/jobset_sample.yaml) must pass the JobSet v0.12.0 CRD. Broken
copies of each must be rejected at the right JSON path, or the checks prove
nothing.
"""

import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from deployment import tfjob
from tests.deployment import k8s_schema

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CONFIG = '/app/configs/ssd_shapes.config'
_IMAGE = 'registry.example.com/slimtrain:0.1'
_SAMPLE = os.path.join(k8s_schema.SCHEMA_DIR, 'jobset_sample.yaml')


def _manifest_text(**kwargs):
  options = tfjob.job_options('shapes', _IMAGE, _CONFIG,
                              kwargs.pop('output_dir', 'gs://bucket/shapes/train'), **kwargs)
  return tfjob.manifest_text(options)


def _documents(text):
  return {d['kind']: d for d in yaml.safe_load_all(text) if d}


def _pod_templates(job):
  return {t: s['template'] for t, s in job['spec']['tfReplicaSpecs'].items()}


def _sample():
  """The JobSet sample as plain nested dicts (its YAML aliases share objects when loaded)."""
  with open(_SAMPLE) as f:
    return json.loads(json.dumps(yaml.safe_load(f)))


# ----------------------------------------------------------------------------
# The schema data.

@pytest.mark.parametrize('filename, version', [
    ('tfjob_crd.json', 'v1'), ('jobset_crd.json', 'v1alpha2'),
    ('kubernetes_core.json', '1.33.0')])
def test_schema_data_is_structure_only_and_says_where_it_is_from(filename, version):
  path = os.path.join(k8s_schema.SCHEMA_DIR, filename)
  assert os.path.getsize(path) < 100 * 1024
  with open(path) as f:
    data = json.load(f)
  assert data['version'] == version
  assert data['source']

  def descriptions(schema):
    """How many documentation strings are left (a field named `description` is not one)."""
    if isinstance(schema, list):
      return sum(descriptions(item) for item in schema)
    if not isinstance(schema, dict):
      return 0
    return ('description' in schema) + sum(
        descriptions(v) if k != 'properties' else sum(descriptions(p) for p in v.values())
        for k, v in schema.items() if k != 'description')
  assert descriptions(data) == 0
  with open(os.path.join(k8s_schema.SCHEMA_DIR, 'README.md')) as f:
    assert filename in f.read()


def test_closing_keeps_preserve_unknown_fields_and_maps_open():
  schema = k8s_schema.close_objects({
      'type': 'object',
      'properties': {
          'open': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True,
                   'properties': {'a': {'type': 'string'}}},
          'labels': {'type': 'object', 'additionalProperties': {'type': 'string'}},
          'list': {'type': 'array', 'items': {'type': 'object',
                                              'properties': {'b': {'type': 'string'}}}}}})
  assert schema['additionalProperties'] is False
  assert 'additionalProperties' not in schema['properties']['open']
  assert schema['properties']['labels']['additionalProperties'] == {'type': 'string'}
  assert schema['properties']['list']['items']['additionalProperties'] is False


# ----------------------------------------------------------------------------
# What deployment.tfjob writes today.

_COMBINATIONS = {
    'defaults': dict(),  # chief, a worker, a ps and the evaluator
    'gpus': dict(namespace='ml', workers=2, ps=1, gpus_per_worker=2, cpu='4', memory='16Gi',
                 env={'GOOGLE_APPLICATION_CREDENTIALS': '/secrets/gcs/key.json'},
                 program_args=['--num_train_steps=2000']),
    'no_chief': dict(chief=False, workers=3, ps=2, cpu='500m', memory='1.5Gi'),
    'model_main_evaluator': dict(program='trainer.model_main',
                                 output_dir='gs://bucket/shapes/model', chief=False, workers=2,
                                 ps=1, evaluator=True, port=2345),
    'model_main_gpu': dict(program='trainer.model_main', output_dir='gs://bucket/shapes/model',
                           evaluator=False, gpus_per_worker=1),
    'no_evaluator': dict(evaluator=False, restart_policy='OnFailure', backoff_limit=0,
                         python='python3'),
    'storage_pvc': dict(output_dir='/mnt/shared/shapes/train', pvc='shapes-rwx',
                        mount_path='/mnt/shared'),
    'platform': dict(gpus_per_worker=1, resources={'ps': {'cpu': '2', 'memory': '4Gi'},
                                                   'evaluator': {'cpu': '1', 'gpu': 1}},
                     active_deadline_secs=7200, ttl_secs_after_finished=600,
                     priority_class='high', node_selector={'gpu': 'h100'},
                     tolerations=[{'key': 'nvidia.com/gpu', 'operator': 'Exists',
                                   'effect': 'NoSchedule'}],
                     kueue_queue='team-a', termination_grace_secs=120),
    # Issue 47: identity, volume group, memory limits, steps, no deadline, old JobSet.
    'storage_and_limits': dict(output_dir='/mnt/shared/shapes/train', pvc='shapes-rwx',
                               service_account='shapes-trainer', run_as_user=2000,
                               fs_group=3000, memory='8Gi', memory_limit='12Gi',
                               resources={'ps': {'memory': '2Gi', 'memory_limit': '3Gi'}},
                               num_train_steps=2000, active_deadline_secs=0,
                               ttl_secs_after_finished=600, kueue_queue='team-a'),
    'old_jobset_controller': dict(evaluator_restart='whole_job', restart_policy='Never'),
    'model_main_evaluator_job': dict(program='trainer.model_main',
                                     output_dir='gs://bucket/shapes/model',
                                     program_args=['--num_train_steps=500']),
}


def _job_templates(job):
  """{role: pod template} of a TFJob, or {role: Job template} of a JobSet."""
  if job['kind'] == 'TFJob':
    return _pod_templates(job)
  return {r['name']: r['template'] for r in job['spec']['replicatedJobs']}


@pytest.mark.parametrize('kind', ['tfjob', 'jobset'])
@pytest.mark.parametrize('name', sorted(_COMBINATIONS))
def test_written_manifests_pass_the_schemas(name, kind):
  kwargs = dict(_COMBINATIONS[name])
  options = tfjob.job_options('shapes', _IMAGE, _CONFIG,
                              kwargs.pop('output_dir', 'gs://bucket/shapes/train'), **kwargs)
  text = tfjob.manifest_text(options, kind=kind)
  kinds = k8s_schema.validate_documents(text)
  # The NetworkPolicy first; a TFJob's evaluator is a batch/v1 Job after it.
  evaluator_job = ['Job'] if kind == 'tfjob' and options.evaluator else []
  assert kinds == ['NetworkPolicy', {'tfjob': 'TFJob', 'jobset': 'JobSet'}[kind]] + (
      evaluator_job)
  documents = _documents(text)
  job = documents[kinds[1]]
  if evaluator_job:
    k8s_schema.validate_core(documents['Job'])
    k8s_schema.validate_core(documents['Job']['spec']['template'], kind='PodTemplateSpec')
  (k8s_schema.validate_tfjob if kind == 'tfjob' else k8s_schema.validate_jobset)(job)
  k8s_schema.validate_core(documents['NetworkPolicy'])
  templates = _job_templates(job)
  assert templates
  for template in templates.values():
    if kind == 'jobset':
      k8s_schema.validate_core(template, kind='JobTemplateSpec')
      template = template['spec']['template']
    k8s_schema.validate_core(template, kind='PodTemplateSpec')


def test_a_broken_generated_jobset_is_rejected():
  # The validator is no formality for the writer's own output either.
  job = tfjob.manifests(tfjob.job_options('shapes', _IMAGE, _CONFIG, 'gs://b/t'),
                        kind='jobset')[1]
  job['spec']['replicatedJobs'][0]['template']['spec']['completionMod'] = 'Indexed'
  with pytest.raises(k8s_schema.SchemaError, match=r'completionMod'):
    k8s_schema.validate_jobset(job)


def _run_writer(tmp_path, *flags):
  """Runs `python -m deployment.tfjob` with `flags`; returns the file's text."""
  output = str(tmp_path / 'job.yaml')
  subprocess.run([sys.executable, '-m', 'deployment.tfjob', '--output=' + output, *flags],
                 cwd=_ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                 timeout=300)
  with open(output) as f:
    return f.read()


def test_command_line_manifests_pass_the_schemas(tmp_path):
  # The worked example of docs/kubernetes.md.
  text = _run_writer(
      tmp_path, '--job_name=shapes', '--namespace=ml', '--image=' + _IMAGE,
      '--pipeline_config_path=gs://my-bucket/shapes/pipeline.config',
      '--train_dir=gs://my-bucket/shapes/train', '--workers=2', '--ps=1',
      '--gpus_per_worker=2', '--cpu=4', '--memory=16Gi', '--', '--num_train_steps=2000')
  assert k8s_schema.validate_documents(text) == ['NetworkPolicy', 'TFJob', 'Job']
  job = _documents(text)['TFJob']
  assert job['spec']['tfReplicaSpecs']['Worker']['replicas'] == 2
  for template in _pod_templates(job).values():
    k8s_schema.validate_core(template, kind='PodTemplateSpec')


def test_jobset_worked_example_passes_the_schemas(tmp_path):
  # The JobSet worked example of docs/kubernetes.md, flag for flag.
  text = _run_writer(
      tmp_path, '--kind=jobset', '--job_name=shapes', '--namespace=ml', '--image=' + _IMAGE,
      '--pipeline_config_path=gs://my-bucket/shapes/pipeline.config',
      '--pvc=shapes-rwx', '--mount_path=/mnt/shared', '--train_dir=/mnt/shared/shapes/train',
      '--workers=2', '--ps=1', '--gpus_per_worker=2', '--cpu=4', '--memory=16Gi',
      '--resources=ps:cpu=2,memory=8Gi', '--toleration=nvidia.com/gpu:NoSchedule',
      '--', '--num_train_steps=2000')
  assert k8s_schema.validate_documents(text) == ['NetworkPolicy', 'JobSet']
  job = _documents(text)['JobSet']
  templates = _job_templates(job)
  assert templates['worker']['spec']['parallelism'] == 2
  for template in templates.values():
    k8s_schema.validate_core(template, kind='JobTemplateSpec')
    k8s_schema.validate_core(template['spec']['template'], kind='PodTemplateSpec')


def test_docs_jobset_tf_config_excerpt_is_what_is_written():
  # docs/kubernetes.md shows worker 1's env of its JobSet example; it must be the real one.
  with open(os.path.join(_ROOT, 'docs', 'kubernetes.md')) as f:
    docs = f.read()
  start = docs.index('       env:\n       - name: SLIMTRAIN_TASK_INDEX')
  end = docs.index('\n\n', start)
  excerpt = yaml.safe_load(textwrap.dedent(docs[start:end]))['env']
  options = tfjob.job_options(
      'shapes', _IMAGE, 'gs://my-bucket/shapes/pipeline.config', '/mnt/shared/shapes/train',
      namespace='ml', pvc='shapes-rwx', mount_path='/mnt/shared', workers=2, ps=1,
      gpus_per_worker=2, cpu='4', memory='16Gi', resources={'ps': {'cpu': '2', 'memory': '8Gi'}},
      program_args=['--num_train_steps=2000'])
  job = _documents(tfjob.manifest_text(options, 'jobset'))['JobSet']
  worker = _job_templates(job)['worker']['spec']['template']['spec']['containers'][0]
  assert excerpt == worker['env'][:2]
  assert '"evaluator": ["shapes-evaluator-0-0.shapes:2222"]' in excerpt[1]['value']

# ----------------------------------------------------------------------------
# The JobSet we mean to write.

def test_jobset_sample_passes_the_schemas():
  with open(_SAMPLE) as f:
    assert k8s_schema.validate_documents(f.read()) == ['JobSet']
  jobset = _sample()
  k8s_schema.validate_jobset(jobset)
  spec = jobset['spec']
  # It is the sample it claims to be: one Indexed Job per role, stable DNS names, the exit
  # codes and the chief's completion mapped onto Kubernetes' own mechanisms.
  jobs = {r['name']: r['template'] for r in spec['replicatedJobs']}
  assert list(jobs) == ['chief', 'worker', 'ps', 'evaluator']
  assert spec['network']['enableDNSHostnames'] is True
  assert spec['successPolicy'] == {'operator': 'All', 'targetReplicatedJobs': ['chief']}
  assert spec['failurePolicy']['maxRestarts'] == 3
  for job in jobs.values():
    k8s_schema.validate_core(job, kind='JobTemplateSpec')
    k8s_schema.validate_core(job['spec']['template'], kind='PodTemplateSpec')
    assert job['spec']['completionMode'] == 'Indexed'
    fail_job = [r for r in job['spec']['podFailurePolicy']['rules'] if r['action'] == 'FailJob']
    assert fail_job[0]['onExitCodes']['values'] == list(range(1, 128))
    pod = job['spec']['template']['spec']
    assert pod['restartPolicy'] == 'Never'  # what a podFailurePolicy requires
    assert pod['automountServiceAccountToken'] is False
    assert pod['securityContext']['seccompProfile'] == {'type': 'RuntimeDefault'}
    container = pod['containers'][0]
    assert container['securityContext']['capabilities'] == {'drop': ['ALL']}
    assert [e['name'] for e in container['env']][-1] == 'TF_CONFIG'


_HEADLESS_SERVICE = {
    'apiVersion': 'v1', 'kind': 'Service',
    'metadata': {'name': 'shapes', 'namespace': 'ml'},
    'spec': {'clusterIP': 'None', 'publishNotReadyAddresses': True,
             'selector': {'jobset.sigs.k8s.io/jobset-name': 'shapes'},
             'ports': [{'name': 'tfjob-port', 'port': 2222, 'targetPort': 'tfjob-port',
                        'protocol': 'TCP'}]}}


def test_headless_service_passes_the_core_schema():
  k8s_schema.validate_core(copy.deepcopy(_HEADLESS_SERVICE))


# ----------------------------------------------------------------------------
# Broken manifests must be rejected, at the field at fault.

def _tfjob():
  return _documents(_manifest_text(gpus_per_worker=2, cpu='4', memory='16Gi',
                                   env={'A': '1'}))['TFJob']


def _network_policy():
  return _documents(_manifest_text())['NetworkPolicy']


def _pod_template():
  return _pod_templates(_tfjob())['Worker']


def _worker(m):
  return m['spec']['tfReplicaSpecs']['Worker']


def _container(m):
  return _worker(m)['template']['spec']['containers'][0]


def _chief_job(m):
  return m['spec']['replicatedJobs'][0]['template']


_W = '$.spec.tfReplicaSpecs.Worker'
_WC = _W + '.template.spec.containers[0]'
_CJ = '$.spec.replicatedJobs[0].template'

_BROKEN = [
    # TFJob, the CRD's own fields.
    ('tfjob', _tfjob, lambda m: m['spec']['runPolicy'].update(backofLimit=3),
     '$.spec.runPolicy.backofLimit', "unknown field 'backofLimit'"),
    ('tfjob', _tfjob, lambda m: _worker(m).update(replicas='2'),
     _W + '.replicas', "'2' is not of type 'integer'"),
    ('tfjob', _tfjob, lambda m: m['spec'].pop('tfReplicaSpecs'),
     '$.spec.tfReplicaSpecs', "required field 'tfReplicaSpecs' is missing"),
    ('tfjob', _tfjob, lambda m: m['spec']['runPolicy'].update(backoffLimit=2 ** 31),
     '$.spec.runPolicy.backoffLimit', 'does not fit in int32'),
    ('tfjob', _tfjob, lambda m: m.update(apiVersion='kubeflow.org/v1beta2'),
     '$.apiVersion', 'is not one of'),
    ('tfjob', _tfjob, lambda m: m['metadata'].update(nmae='x'),
     '$.metadata.nmae', "unknown field 'nmae'"),
    # TFJob, inside a replica's pod template.
    ('tfjob', _tfjob, lambda m: _container(m).update(imagePullPolice='Always'),
     _WC + '.imagePullPolice', "unknown field 'imagePullPolice'"),
    ('tfjob', _tfjob, lambda m: _container(m).pop('name'),
     _WC + '.name', "required field 'name' is missing"),
    ('tfjob', _tfjob, lambda m: _container(m)['env'].append({'name': 'A', 'value': '2'}),
     _WC + '.env[1]', 'duplicate entry'),
    ('tfjob', _tfjob, lambda m: _container(m)['resources']['requests'].update(memory='16GB'),
     _WC + '.resources.requests.memory', "'16GB' is not a Kubernetes quantity"),
    ('tfjob', _tfjob, lambda m: _container(m)['resources']['limits'].update(
        {'nvidia.com/gpu': '2 GPUs'}),
     _WC + '.resources.limits["nvidia.com/gpu"]', 'is not a Kubernetes quantity'),
    ('tfjob', _tfjob, lambda m: _worker(m)['template'].update(metadata={'generateName': 'x'}),
     _W + '.template.metadata.generateName', "unknown field 'generateName'"),
    # JobSet.
    ('jobset', _sample, lambda m: m['spec']['replicatedJobs'][0].update(replica=2),
     '$.spec.replicatedJobs[0].replica', "unknown field 'replica'"),
    ('jobset', _sample, lambda m: m['spec']['network'].update(enableDNSHostnames='yes'),
     '$.spec.network.enableDNSHostnames', "'yes' is not of type 'boolean'"),
    ('jobset', _sample, lambda m: m['spec']['successPolicy'].update(operator='Chief'),
     '$.spec.successPolicy.operator', "'Chief' is not one of ['All', 'Any']"),
    ('jobset', _sample, lambda m: m['spec']['successPolicy'].pop('operator'),
     '$.spec.successPolicy.operator', "required field 'operator' is missing"),
    ('jobset', _sample, lambda m: m['spec']['replicatedJobs'][0].pop('template'),
     '$.spec.replicatedJobs[0].template', "required field 'template' is missing"),
    ('jobset', _sample, lambda m: m['spec']['replicatedJobs'][1].update(name='chief'),
     '$.spec.replicatedJobs[1]', 'duplicate entry'),
    ('jobset', _sample, lambda m: m['spec']['failurePolicy'].update(maxRestarts='3'),
     '$.spec.failurePolicy.maxRestarts', "'3' is not of type 'integer'"),
    ('jobset', _sample, lambda m: _chief_job(m)['spec'].update(completionMod='Indexed'),
     _CJ + '.spec.completionMod', "unknown field 'completionMod'"),
    ('jobset', _sample, lambda m: _chief_job(m)['spec']['podFailurePolicy']['rules'][1][
        'onExitCodes'].update(values=['1']),
     _CJ + '.spec.podFailurePolicy.rules[1].onExitCodes.values[0]',
     "'1' is not of type 'integer'"),
    ('jobset', _sample, lambda m: _chief_job(m)['spec']['template']['spec'].update(
        restartpolicy='Never'),
     _CJ + '.spec.template.spec.restartpolicy', "unknown field 'restartpolicy'"),
    ('jobset', _sample, lambda m: m.update(kind='TFJob'), '$.kind', 'is not one of'),
    # NetworkPolicy.
    ('core', _network_policy, lambda m: m['spec'].update(podSelectr={}),
     '$.spec.podSelectr', "unknown field 'podSelectr'"),
    ('core', _network_policy, lambda m: m['spec']['ingress'][0]['ports'][0].update(port=2.5),
     '$.spec.ingress[0].ports[0].port', "2.5 is none of: integer, string, null"),
    ('core', _network_policy, lambda m: m['spec'].pop('podSelector'),
     '$.spec.podSelector', "required field 'podSelector' is missing"),
    ('core', _network_policy, lambda m: m.update(apiVersion='extensions/v1beta1'),
     '$.apiVersion', 'is not one of'),
    # Service.
    ('core', lambda: copy.deepcopy(_HEADLESS_SERVICE),
     lambda m: m['spec'].update(clusterIp='None'), '$.spec.clusterIp',
     "unknown field 'clusterIp'"),
    ('core', lambda: copy.deepcopy(_HEADLESS_SERVICE),
     lambda m: m['spec']['ports'][0].update(port='2222'), '$.spec.ports[0].port',
     "'2222' is not of type 'integer'"),
    ('core', lambda: copy.deepcopy(_HEADLESS_SERVICE),
     lambda m: m['spec']['ports'][0].pop('port'), '$.spec.ports[0].port',
     "required field 'port' is missing"),
    # A pod template on its own.
    ('pod_template', _pod_template, lambda m: m['spec'].update(securityContex={}),
     '$.spec.securityContex', "unknown field 'securityContex'"),
    ('pod_template', _pod_template,
     lambda m: m['spec']['containers'][0]['env'][0].update(value=1),
     '$.spec.containers[0].env[0].value', "1 is not of type 'string', 'null'"),
    ('pod_template', _pod_template,
     lambda m: m['spec']['containers'][0]['resources']['requests'].update(memory='16GB'),
     '$.spec.containers[0].resources.requests.memory', "'16GB' is not a Kubernetes quantity"),
    ('pod_template', _pod_template, lambda m: m['spec'].pop('containers'),
     '$.spec.containers', "required field 'containers' is missing"),
    ('pod_template', _pod_template,
     lambda m: m['spec']['containers'][0]['ports'][0].update(containerPort=2 ** 32),
     '$.spec.containers[0].ports[0].containerPort', 'does not fit in int32'),
]

_CHECKS = {
    'tfjob': k8s_schema.validate_tfjob,
    'jobset': k8s_schema.validate_jobset,
    'core': k8s_schema.validate_core,
    'pod_template': lambda m: k8s_schema.validate_core(m, kind='PodTemplateSpec'),
}


@pytest.mark.parametrize('check, make, edit, path, message', _BROKEN,
                         ids=['%s:%s' % (c[0], c[3]) for c in _BROKEN])
def test_broken_manifests_are_rejected_at_the_field(check, make, edit, path, message):
  manifest = make()
  _CHECKS[check](copy.deepcopy(manifest))  # the unbroken one passes
  edit(manifest)
  with pytest.raises(k8s_schema.SchemaError) as raised:
    _CHECKS[check](manifest)
  assert raised.value.path == path, str(raised.value)
  assert message in raised.value.message, str(raised.value)


def test_each_schema_rejects_an_unknown_field_a_wrong_type_and_a_missing_field():
  covered = {}
  for check, _, _, _, message in _BROKEN:
    kind = ('unknown' if 'unknown field' in message else
            'missing' if 'is missing' in message else
            'type' if 'of type' in message or 'none of' in message else None)
    covered.setdefault(check, set()).add(kind)
  for check in _CHECKS:
    assert {'unknown', 'missing', 'type'} <= covered[check], check


# ----------------------------------------------------------------------------
# Kubernetes' formats.

@pytest.mark.parametrize('value, ok', [
    ('4', True), (4, True), ('500m', True), ('1.5', True), ('16Gi', True), ('1e3', True),
    ('+2', True), ('.5', True), ('16GB', False), ('1.5.2', False), ('', False),
    ('4 cpus', False), (True, False), ([4], False),
])
def test_quantities(value, ok):
  template = _pod_template()
  template['spec']['containers'][0]['resources']['requests']['cpu'] = value
  job = _tfjob()
  _container(job)['resources']['requests']['cpu'] = value
  for check in (lambda: k8s_schema.validate_core(template, kind='PodTemplateSpec'),
                lambda: k8s_schema.validate_tfjob(job)):
    if ok:
      check()
    else:
      with pytest.raises(k8s_schema.SchemaError, match='resources.requests.cpu'):
        check()


@pytest.mark.parametrize('value, ok', [
    (2222, True), ('tfjob-port', True), (None, True), (2.5, False), (True, False),
    ({'port': 1}, False)])
def test_int_or_string(value, ok):
  policy = _network_policy()
  policy['spec']['ingress'][0]['ports'][0]['port'] = value
  if ok:
    k8s_schema.validate_core(policy)
  else:
    with pytest.raises(k8s_schema.SchemaError, match=r'ingress\[0\]\.ports\[0\]\.port'):
      k8s_schema.validate_core(policy)


def test_documents_name_the_document_and_unknown_kinds_are_refused():
  text = _manifest_text().replace('cleanPodPolicy:', 'cleanupPolicy:')
  with pytest.raises(k8s_schema.SchemaError,
                     match=r"document 1 \(TFJob\) TFJob v1: \$\.spec\.runPolicy\.cleanupPolicy: "
                     "unknown field 'cleanupPolicy'"):
    k8s_schema.validate_documents(text)
  with pytest.raises(ValueError, match="no Kubernetes schema for kind 'Deployment' here "
                     r'\(known: ConfigMap, Job, '):
    k8s_schema.validate_core({'apiVersion': 'apps/v1', 'kind': 'Deployment'})


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
