"""`HParams`: the hyperparameter bag of `tf.contrib.training`, without contrib.

Old training scripts keep their hyperparameters in an `HParams` object, fill
it from keyword arguments, override it from a command-line string and pass it
to `learn_runner.run` or a model_fn. This class behaves like the contrib one:
every hyperparameter has a type fixed when it is added (the type of its first
value; a list fixes the element type), and `parse`, `set_hparam`,
`override_from_dict` and `get` refuse values that do not fit, with the same
error texts as contrib so old messages still search well.

    import estimator as tfe
    hparams = tfe.HParams(learning_rate=0.1, num_hidden_units=100,
                          activation='relu', layers=[64, 32])
    hparams.parse('learning_rate=0.3,activation=tanh,layers=[128,64]')
    hparams.learning_rate            # 0.3
    hparams.values()                 # a plain dict, e.g. for logging
    hparams.to_json(sort_keys=True)  # round-trips through parse_json

Casting rules (as contrib): an int widens to a float, but a float never
narrows to an int; bools and numbers never mix; only strings become strings.
In `parse` a bool accepts `true`/`True`/`false`/`False` or an integer, a list
is written `[1,2,3]` (commas or spaces between items), and `name[i]=v` sets one
item of a list hyperparameter.
"""

import json
import numbers
import re

# One `name=value`, `name=[v1,v2]` or `name[i]=value` assignment of `parse`.
_ASSIGNMENT = re.compile(r"""
    (?P<name>[a-zA-Z][\w\.]*)      # hyperparameter name
    (\[\s*(?P<index>\d+)\s*\])?    # optional index into a list hyperparameter
    \s*=\s*
    ((?P<val>[^,\[]*)              # a single value
     |
     \[(?P<vals>[^\]]*)\])         # or a bracketed list of values
    ($|,\s*)""", re.VERBOSE)


def _parse_fail(name, var_type, value, values):
  """Raises the contrib error for a value that does not parse as its type."""
  raise ValueError("Could not parse hparam '%s' of type '%s' with value '%s' in %s"
                   % (name, var_type.__name__, value, values))


def _reuse_fail(name, values):
  """Raises the contrib error for a name assigned twice in one string."""
  raise ValueError("Multiple assignments to variable '%s' in %s" % (name, values))


def _bool_parser(name, values):
  """Returns a parser for bool text: true/True/false/False or an integer."""
  def parse(text):
    if text in ('true', 'True'):
      return True
    if text in ('false', 'False'):
      return False
    try:
      return bool(int(text))
    except ValueError:
      _parse_fail(name, bool, text, values)
  return parse


def _add_scalar(name, parse, var_type, match, values, results):
  """Stores `name=value` or `name[i]=value` from one regex match."""
  try:
    parsed = parse(match['val'])
  except ValueError:
    _parse_fail(name, var_type, match['val'], values)
  if not match['index']:
    if name in results:
      _reuse_fail(name, values)
    results[name] = parsed
    return
  if name in results and not isinstance(results[name], dict):
    _reuse_fail(name, values)
  items = results.setdefault(name, {})
  index = int(match['index'])
  if index in items:
    _reuse_fail('%s[%d]' % (name, index), values)
  items[index] = parsed


def _add_list(name, parse, var_type, match, values, results):
  """Stores `name=[v1,v2,...]` from one regex match."""
  if match['index'] is not None:
    raise ValueError('Assignment of a list to a list index.')
  if name in results:
    _reuse_fail(name, values)
  elements = [e for e in re.split('[ ,]', match['vals']) if e]
  try:
    results[name] = [parse(e) for e in elements]
  except ValueError:
    _parse_fail(name, var_type, match['vals'], values)


def parse_values(values, type_map, ignore_unknown=False):
  """Parses `'a=1,b=[2,3],c[0]=x'` into a dict of typed values.

  Args:
    values: the comma-separated assignments.
    type_map: name -> the Python type its values parse to.
    ignore_unknown: skip names missing from type_map instead of raising.

  Returns:
    A dict name -> value, list of values, or {index: value} for `name[i]=`.

  Raises:
    ValueError: on malformed text, an unknown name, a value that does not
      parse, or a name assigned twice.
  """
  results = {}
  pos = 0
  while pos < len(values):
    match = _ASSIGNMENT.match(values, pos)
    if not match:
      raise ValueError('Malformed hyperparameter value: %s' % values[pos:])
    pos = match.end()
    groups = match.groupdict()
    name = groups['name']
    if name not in type_map:
      if ignore_unknown:
        continue
      raise ValueError('Unknown hyperparameter type for %s' % name)
    var_type = type_map[name]
    parse = _bool_parser(name, values) if var_type is bool else var_type
    if groups['val'] is not None:
      _add_scalar(name, parse, var_type, groups, values, results)
    elif groups['vals'] is not None:
      _add_list(name, parse, var_type, groups, values, results)
    else:
      _parse_fail(name, var_type, '', values)
  return results


# Declared types that only take values of their own family: a str
# hyperparameter refuses 3, an int one refuses 0.5, a float one refuses '1'.
_CLOSED_FAMILIES = ((str, bytes), numbers.Integral, numbers.Number)


def _value_fits(param_type, value):
  """Whether converting `value` to `param_type` keeps its meaning.

  Args:
    param_type: the type a hyperparameter was declared with.
    value: the candidate new value.

  Returns:
    True when `param_type(value)` is an acceptable conversion.
  """
  # Python counts True as an int; a hyperparameter does not, either way round.
  if issubclass(param_type, bool) != isinstance(value, bool):
    return False
  return not any(issubclass(param_type, family) and not isinstance(value, family)
                 for family in _CLOSED_FAMILIES)


def _cast_to_type_if_compatible(name, param_type, value):
  """Converts `value` to the declared type of hyperparameter `name`.

  Args:
    name: the hyperparameter, for the error text.
    param_type: its declared type; `NoneType` (first value None) takes
      anything unchanged.
    value: the new value.

  Returns:
    `value` itself when it already has that type (or the type is NoneType),
    else `param_type(value)`.

  Raises:
    ValueError: "Could not cast hparam ..." when `_value_fits` says no.
  """
  if type(value) is param_type or param_type is type(None):  # noqa: E721
    return value
  if not _value_fits(param_type, value):
    raise ValueError("Could not cast hparam '%s' of type '%s' from value %r"
                     % (name, param_type, value))
  return param_type(value)


def _remove_callables(value):
  """Drops functions from nested dicts/lists so the rest serialises to JSON."""
  if isinstance(value, dict):
    return {k: _remove_callables(v) for k, v in value.items() if not callable(v)}
  if isinstance(value, list):
    return [_remove_callables(v) for v in value if not callable(v)]
  return value


class HParams:
  """A set of typed hyperparameters with attribute access.

  Each hyperparameter is an attribute (`hparams.learning_rate`) whose type is
  fixed by its first value; see the module docstring for the casting rules.
  """

  def __init__(self, hparam_def=None, model_structure=None, **kwargs):
    """Creates the hyperparameters from keyword arguments.

    Args:
      hparam_def: contrib's HParamDef proto; not supported (pass kwargs).
      model_structure: any object describing the model, kept as is.
      **kwargs: name=value for each hyperparameter.

    Raises:
      ValueError: for `hparam_def`, a reserved name or an empty list.
    """
    self._hparam_types = {}
    self._model_structure = model_structure
    if hparam_def is not None:
      raise ValueError('HParams(hparam_def=...) (an HParamDef proto) is not supported; '
                       'pass the hyperparameters as keyword arguments, or use parse_json.')
    for name, value in kwargs.items():
      self.add_hparam(name, value)

  def add_hparam(self, name, value):
    """Declares hyperparameter `name`; its type is that of `value`.

    Args:
      name: attribute name for the new hyperparameter.
      value: its first value; a non-empty list or tuple makes it
        multi-valued, typed by its first element.

    Raises:
      ValueError: if the name is taken (by a hyperparameter or a method) or
        the value is an empty list (its element type would be unknown).
    """
    # Refuses names that would shadow a method or an existing hyperparameter.
    if getattr(self, name, None) is not None:
      raise ValueError('Hyperparameter name is reserved: %s' % name)
    multi_valued = isinstance(value, (list, tuple))
    if multi_valued and not value:
      raise ValueError('Multi-valued hyperparameters cannot be empty: %s' % name)
    # A list's type is that of its first element; set_hparam casts the rest.
    sample = value[0] if multi_valued else value
    self._hparam_types[name] = (type(sample), multi_valued)
    setattr(self, name, value)

  def set_hparam(self, name, value):
    """Sets an existing hyperparameter, casting `value` to its type.

    Raises:
      KeyError: if the hyperparameter does not exist.
      ValueError: if the value does not fit the type or list-ness.
    """
    param_type, is_list = self._hparam_types[name]
    if isinstance(value, list):
      if not is_list:
        raise ValueError('Must not pass a list for single-valued parameter: %s' % name)
      setattr(self, name, [_cast_to_type_if_compatible(name, param_type, v) for v in value])
    elif isinstance(value, dict) and is_list:
      # From parse('name[i]=v'): set single items of the current list.
      items = list(getattr(self, name))
      for index, item in sorted(value.items()):
        if index >= len(items):
          raise ValueError('Index %d out of range for hparam %s of length %d'
                           % (index, name, len(items)))
        items[index] = _cast_to_type_if_compatible(name, param_type, item)
      setattr(self, name, items)
    else:
      if is_list:
        raise ValueError('Must pass a list for multi-valued parameter: %s.' % name)
      setattr(self, name, _cast_to_type_if_compatible(name, param_type, value))

  def del_hparam(self, name):
    """Removes hyperparameter `name` if it exists (no error otherwise)."""
    if name in self._hparam_types:
      delattr(self, name)
      del self._hparam_types[name]

  def parse(self, values):
    """Overrides hyperparameters from a string such as `'a=1,b=[2,3],c=x'`.

    Args:
      values: comma-separated `name=value` assignments (see module docstring).

    Returns:
      self, so calls chain: `HParams(...).parse(flags.hparams)`.

    Raises:
      ValueError: on malformed text, an unknown name or a value of the wrong
        type; the message names the hyperparameter and quotes the string.
    """
    type_map = {name: param_type for name, (param_type, _) in self._hparam_types.items()}
    return self.override_from_dict(parse_values(values, type_map))

  def override_from_dict(self, values_dict):
    """Sets every `name: value` of the dict via `set_hparam`; returns self.

    Raises:
      KeyError: for a name that is not a hyperparameter.
      ValueError: for a value of the wrong type.
    """
    for name, value in values_dict.items():
      self.set_hparam(name, value)
    return self

  def set_model_structure(self, model_structure):
    self._model_structure = model_structure

  def get_model_structure(self):
    return self._model_structure

  def to_json(self, indent=None, separators=None, sort_keys=False):
    """Serialises the hyperparameters (callables dropped) to a JSON string."""
    return json.dumps(_remove_callables(self.values()), indent=indent,
                      separators=separators, sort_keys=sort_keys)

  def parse_json(self, values_json):
    """Overrides hyperparameters from a JSON object string; returns self."""
    return self.override_from_dict(json.loads(values_json))

  def values(self):
    """Returns a new dict name -> value of every hyperparameter."""
    return {name: getattr(self, name) for name in self._hparam_types}

  def get(self, key, default=None):
    """Returns hyperparameter `key`, or `default` when there is none.

    Raises:
      ValueError: if the hyperparameter exists and `default` does not fit
        its type (so a typo in the default is caught early).
    """
    if key not in self._hparam_types:
      return default
    if default is not None:
      param_type, is_list = self._hparam_types[key]
      type_str = 'list<%s>' % param_type if is_list else str(param_type)
      fail_msg = "Hparam '%s' of type '%s' is incompatible with default=%s" % (
          key, type_str, default)
      if is_list != isinstance(default, list):
        raise ValueError(fail_msg)
      try:
        for value in (default if is_list else [default]):
          _cast_to_type_if_compatible(key, param_type, value)
      except ValueError as e:
        raise ValueError('%s. %s' % (fail_msg, e)) from None
    return getattr(self, key)

  def __contains__(self, key):
    return key in self._hparam_types

  def __str__(self):
    return str(sorted(self.values().items()))

  def __repr__(self):
    return '%s(%s)' % (type(self).__name__, self.__str__())
