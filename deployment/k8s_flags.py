"""The manifest writer's repeated flag values, parsed.

--env, --node_selector, --toleration and --resources.

Each parser turns the strings of one repeated flag into what `k8s_pods.JobOptions`
takes, and names the flag and the item when one is malformed:

    k8s_flags.parse_env(['HOSTS=a:1,b:2'])             # {'HOSTS': 'a:1,b:2'}
    k8s_flags.parse_toleration('nvidia.com/gpu:NoSchedule')
    # {'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}
    k8s_flags.parse_resources(['ps:cpu=2,memory=8Gi,memory_limit=12Gi'])
    # {'ps': {'cpu': '2', 'memory': '8Gi', 'memory_limit': '12Gi'}}
"""

from deployment import k8s_pods



def parse_env(items):
  """{NAME: VALUE} of repeated NAME=VALUE items; the first '=' splits, commas stay.

  Raises:
    ValueError: naming --env and the bad item.
  """
  env = {}
  for item in items:
    name, sep, value = item.partition('=')
    if not sep or not k8s_pods.ENV_NAME.match(name):
      k8s_pods.fail('env', 'must be NAME=VALUE', item)
    env[name] = value
  return env


def parse_key_values(flag, items):
  """{KEY: VALUE} of repeated KEY=VALUE items (--node_selector)."""
  result = {}
  for item in items:
    key, sep, value = item.partition('=')
    if not sep or not key:
      k8s_pods.fail(flag, 'must be KEY=VALUE', item)
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
  if not key or effect and effect not in k8s_pods.TOLERATION_EFFECTS:
    k8s_pods.fail('toleration', 'must be KEY[=VALUE][:EFFECT] with EFFECT one of %s' % ', '.join(
        k8s_pods.TOLERATION_EFFECTS), item)
  return toleration


def parse_resources(items):
  """{role: {'cpu': .., 'memory': .., 'memory_limit': .., 'gpu': N}} of 'ROLE:KEY=VALUE,...'.

  E.g. `--resources=ps:cpu=2,memory=8Gi --resources=evaluator:cpu=4,gpu=1`.
  """
  result = {}
  for item in items:
    role, sep, body = item.partition(':')
    if not sep or role not in k8s_pods.ROLES or not body:
      k8s_pods.fail('resources', 'must be ROLE:KEY=VALUE[,KEY=VALUE...] with ROLE ps or evaluator',
           item)
    values = result.setdefault(role, {})
    for pair in body.split(','):
      key, sep, value = pair.partition('=')
      if not sep or key not in k8s_pods.RESOURCE_KEYS:
        k8s_pods.fail('resources', 'of %s: %r is not KEY=VALUE with KEY one of %s' % (
            role, pair, ', '.join(k8s_pods.RESOURCE_KEYS)), item)
      if key == 'gpu':
        if not value.isdigit():
          k8s_pods.fail('resources', 'of %s: gpu must be a count' % role, item)
        value = int(value)
      values[key] = value
  return result
