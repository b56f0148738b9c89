"""Refusing, by name, what a config sets that slimtrain parses but does not build.

Our protos carry the OD API's whole schema, so any OD API config parses. Not
every field is built: a builder lists the fields it implements and calls
`refuse_unsupported` first, so a config that sets anything else stops with
the field's full path instead of training a different model than it says.
A field set to its default value is not refused (zoo configs often spell
defaults out).

    config_checks.refuse_unsupported(
        ssd_config, path='model.ssd',
        supported=('num_classes', 'image_resizer', ...),
        why={'mask_head_config': 'SSD mask heads are not built'})
"""

from google.protobuf import descriptor


def _is_repeated(field):
  # protobuf 6+ replaced FieldDescriptor.label with is_repeated.
  if hasattr(field, 'is_repeated'):
    return field.is_repeated
  return field.label == descriptor.FieldDescriptor.LABEL_REPEATED


def _is_default(field, value):
  """True when a set scalar field holds its default value."""
  if _is_repeated(field) or field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
    return False
  return value == field.default_value


def set_fields(message):
  """Names of the fields of `message` that are set to a non-default value."""
  return [field.name for field, value in message.ListFields()
          if not _is_default(field, value)]


def refuse_unsupported(message, path, supported, why=None):
  """Raises ValueError naming the first field set in `message` outside `supported`.

  Args:
    message: a proto message.
    path: the message's place in the pipeline config ('model.ssd').
    supported: names of the fields the caller builds.
    why: optional {field name: reason} for the error text.

  Raises:
    ValueError: '<path>.<field> is set, but slimtrain does not build it: ...'.
  """
  why = why or {}
  for name in set_fields(message):
    if name not in supported:
      reason = why.get(name, 'not implemented; remove it or leave it at its default')
      raise ValueError('%s.%s is set, but slimtrain does not build it: %s'
                       % (path, name, reason))


def oneof_choice(message, oneof, path, supported, why=None):
  """Returns which field of `oneof` is set, refusing the unsupported choices.

  Args:
    message: a proto message with a oneof.
    oneof: the oneof's name.
    path: the message's place in the pipeline config.
    supported: the choices the caller builds.
    why: optional {choice: reason} for the error text.

  Returns:
    The name of the set field, or None when none is set.

  Raises:
    ValueError: naming the choice when it is not supported.
  """
  choice = message.WhichOneof(oneof)
  if choice is not None and choice not in supported:
    reason = (why or {}).get(choice, 'supported: %s' % ', '.join(supported))
    raise ValueError('%s.%s is set, but slimtrain does not build it: %s'
                     % (path, choice, reason))
  return choice
