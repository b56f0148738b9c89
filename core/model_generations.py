"""Driving a `DetectionModel` of either interface generation the OD API had.

Models written against the OD API of 2017 have no `true_image_shapes`:

    images = model.preprocess(images)                 # 2017: the images alone
    prediction_dict = model.predict(images)
    losses = model.loss(prediction_dict)
    var_map = model.restore_map(from_detection_checkpoint=True)

while later models (and slimtrain's `core.model.DetectionModel`) pass the shapes of the
real images through:

    images, true_image_shapes = model.preprocess(images)
    prediction_dict = model.predict(images, true_image_shapes)
    losses = model.loss(prediction_dict, true_image_shapes)
    var_map = model.restore_map(fine_tune_checkpoint_type='detection')

`DetectionModelCalls(model)` makes the later calls on a model of either kind; the
generation is read from the model itself (the parameters of its `predict`, `loss` and
`restore_map`, and what its `preprocess` returns), so a user's model needs no flag:

    calls = model_generations.DetectionModelCalls(model)
    images, true_image_shapes = calls.preprocess(raw_images)
    calls.provide_groundtruth(boxes_list, classes_list, groundtruth_weights_list=weights)
    prediction_dict = calls.predict(images, true_image_shapes)
    losses = calls.loss(prediction_dict, true_image_shapes)

For a 2017 model the true image shapes are the shapes of its preprocessed images, and
groundtruth arguments its `provide_groundtruth` does not take are left out.
"""

import inspect

from core import logs as logging
import tensorflow as tf

_LOGGED = set()


def _parameters(function):
  try:
    return list(inspect.signature(function).parameters.values())
  except (TypeError, ValueError):  # a builtin or C function: assume the later interface
    return None


def _accepts_second_argument(function, name):
  """Whether `function` (a bound method) takes an argument after its first one."""
  parameters = _parameters(function)
  if parameters is None:
    return True
  positional = 0
  for parameter in parameters:
    if parameter.kind == parameter.VAR_POSITIONAL or parameter.name == name:
      return True
    if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
      positional += 1
  return positional >= 2


def _accepted_keywords(function, names):
  """The subset of `names` that `function` takes as keywords (all, with **kwargs)."""
  parameters = _parameters(function)
  if parameters is None or any(p.kind == p.VAR_KEYWORD for p in parameters):
    return set(names)
  return {p.name for p in parameters} & set(names)


def takes_true_image_shapes(model):
  """True for the later interface (`predict(images, true_image_shapes)`), False for 2017."""
  return _accepts_second_argument(model.predict, 'true_image_shapes')


class DetectionModelCalls:
  """The later DetectionModel calls, made on a model of either generation."""

  def __init__(self, model):
    """Reads the model's generation from its methods (and logs it once per class).

    Args:
      model: a DetectionModel of either generation.
    """
    self.model = model
    self.later_interface = takes_true_image_shapes(model)
    self._loss_takes_shapes = _accepts_second_argument(model.loss, 'true_image_shapes')
    cls = type(model)
    if not self.later_interface and cls not in _LOGGED:
      _LOGGED.add(cls)
      logging.info('%s.predict takes no true_image_shapes: driving it with the 2017 OD API '
                   'DetectionModel calls (preprocess(images) -> images, predict(images), '
                   'loss(prediction_dict)).', cls.__name__)

  def preprocess(self, images):
    """(preprocessed images, true_image_shapes [batch, 3] int32) from either generation."""
    result = self.model.preprocess(images)
    if isinstance(result, (tuple, list)):
      if len(result) != 2:
        raise ValueError('%s.preprocess returned %d values; expected the images, or '
                         '(images, true_image_shapes)' % (type(self.model).__name__,
                                                          len(result)))
      return tuple(result)
    shape = tf.shape(result, out_type=tf.int32)
    true_image_shapes = tf.tile(tf.expand_dims(shape[1:4], 0), [shape[0], 1])
    return result, true_image_shapes

  def predict(self, images, true_image_shapes):
    if self.later_interface:
      return self.model.predict(images, true_image_shapes)
    return self.model.predict(images)

  def loss(self, prediction_dict, true_image_shapes):
    if self._loss_takes_shapes:
      return self.model.loss(prediction_dict, true_image_shapes)
    return self.model.loss(prediction_dict)

  def provide_groundtruth(self, groundtruth_boxes_list, groundtruth_classes_list,
                          groundtruth_masks_list=None, groundtruth_keypoints_list=None,
                          **optional_lists):
    """Passes the groundtruth the model's `provide_groundtruth` takes.

    Optional lists that are None are never passed; a non-None one the model cannot take
    (e.g. `groundtruth_weights_list` for a 2017 model) is left out with a log line.
    """
    given = {'groundtruth_masks_list': groundtruth_masks_list,
             'groundtruth_keypoints_list': groundtruth_keypoints_list}
    given.update(optional_lists)
    given = {name: value for name, value in given.items() if value is not None}
    accepted = _accepted_keywords(self.model.provide_groundtruth, given)
    dropped = sorted(set(given) - accepted)
    if dropped:
      logging.info('%s.provide_groundtruth takes no %s; training without it.',
                   type(self.model).__name__, ', '.join(dropped))
    self.model.provide_groundtruth(
        groundtruth_boxes_list, groundtruth_classes_list,
        **{name: value for name, value in given.items() if name in accepted})

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """The model's restore map, asked in the words its `restore_map` understands."""
    accepted = _accepted_keywords(
        self.model.restore_map, ('fine_tune_checkpoint_type', 'from_detection_checkpoint',
                                 'load_all_detection_checkpoint_vars'))
    kwargs = {}
    if 'fine_tune_checkpoint_type' in accepted:
      kwargs['fine_tune_checkpoint_type'] = fine_tune_checkpoint_type
    elif 'from_detection_checkpoint' in accepted:
      kwargs['from_detection_checkpoint'] = fine_tune_checkpoint_type == 'detection'
    if 'load_all_detection_checkpoint_vars' in accepted:
      kwargs['load_all_detection_checkpoint_vars'] = load_all_detection_checkpoint_vars
    return self.model.restore_map(**kwargs)
