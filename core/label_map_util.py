"""Label maps: the class names and integer ids of a dataset (label_map.pbtxt).

A label map is a `StringIntLabelMap` text proto, the same format as the Object
Detection API:

    item { name: "rectangle" id: 1 display_name: "rectangle" }
    item { name: "ellipse" id: 2 }

Ids start at 1 (0 is the background class) and are unique. Every function
that reads a file validates it and raises `ValueError` naming the file and the
offending item, so a typo in a label map fails at startup rather than as a
wrong class in a batch much later:

    from core import label_map_util
    label_map = label_map_util.load_labelmap('data/label_map.pbtxt')
    name_to_id = label_map_util.get_label_map_dict(label_map)
    category_index = label_map_util.create_category_index_from_labelmap(
        'data/label_map.pbtxt')   # {1: {'id': 1, 'name': 'rectangle'}, ...}

`write_label_map(path, ['rectangle', 'ellipse'])` writes one (ids 1, 2, ...).

Ids must also be classes of the model: `check_ids_within(path, num_classes)`
at startup for the label map, `checked_class_ids(ids, num_classes, field)` in
the input graph for each record (an id above num_classes would otherwise be an
all-zero target, trained as background).
"""

import tensorflow as tf
from google.protobuf import text_format

from core import paths
from protos import string_int_label_map_pb2


def _validate_label_map(label_map, path):
  """Checks ids are >= 1 and that ids and names are unique.

  Args:
    label_map: a StringIntLabelMap.
    path: the file it came from (used in error messages).

  Raises:
    ValueError: naming `path` and the offending item.
  """
  if not label_map.item:
    raise ValueError('Label map %s has no items.' % path)
  seen_ids = {}
  seen_names = {}
  for index, item in enumerate(label_map.item):
    if not item.HasField('id'):
      raise ValueError('Label map %s: item %d (name %r) has no id.' % (path, index, item.name))
    if not item.name and not item.display_name:
      raise ValueError('Label map %s: item %d (id %d) has no name.' % (path, index, item.id))
    if item.id < 1:
      raise ValueError(
          'Label map %s: item %d (name %r) has id %d; ids must be >= 1 (0 is the background '
          'class).' % (path, index, item.name, item.id))
    if item.id in seen_ids:
      raise ValueError('Label map %s: id %d is used by both %r and %r.' %
                       (path, item.id, seen_ids[item.id], item.name))
    seen_ids[item.id] = item.name
    if item.name and item.name in seen_names:
      raise ValueError('Label map %s: name %r is used by both id %d and id %d.' %
                       (path, item.name, seen_names[item.name], item.id))
    seen_names[item.name] = item.id


def load_labelmap(path):
  """Reads and validates a label map file.

  Args:
    path: path to a StringIntLabelMap text proto (binary protos also work).

  Returns:
    a StringIntLabelMap proto.

  Raises:
    ValueError: the file is missing, does not parse, or has an invalid item.
  """
  if not paths.exists(path):
    raise ValueError('Label map file %s does not exist (label_map_path).' % path)
  with tf.io.gfile.GFile(path, 'rb') as f:
    content = f.read()
  label_map = string_int_label_map_pb2.StringIntLabelMap()
  try:
    text_format.Merge(content.decode('utf-8'), label_map)
  except (text_format.ParseError, UnicodeDecodeError) as text_error:
    try:
      label_map.ParseFromString(content)
    except Exception:  # noqa: BLE001  (report the text-format error, the usual format)
      raise ValueError('Label map %s does not parse as a StringIntLabelMap: %s' %
                       (path, text_error)) from None
  _validate_label_map(label_map, path)
  return label_map


def _as_label_map(label_map_or_path):
  """Returns (label_map, path) for a proto or a path."""
  if isinstance(label_map_or_path, string_int_label_map_pb2.StringIntLabelMap):
    _validate_label_map(label_map_or_path, '<StringIntLabelMap proto>')
    return label_map_or_path, '<StringIntLabelMap proto>'
  return load_labelmap(label_map_or_path), label_map_or_path


def get_label_map_dict(label_map_or_path, use_display_name=False):
  """Returns {class name: id}.

  Args:
    label_map_or_path: a StringIntLabelMap or the path of one.
    use_display_name: key by `display_name` (falling back to `name`).
  """
  label_map, _ = _as_label_map(label_map_or_path)
  result = {}
  for item in label_map.item:
    name = item.display_name if (use_display_name and item.display_name) else item.name
    result[name] = item.id
  return result


def get_max_label_map_index(label_map_or_path):
  """Returns the largest id in the label map."""
  label_map, _ = _as_label_map(label_map_or_path)
  return max(item.id for item in label_map.item)


def check_ids_within(label_map_or_path, num_classes):
  """Raises unless every id of the label map is a class of the model (1..num_classes).

  An id above `num_classes` would become an all-zero one-hot target: the
  object would be trained as background without any error.

  Args:
    label_map_or_path: a StringIntLabelMap or the path of one.
    num_classes: the model's number of classes (background excluded).

  Raises:
    ValueError: naming the label map file, the item and its id.
  """
  label_map, path = _as_label_map(label_map_or_path)
  for index, item in enumerate(label_map.item):
    if item.id > num_classes:
      raise ValueError(
          'Label map %s: item %d (name %r) has id %d, above the model\'s num_classes=%d; '
          'ids must be in 1..%d.' % (path, index, item.name, item.id, num_classes, num_classes))


def checked_class_ids(class_ids, num_classes, field_name):
  """Returns `class_ids` after an in-graph check that they lie in 1..num_classes.

  Records are checked in the graph because a label map cannot vouch for
  them: an id outside the range would silently become an all-zero target.

  Args:
    class_ids: integer tensor of 1-based class ids from a record.
    num_classes: the model's number of classes.
    field_name: the record field the ids come from, named in the error.

  Returns:
    `class_ids`; evaluating it raises `InvalidArgumentError` naming
    `field_name`, the offending id and num_classes when one is out of range.
  """
  ids = tf.reshape(tf.cast(class_ids, tf.int64), [-1])
  valid = tf.logical_and(ids >= 1, ids <= num_classes)
  bad = tf.boolean_mask(ids, tf.logical_not(valid))
  message = '%s has a class id outside 1..num_classes=%d:' % (field_name, num_classes)
  check = tf.debugging.Assert(tf.reduce_all(valid), [message, bad], summarize=5,
                              name='check_%s' % field_name)
  with tf.control_dependencies([check]):
    return tf.identity(class_ids)


def convert_label_map_to_categories(label_map, max_num_classes, use_display_name=True):
  """Converts a label map into a list of category dicts.

  Args:
    label_map: a StringIntLabelMap, or None for `max_num_classes` default
      categories named 'category_<id>'.
    max_num_classes: ids above this are left out.
    use_display_name: name categories by `display_name` when it is set.

  Returns:
    a list of {'id': int, 'name': str} sorted by id.
  """
  if label_map is None:
    return [{'id': i, 'name': 'category_%d' % i} for i in range(1, max_num_classes + 1)]
  categories = []
  for item in label_map.item:
    if item.id > max_num_classes:
      continue
    name = item.display_name if (use_display_name and item.display_name) else item.name
    categories.append({'id': item.id, 'name': name})
  return sorted(categories, key=lambda c: c['id'])


def create_categories_from_labelmap(path, use_display_name=True):
  """Reads a label map file into a list of category dicts sorted by id."""
  label_map = load_labelmap(path)
  return convert_label_map_to_categories(
      label_map, get_max_label_map_index(label_map), use_display_name)


def create_category_index(categories):
  """Returns {id: category dict} for a list of category dicts."""
  return {category['id']: category for category in categories}


def create_category_index_from_labelmap(path, use_display_name=True):
  """Reads a label map file into {id: {'id': id, 'name': name}}."""
  return create_category_index(create_categories_from_labelmap(path, use_display_name))


def write_label_map(path, names):
  """Writes a label map text proto.

  Args:
    path: output file.
    names: a list of class names (ids 1, 2, ... in order) or a {name: id} dict.

  Returns:
    the written StringIntLabelMap.
  """
  if isinstance(names, dict):
    pairs = sorted(names.items(), key=lambda kv: kv[1])
  else:
    pairs = [(name, i + 1) for i, name in enumerate(names)]
  label_map = string_int_label_map_pb2.StringIntLabelMap()
  for name, class_id in pairs:
    label_map.item.add(name=name, id=int(class_id), display_name=name)
  _validate_label_map(label_map, path)
  parent = paths.parent(path)
  if parent:
    paths.makedirs(parent)
  paths.write_file_atomically(path, text_format.MessageToString(label_map))
  return label_map
