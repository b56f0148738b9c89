r"""Checks Kubernetes manifests against the schemas a cluster enforces, offline.

A manifest that passes here has the shape the API server accepts on submit:
the Kubeflow TFJob CRD of training-operator release-1.9, the JobSet
v1alpha2 CRD of kubernetes-sigs/jobset v0.12.0, and the Kubernetes 1.33
definitions of the core objects (pod and Job templates, Service,
NetworkPolicy, ...). The schemas are test data beside this file
(k8s_schemas/, README.md there says where each comes from and how to
regenerate it); nothing is fetched.

    from tests.deployment import k8s_schema

    k8s_schema.validate_tfjob(tfjob_dict)        # kind TFJob
    k8s_schema.validate_jobset(jobset_dict)      # kind JobSet
    k8s_schema.validate_core(service_dict)       # by its `kind`
    k8s_schema.validate_core(template, kind='PodTemplateSpec')
    k8s_schema.validate_documents(yaml_text)     # every document, by kind
    # Each raises k8s_schema.SchemaError('<schema>: $.spec.x[0].y: <what is wrong>').

What is checked, beyond plain JSON Schema:

* Unknown fields are errors. The API server silently drops (prunes) a field
  a CRD does not declare, so a misspelt field "works" and then does nothing;
  here every object schema with `properties` is closed, unless it says
  `x-kubernetes-preserve-unknown-fields`.
* The pod template inside each TFJob replica and the Job template inside each
  JobSet replicated job are checked twice: against the CRD's copy and against
  the Kubernetes definition, which is what the operator's pods really get.
  The top-level `metadata` (only `type: object` in a CRD) is checked as
  Kubernetes' ObjectMeta.
* Kubernetes formats: int-or-string accepts an integer or a string (2.5 or
  `true` are refused), a quantity is a number or a string like `500m`, `16Gi`
  or `1e3` (not `16GB`), and `int32`/`int64` fields must fit their width.
  As everywhere in the Kubernetes schemas, an optional field may be null.
* In CRDs, list entries must be unique where the schema makes the list a set
  or a map (`x-kubernetes-list-type`), as the API server enforces for custom
  resources (two env entries of one name make a TFJob be refused). Built-in
  objects are left to the server's own code there, which is laxer.

Not checked: CEL rules (`x-kubernetes-validations`, in these CRDs only about
updates and one JobSet combination we do not write) and the operators' own
webhooks (e.g. the TFJob replica type names, DNS-1035 job names).
"""

import copy
import functools
import json
import os
import re

import jsonschema
import yaml

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'k8s_schemas')

# A resource.Quantity as Kubernetes parses it: a decimal number with an
# optional binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent suffix.
QUANTITY_PATTERN = (r'^[+-]?(\d+(\.\d*)?|\.\d+)'
                    r'(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(\d+(\.\d*)?|\.\d+)))?$')

_IDENTIFIER = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta'


class SchemaError(ValueError):
  """A manifest the schema rejects; `path` is the JSON path of the offending value."""

  def __init__(self, schema_name, path, message):
    super().__init__('%s: %s: %s' % (schema_name, path, message))
    self.schema_name = schema_name
    self.path = path
    self.message = message


# ----------------------------------------------------------------------------
# Loading the schemas and applying the test-time rules.

def _load(name):
  with open(os.path.join(SCHEMA_DIR, name)) as f:
    return json.load(f)


def close_objects(schema):
  """`schema` (in place) with every object that lists `properties` closed to others.

  Returns:
    `schema`, whose objects with `properties` and neither `additionalProperties`
    nor `x-kubernetes-preserve-unknown-fields` now say `additionalProperties: false`.
  """
  if isinstance(schema, list):
    for item in schema:
      close_objects(item)
    return schema
  if not isinstance(schema, dict):
    return schema
  if ('properties' in schema and 'additionalProperties' not in schema and
      not schema.get('x-kubernetes-preserve-unknown-fields')):
    schema['additionalProperties'] = False
  for key, value in schema.items():
    if key == 'properties':
      for sub in value.values():
        close_objects(sub)
    elif key in ('items', 'additionalProperties', 'allOf', 'anyOf', 'oneOf', 'not'):
      close_objects(value)
  return schema


def _drop_list_types(schema):
  """`schema` (in place) without `x-kubernetes-list-type`: built-in kinds keep duplicates."""
  if isinstance(schema, dict):
    schema.pop('x-kubernetes-list-type', None)
    for value in schema.values():
      _drop_list_types(value)
  elif isinstance(schema, list):
    for item in schema:
      _drop_list_types(item)
  return schema


@functools.lru_cache(maxsize=None)
def core_data():
  """(definitions, {kind: definition name}, version) of the Kubernetes core schemas.

  The definitions are closed (see `close_objects`), int-or-string and quantity
  get their exact Kubernetes forms (kubernetes-validate writes both as "a
  string or a number, or null", which lets `16GB` through), and list types are
  dropped (see the module docstring).
  """
  data = _load('kubernetes_core.json')
  definitions = _drop_list_types(close_objects(data['$defs']))
  # null stays allowed, as for every optional field of these schemas: the
  # server reads it as "not set".
  definitions['io.k8s.apimachinery.pkg.util.intstr.IntOrString'] = {
      'anyOf': [{'type': 'integer'}, {'type': 'string'}, {'type': 'null'}]}
  definitions['io.k8s.apimachinery.pkg.api.resource.Quantity'] = {
      'anyOf': [{'type': 'number'}, {'type': 'string', 'pattern': QUANTITY_PATTERN},
                {'type': 'null'}]}
  return definitions, data['roots'], data['version']


def _require_kind(schema, api_version, kind):
  """The root of a resource schema: apiVersion and kind given and exactly these."""
  properties = schema['properties']
  properties['apiVersion'] = dict(properties.get('apiVersion', {}), enum=[api_version])
  properties['kind'] = dict(properties.get('kind', {}), enum=[kind])
  schema['required'] = sorted(set(schema.get('required', [])) | {'apiVersion', 'kind'})
  return schema


def _ref(definition):
  return {'$ref': '#/$defs/%s' % definition}


def _also(schema, definition):
  """`schema` and the core `definition` both."""
  return {'allOf': [schema, _ref(definition)]}


@functools.lru_cache(maxsize=None)
def _crd_schema(filename, api_version, kind, embed_path, embedded):
  """The validation schema of a CRD with the core definitions embedded.

  Args:
    filename: the CRD data in k8s_schemas/.
    api_version, kind: what the manifest's own apiVersion and kind must be.
    embed_path: keys leading from the schema root to the embedded template
      (e.g. a replica's pod template).
    embedded: the core definition that template must also satisfy.

  Returns:
    (validator, 'kind version' for messages).
  """
  data = _load(filename)
  schema = close_objects(data['schema'])
  node = schema
  for key in embed_path[:-1]:
    node = node[key]
  node[embed_path[-1]] = _also(node[embed_path[-1]], embedded)
  schema['properties']['metadata'] = _ref(_OBJECT_META)
  _require_kind(schema, api_version, kind)
  schema['required'] = sorted(set(schema['required']) | {'metadata', 'spec'})
  definitions, _, _ = core_data()
  schema['$defs'] = definitions
  return _validator(schema), '%s %s' % (kind, data['version'])


# ----------------------------------------------------------------------------
# The validator: JSON Schema 2020-12 plus Kubernetes' formats and list types.

def _fits(bits):
  def check(value):
    return not isinstance(value, int) or -2 ** (bits - 1) <= value < 2 ** (bits - 1)
  return check


_FORMATS = jsonschema.FormatChecker(formats=())
_FORMATS.checks('int32')(_fits(32))
_FORMATS.checks('int64')(_fits(64))


def _entry_key(item, keys, item_schema):
  """The values of a list-map entry's key fields, defaults filled in as the server does."""
  properties = item_schema.get('properties', {}) if isinstance(item_schema, dict) else {}
  return tuple(item.get(k, properties.get(k, {}).get('default')) for k in keys)


def _list_type(validator, list_type, instance, schema):
  """Duplicate entries of a `set` or `map` list (custom resources only)."""
  del validator
  if not isinstance(instance, list) or list_type not in ('set', 'map'):
    return
  seen = {}
  for i, item in enumerate(instance):
    if list_type == 'set':
      key = json.dumps(item, sort_keys=True)
    elif isinstance(item, dict):
      key = _entry_key(item, schema.get('x-kubernetes-list-map-keys', []),
                       schema.get('items'))
    else:
      continue
    if key in seen:
      yield jsonschema.ValidationError(
          'duplicate entry: [%d] has the same %s as [%d]' % (
              i, 'value' if list_type == 'set' else 'keys %s=%s' % (
                  schema.get('x-kubernetes-list-map-keys'), list(key)), seen[key]),
          path=[i])
    else:
      seen[key] = i


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {'x-kubernetes-list-type': _list_type})


def _validator(schema):
  return _Validator(schema, format_checker=_FORMATS)


def json_path(path):
  """'$.spec.containers[0].resources.limits["nvidia.com/gpu"]' for a key sequence."""
  text = '$'
  for key in path:
    if isinstance(key, int):
      text += '[%d]' % key
    elif _IDENTIFIER.match(key):
      text += '.' + key
    else:
      text += '[%s]' % json.dumps(key)
  return text


def _describe(error):
  """(path keys, message) of a jsonschema error, pointing at the field at fault."""
  path = list(error.absolute_path)
  if error.validator == 'additionalProperties' and error.validator_value is False:
    unknown = sorted(set(error.instance) - set(error.schema.get('properties', {})))
    if unknown:
      return path + [unknown[0]], 'unknown field %r (known: %s)' % (
          unknown[0], ', '.join(sorted(error.schema.get('properties', {}))))
  if error.validator == 'required':
    missing = [k for k in error.validator_value if k not in error.instance]
    if missing:
      return path + [missing[0]], 'required field %r is missing' % missing[0]
  if error.validator == 'pattern' and '[KMGTPE]i' in error.validator_value:
    return path, '%r is not a Kubernetes quantity (like 4, 500m, 1.5, 16Gi, 1e3)' % (
        error.instance,)
  if error.validator == 'format':
    return path, '%r does not fit in %s' % (error.instance, error.validator_value)
  if error.validator in ('anyOf', 'oneOf'):
    types = [b['type'] for b in error.validator_value if isinstance(b, dict) and 'type' in b]
    if len(types) == len(error.validator_value):
      return path, '%r is none of: %s' % (error.instance, ', '.join(map(str, types)))
  return path, error.message


def _rank(error):
  """Sort key of errors: shallower first, then by path (indexes in order), anyOf last."""
  path = tuple((0, key, '') if isinstance(key, int) else (1, 0, key)
               for key in error.absolute_path)
  return len(path), path, error.validator in ('anyOf', 'oneOf')


def _first_error(validator, instance):
  """(path keys, message) of the most telling error, or None when `instance` passes.

  Several errors may stem from one mistake (a pod template is checked twice,
  an anyOf reports each branch); the shallowest is the mistake itself, and of
  an anyOf's branches the one whose type matched says what is wrong (the
  string branch of a quantity: its pattern). Ties go to the smallest path, so
  the answer does not depend on the validator's traversal order.
  """
  errors = list(validator.iter_errors(instance))
  if not errors:
    return None
  best = min(errors, key=_rank)
  while best.context:
    branches = sorted((e for e in best.context if e.validator != 'type'), key=_rank)
    if not branches or len(branches) > 1 and _rank(branches[0]) == _rank(branches[1]):
      break  # no single branch to blame: the anyOf's own summary says more
    best = branches[0]
  return _describe(best)


def _check(validator, name, instance, prefix=()):
  found = _first_error(validator, instance)
  if found:
    path, message = found
    raise SchemaError(name, json_path(list(prefix) + path), message)


# ----------------------------------------------------------------------------
# Public checks.

def validate_tfjob(manifest):
  """Checks a TFJob (a dict) against the kubeflow.org/v1 CRD of training-operator 1.9.

  Raises:
    SchemaError: naming the JSON path of the first problem.
  """
  validator, name = _crd_schema(
      'tfjob_crd.json', 'kubeflow.org/v1', 'TFJob',
      ('properties', 'spec', 'properties', 'tfReplicaSpecs', 'additionalProperties',
       'properties', 'template'), 'io.k8s.api.core.v1.PodTemplateSpec')
  _check(validator, name, manifest)


def validate_jobset(manifest):
  """Checks a JobSet (a dict) against the jobset.x-k8s.io/v1alpha2 CRD of JobSet v0.12.0.

  Raises:
    SchemaError: naming the JSON path of the first problem.
  """
  validator, name = _crd_schema(
      'jobset_crd.json', 'jobset.x-k8s.io/v1alpha2', 'JobSet',
      ('properties', 'spec', 'properties', 'replicatedJobs', 'items', 'properties',
       'template'), 'io.k8s.api.batch.v1.JobTemplateSpec')
  _check(validator, name, manifest)


def core_kinds():
  """The kinds `validate_core` knows (e.g. Service, NetworkPolicy, PodTemplateSpec)."""
  return sorted(core_data()[1])


@functools.lru_cache(maxsize=None)
def _core_schema(kind):
  definitions, roots, version = core_data()
  if kind not in roots:
    raise ValueError('no Kubernetes schema for kind %r here (known: %s)' % (
        kind, ', '.join(sorted(roots))))
  root = copy.deepcopy(definitions[roots[kind]])
  gvk = root.get('x-kubernetes-group-version-kind')
  if gvk:  # a resource of its own: apiVersion and kind are required, not optional
    group, version_name = gvk[0]['group'], gvk[0]['version']
    _require_kind(root, '%s/%s' % (group, version_name) if group else version_name, kind)
  root['$defs'] = definitions
  return _validator(root), '%s (Kubernetes %s)' % (kind, version)


def validate_core(manifest, kind=None):
  """Checks a built-in Kubernetes object against the Kubernetes 1.33 schema.

  Args:
    manifest: the object, a dict.
    kind: which definition to use (see `core_kinds()`); default: the
      manifest's own `kind`. Give it for parts that have none, e.g.
      kind='PodTemplateSpec' for a replica's `template`.

  Raises:
    SchemaError: naming the JSON path of the first problem.
    ValueError: for a kind without a schema here.
  """
  kind = kind or (manifest.get('kind') if isinstance(manifest, dict) else None)
  validator, name = _core_schema(kind)
  _check(validator, name, manifest)


def validate(manifest):
  """`validate_tfjob`, `validate_jobset` or `validate_core`, by the manifest's kind."""
  kind = manifest.get('kind') if isinstance(manifest, dict) else None
  if kind == 'TFJob':
    validate_tfjob(manifest)
  elif kind == 'JobSet':
    validate_jobset(manifest)
  else:
    validate_core(manifest)


def validate_documents(text):
  """Checks every document of a (multi-document) YAML text; returns their kinds in order.

  Raises:
    SchemaError: naming the document (its index and kind) and the JSON path.
  """
  kinds = []
  for i, document in enumerate(d for d in yaml.safe_load_all(text) if d is not None):
    kind = document.get('kind') if isinstance(document, dict) else None
    try:
      validate(document)
    except SchemaError as e:
      raise SchemaError('document %d (%s) %s' % (i, kind, e.schema_name), e.path,
                        e.message) from None
    kinds.append(kind)
  return kinds
