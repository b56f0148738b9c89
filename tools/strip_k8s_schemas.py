r"""Regenerates the Kubernetes schema test data under tests/deployment/k8s_schemas/.

The schema tests (tests/deployment/k8s_schema.py) check our manifests against
the schemas a cluster enforces, offline. This script turns the published
schemas into compact test data: the `openAPIV3Schema` of a CRD (TFJob,
JobSet), and the closure of the Kubernetes definitions our manifests use
(pod templates, Jobs, Service, NetworkPolicy, ...) from the JSON schemas the
`kubernetes-validate` package ships. Every `description` is dropped (the
structure stays as published; the test-time rules, e.g. "unknown fields are
forbidden", are applied by the validator, not baked in here).

    git -C training-operator show release-1.9:manifests/base/crds/kubeflow.org_tfjobs.yaml \
        > /tmp/tfjobs.yaml
    git -C jobset show v0.12.0:config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml \
        > /tmp/jobsets.yaml
    python -m tools.strip_k8s_schemas --tfjob_crd=/tmp/tfjobs.yaml \
        --tfjob_source='kubeflow/training-operator release-1.9 (078ec30) ...' \
        --jobset_crd=/tmp/jobsets.yaml --jobset_source='kubernetes-sigs/jobset v0.12.0 ...' \
        --kubernetes_version=1.33.0 --output_dir=tests/deployment/k8s_schemas

Each flag pair is optional: give only the schemas to refresh. The output is
deterministic (sorted keys), so a regeneration from the same sources leaves
the files unchanged.
"""

import json
import os

from absl import app
from absl import flags
import yaml

# The definitions whose closure the core data holds (JSON kind -> definition).
CORE_ROOTS = {
    'ConfigMap': 'io.k8s.api.core.v1.ConfigMap',
    'Job': 'io.k8s.api.batch.v1.Job',
    'JobTemplateSpec': 'io.k8s.api.batch.v1.JobTemplateSpec',
    'NetworkPolicy': 'io.k8s.api.networking.v1.NetworkPolicy',
    'ObjectMeta': 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta',
    'PersistentVolumeClaim': 'io.k8s.api.core.v1.PersistentVolumeClaim',
    'PodTemplateSpec': 'io.k8s.api.core.v1.PodTemplateSpec',
    'Service': 'io.k8s.api.core.v1.Service',
}

FLAGS = flags.FLAGS


def strip_descriptions(schema):
  """`schema` without any `description` key, at any depth.

  A field that is itself named `description` (a key of some `properties`)
  stays: only the documentation strings go.
  """
  if isinstance(schema, list):
    return [strip_descriptions(item) for item in schema]
  if not isinstance(schema, dict):
    return schema
  stripped = {}
  for key, value in schema.items():
    if key == 'description':
      continue
    if key == 'properties' and isinstance(value, dict):
      stripped[key] = {name: strip_descriptions(sub) for name, sub in value.items()}
    else:
      stripped[key] = strip_descriptions(value)
  return stripped


def crd_schema(crd_text, version=None):
  """(version name, openAPIV3Schema) of a CRD's served storage version (or `version`).

  Raises:
    ValueError: when the text is not a CRD or lacks that version.
  """
  crd = yaml.safe_load(crd_text)
  if not isinstance(crd, dict) or crd.get('kind') != 'CustomResourceDefinition':
    raise ValueError('not a CustomResourceDefinition (kind %r)' % (
        crd.get('kind') if isinstance(crd, dict) else crd))
  versions = crd['spec']['versions']
  for entry in versions:
    if (entry['name'] == version) if version else entry.get('storage'):
      return entry['name'], entry['schema']['openAPIV3Schema']
  raise ValueError('CRD %s has no version %s (has %s)' % (
      crd['metadata']['name'], version or '<storage>', [v['name'] for v in versions]))


def _refs(schema):
  """Names of the definitions `schema` refers to (`#/$defs/NAME`), at any depth."""
  if isinstance(schema, dict):
    for key, value in schema.items():
      if key == '$ref' and isinstance(value, str):
        yield value.rsplit('/', 1)[-1]
      else:
        yield from _refs(value)
  elif isinstance(schema, list):
    for item in schema:
      yield from _refs(item)


def core_closure(definitions, roots):
  """{name: definition} of `roots` and every definition they reach by `$ref`."""
  closure = {}
  pending = list(roots)
  while pending:
    name = pending.pop()
    if name in closure:
      continue
    closure[name] = definitions[name]
    pending.extend(_refs(definitions[name]))
  return closure


def kubernetes_validate_definitions(version):
  """The `$defs` of kubernetes-validate's strict schemas for Kubernetes `version`."""
  # Imported here: only a regeneration of the core data needs the package.
  import kubernetes_validate  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(kubernetes_validate.__file__), 'kubernetes-json-schema',
                      'v%s-local-strict' % version, '_definitions.json')
  if not os.path.exists(path):
    raise ValueError('kubernetes-validate %s ships no schemas for Kubernetes %s (%s)' % (
        kubernetes_validate.__version__, version, path))
  with open(path) as f:
    return json.load(f)['$defs'], kubernetes_validate.__version__


def write_json(path, data):
  """Writes `data` as compact, key-sorted JSON plus a final newline; returns its size."""
  text = json.dumps(data, sort_keys=True, separators=(',', ':')) + '\n'
  with open(path, 'w') as f:
    f.write(text)
  return len(text)


def _write_crd(crd_path, source, output):
  with open(crd_path) as f:
    version, schema = crd_schema(f.read())
  size = write_json(output, {'source': source, 'version': version,
                             'schema': strip_descriptions(schema)})
  print('%s: %s, %d bytes' % (output, version, size))


def main(argv):
  del argv
  out = FLAGS.output_dir
  if FLAGS.tfjob_crd:
    _write_crd(FLAGS.tfjob_crd, FLAGS.tfjob_source, os.path.join(out, 'tfjob_crd.json'))
  if FLAGS.jobset_crd:
    _write_crd(FLAGS.jobset_crd, FLAGS.jobset_source, os.path.join(out, 'jobset_crd.json'))
  if FLAGS.kubernetes_version:
    definitions, package_version = kubernetes_validate_definitions(FLAGS.kubernetes_version)
    closure = core_closure(definitions, CORE_ROOTS.values())
    output = os.path.join(out, 'kubernetes_core.json')
    size = write_json(output, {
        'source': 'kubernetes-validate %s, kubernetes-json-schema/v%s-local-strict/'
                  '_definitions.json' % (package_version, FLAGS.kubernetes_version),
        'version': FLAGS.kubernetes_version, 'roots': CORE_ROOTS,
        '$defs': strip_descriptions(closure)})
    print('%s: %d definitions, %d bytes' % (output, len(closure), size))


if __name__ == '__main__':
  flags.DEFINE_string('tfjob_crd', None, 'kubeflow.org_tfjobs.yaml to read.')
  flags.DEFINE_string('tfjob_source', '', 'Where it came from (repository, tag, commit, path).')
  flags.DEFINE_string('jobset_crd', None, 'jobset.x-k8s.io_jobsets.yaml to read.')
  flags.DEFINE_string('jobset_source', '', 'Where it came from (repository, tag, commit, '
                      'path).')
  flags.DEFINE_string('kubernetes_version', None, 'Kubernetes version (e.g. 1.33.0) whose '
                      'definitions to take from the installed kubernetes-validate.')
  flags.DEFINE_string('output_dir', 'tests/deployment/k8s_schemas', 'Where to write.')
  app.run(main)
