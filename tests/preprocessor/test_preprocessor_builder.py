"""Tests of builders.preprocessor_builder: every step's (function, kwargs)."""

import sys

import pytest
import tensorflow as tf
from google.protobuf import text_format

tf.compat.v1.disable_eager_execution()

from builders import preprocessor_builder  # noqa: E402
from core import preprocessor  # noqa: E402
from protos import preprocessor_pb2  # noqa: E402


def _build(text):
  step = preprocessor_pb2.PreprocessingStep()
  text_format.Parse(text, step)
  return preprocessor_builder.build(step)


def _assert_kwargs(actual, expected):
  """Equal dicts, comparing floats at float32 precision (proto floats)."""
  assert sorted(actual) == sorted(expected)
  for key, value in expected.items():
    assert actual[key] == pytest.approx(value, rel=1e-6), key


# (config text, function, kwargs) for the steps mapped 1:1 from the proto.
ONE_TO_ONE = [
    ('normalize_image { original_minval: 0.0 original_maxval: 255.0 '
     'target_minval: -1.0 target_maxval: 1.0 }',
     preprocessor.normalize_image,
     {'original_minval': 0.0, 'original_maxval': 255.0, 'target_minval': -1.0,
      'target_maxval': 1.0}),
    ('random_pixel_value_scale { minval: 0.8 maxval: 1.2 }',
     preprocessor.random_pixel_value_scale, {'minval': 0.8, 'maxval': 1.2}),
    ('random_image_scale { min_scale_ratio: 0.8 max_scale_ratio: 2.2 }',
     preprocessor.random_image_scale, {'min_scale_ratio': 0.8, 'max_scale_ratio': 2.2}),
    ('random_rgb_to_gray { probability: 0.8 }',
     preprocessor.random_rgb_to_gray, {'probability': 0.8}),
    ('random_adjust_brightness { max_delta: 0.2 }',
     preprocessor.random_adjust_brightness, {'max_delta': 0.2}),
    ('random_adjust_contrast { min_delta: 0.7 max_delta: 1.1 }',
     preprocessor.random_adjust_contrast, {'min_delta': 0.7, 'max_delta': 1.1}),
    ('random_adjust_hue { max_delta: 0.01 }',
     preprocessor.random_adjust_hue, {'max_delta': 0.01}),
    ('random_adjust_saturation { min_delta: 0.75 max_delta: 1.15 }',
     preprocessor.random_adjust_saturation, {'min_delta': 0.75, 'max_delta': 1.15}),
    ('random_distort_color { color_ordering: 1 }',
     preprocessor.random_distort_color, {'color_ordering': 1}),
    ('random_jitter_boxes { ratio: 0.1 }',
     preprocessor.random_jitter_boxes, {'ratio': 0.1}),
    ('random_crop_to_aspect_ratio { aspect_ratio: 0.85 overlap_thresh: 0.35 }',
     preprocessor.random_crop_to_aspect_ratio,
     {'aspect_ratio': 0.85, 'overlap_thresh': 0.35}),
    ('random_black_patches { max_black_patches: 20 probability: 0.95 '
     'size_to_image_ratio: 0.12 }',
     preprocessor.random_black_patches,
     {'max_black_patches': 20, 'probability': 0.95, 'size_to_image_ratio': 0.12}),
    ('rgb_to_gray {}', preprocessor.rgb_to_gray, {}),
    ('scale_boxes_to_pixel_coordinates {}',
     preprocessor.scale_boxes_to_pixel_coordinates, {}),
    ('subtract_channel_mean { means: [1.0, 2.0, 3.0] }',
     preprocessor.subtract_channel_mean, {'means': [1.0, 2.0, 3.0]}),
]


@pytest.mark.parametrize('text, function, kwargs', ONE_TO_ONE,
                         ids=[t.split(' ')[0] for t, _, _ in ONE_TO_ONE])
def test_one_to_one_steps(text, function, kwargs):
  built_function, built_kwargs = _build(text)
  assert built_function is function
  _assert_kwargs(built_kwargs, kwargs)


def test_only_set_fields_are_passed():
  function, kwargs = _build('random_adjust_contrast { max_delta: 1.5 }')
  assert function is preprocessor.random_adjust_contrast
  assert kwargs == {'max_delta': 1.5}
  assert _build('random_distort_color {}') == (preprocessor.random_distort_color, {})
  assert _build('random_rgb_to_gray {}')[1] == {}


def test_flips_and_rotation():
  assert _build('random_horizontal_flip { keypoint_flip_permutation: [1, 0, 2, 4, 3] }') == (
      preprocessor.random_horizontal_flip,
      {'keypoint_flip_permutation': (1, 0, 2, 4, 3)})
  assert _build('random_vertical_flip { keypoint_flip_permutation: [1, 0] }') == (
      preprocessor.random_vertical_flip, {'keypoint_flip_permutation': (1, 0)})
  assert _build('random_horizontal_flip {}') == (
      preprocessor.random_horizontal_flip, {'keypoint_flip_permutation': ()})
  assert _build('random_rotation90 {}') == (preprocessor.random_rotation90, {})


def test_random_crop_image():
  function, kwargs = _build("""
      random_crop_image { min_object_covered: 0.75 min_aspect_ratio: 0.75
        max_aspect_ratio: 1.5 min_area: 0.25 max_area: 0.875 overlap_thresh: 0.5
        random_coef: 0.125 }""")
  assert function is preprocessor.random_crop_image
  assert kwargs == {'min_object_covered': 0.75, 'aspect_ratio_range': (0.75, 1.5),
                    'area_range': (0.25, 0.875), 'overlap_thresh': 0.5,
                    'random_coef': 0.125}
  # Unset fields take the proto defaults, which equal the function defaults.
  _assert_kwargs(_build('random_crop_image {}')[1], {
      'min_object_covered': 1.0, 'aspect_ratio_range': (0.75, 1.33),
      'area_range': (0.1, 1.0), 'overlap_thresh': 0.3, 'random_coef': 0.0})


def test_random_pad_image():
  assert _build('random_pad_image {}') == (preprocessor.random_pad_image, {
      'min_image_size': None, 'max_image_size': None, 'pad_color': None})
  function, kwargs = _build("""
      random_pad_image { min_image_height: 10 min_image_width: 20
        max_image_height: 30 max_image_width: 40 pad_color: [0.5, 0.5, 0.5] }""")
  assert function is preprocessor.random_pad_image
  assert kwargs == {'min_image_size': (10, 20), 'max_image_size': (30, 40),
                    'pad_color': (0.5, 0.5, 0.5)}


def test_random_pad_image_errors():
  with pytest.raises(ValueError, match='pad_color should have 3 elements'):
    _build('random_pad_image { pad_color: [0.5, 0.5] }')
  with pytest.raises(ValueError, match='min_image_height and .*min_image_width'):
    _build('random_pad_image { min_image_height: 10 }')
  with pytest.raises(ValueError, match='max_image_height and .*max_image_width'):
    _build('random_pad_image { max_image_width: 10 }')


def test_random_crop_pad_image():
  function, kwargs = _build("""
      random_crop_pad_image { min_object_covered: 0.75 min_aspect_ratio: 0.75
        max_aspect_ratio: 1.5 min_area: 0.25 max_area: 0.875 overlap_thresh: 0.5
        random_coef: 0.125 }""")
  assert function is preprocessor.random_crop_pad_image
  assert kwargs == {'min_object_covered': 0.75, 'aspect_ratio_range': (0.75, 1.5),
                    'area_range': (0.25, 0.875), 'overlap_thresh': 0.5,
                    'random_coef': 0.125}
  _, kwargs = _build("""
      random_crop_pad_image { min_padded_size_ratio: [0.5, 0.75]
        max_padded_size_ratio: [0.5, 0.75] pad_color: [0.5, 0.5, 0.5] }""")
  assert kwargs['min_padded_size_ratio'] == (0.5, 0.75)
  assert kwargs['max_padded_size_ratio'] == (0.5, 0.75)
  assert kwargs['pad_color'] == (0.5, 0.5, 0.5)
  with pytest.raises(ValueError, match='min_padded_size_ratio should have 2'):
    _build('random_crop_pad_image { min_padded_size_ratio: [0.5] }')
  with pytest.raises(ValueError, match='pad_color should have 3'):
    _build('random_crop_pad_image { pad_color: [0.5] }')


def test_random_resize_method():
  assert _build('random_resize_method { target_height: 75 target_width: 100 }') == (
      preprocessor.random_resize_method, {'target_size': [75, 100]})


@pytest.mark.parametrize('name, method', [
    ('AREA', tf.compat.v1.image.ResizeMethod.AREA),
    ('BICUBIC', tf.compat.v1.image.ResizeMethod.BICUBIC),
    ('BILINEAR', tf.compat.v1.image.ResizeMethod.BILINEAR),
    ('NEAREST_NEIGHBOR', tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR)])
def test_resize_image(name, method):
  function, kwargs = _build(
      'resize_image { new_height: 75 new_width: 100 method: %s }' % name)
  assert function is preprocessor.resize_image
  assert kwargs == {'new_height': 75, 'new_width': 100, 'method': method}
  assert preprocessor_builder.RESIZE_METHOD_MAP[
      getattr(preprocessor_pb2.ResizeImage, name)] == method


def test_resize_image_default_method_is_bilinear():
  assert _build('resize_image { new_height: 5 new_width: 6 }')[1]['method'] == (
      tf.compat.v1.image.ResizeMethod.BILINEAR)


# Two SSD crop operations, every value different so a swapped or dropped
# field shows (all exact in float32, as the proto stores them).
_SSD_OPERATIONS = [
    dict(min_object_covered=0.125, min_aspect_ratio=0.5, max_aspect_ratio=2.0, min_area=0.25,
         max_area=0.75, overlap_thresh=0.5, random_coef=0.25, min_padded_size_ratio=(1.0, 1.25),
         max_padded_size_ratio=(2.5, 3.0), pad_color=(0.25, 0.5, 0.75)),
    dict(min_object_covered=0.625, min_aspect_ratio=0.75, max_aspect_ratio=1.25, min_area=0.375,
         max_area=1.0, overlap_thresh=0.0625, random_coef=0.5, min_padded_size_ratio=(1.5, 1.5),
         max_padded_size_ratio=(1.75, 2.0), pad_color=(0.0, 0.125, 1.0)),
]
_WINDOW = ('min_object_covered', 'min_area', 'max_area', 'overlap_thresh', 'random_coef')


def _ssd_step(step, fields, extra=''):
  """Text of `step` with both `_SSD_OPERATIONS`, each limited to `fields`."""
  operations = []
  for op in _SSD_OPERATIONS:
    parts = []
    for field in fields:
      if field == 'pad_color':
        parts += ['pad_color_%s: %r' % rgb for rgb in zip('rgb', op['pad_color'])]
      elif isinstance(op[field], tuple):
        parts.append('%s: [%r, %r]' % ((field,) + op[field]))
      else:
        parts.append('%s: %r' % (field, op[field]))
    operations.append('operations { %s }' % ' '.join(parts))
  return '%s { %s %s }' % (step, ' '.join(operations), extra)


def _per_operation(*keys):
  """{kwarg: [value of op 0, value of op 1]} as the builder returns the window lists."""
  ranges = {'aspect_ratio_range': ('min_aspect_ratio', 'max_aspect_ratio'),
            'area_range': ('min_area', 'max_area')}
  result = {}
  for key in keys:
    if key in ranges:
      result[key] = [(op[ranges[key][0]], op[ranges[key][1]]) for op in _SSD_OPERATIONS]
    else:
      result[key] = [op[key] for op in _SSD_OPERATIONS]
  return result


_CROP_KWARGS = ('min_object_covered', 'aspect_ratio_range', 'area_range', 'overlap_thresh',
                'random_coef')
_FIXED_RATIO_KWARGS = ('min_object_covered', 'area_range', 'overlap_thresh', 'random_coef')
_RATIO_FIELDS = ('min_aspect_ratio', 'max_aspect_ratio')
_PADDING = ('min_padded_size_ratio', 'max_padded_size_ratio')


def test_ssd_random_crop():
  assert _build('ssd_random_crop {}') == (preprocessor.ssd_random_crop, {})
  function, kwargs = _build(_ssd_step('ssd_random_crop', _WINDOW + _RATIO_FIELDS))
  assert function is preprocessor.ssd_random_crop
  assert kwargs == _per_operation(*_CROP_KWARGS)


def test_ssd_random_crop_pad():
  assert _build('ssd_random_crop_pad {}') == (preprocessor.ssd_random_crop_pad, {})
  function, kwargs = _build(_ssd_step(
      'ssd_random_crop_pad', _WINDOW + _RATIO_FIELDS + _PADDING + ('pad_color',)))
  assert function is preprocessor.ssd_random_crop_pad
  assert kwargs == _per_operation(*(_CROP_KWARGS + _PADDING + ('pad_color',)))
  with pytest.raises(ValueError, match=r'operations\[0\].min_padded_size_ratio'):
    _build('ssd_random_crop_pad { operations { min_padded_size_ratio: [1.0] } }')


def test_ssd_random_crop_fixed_aspect_ratio():
  assert _build('ssd_random_crop_fixed_aspect_ratio {}') == (
      preprocessor.ssd_random_crop_fixed_aspect_ratio, {})
  function, kwargs = _build(_ssd_step('ssd_random_crop_fixed_aspect_ratio', _WINDOW,
                                      extra='aspect_ratio: 1.5'))
  assert function is preprocessor.ssd_random_crop_fixed_aspect_ratio
  assert kwargs == dict(_per_operation(*_FIXED_RATIO_KWARGS), aspect_ratio=1.5)


def test_ssd_random_crop_pad_fixed_aspect_ratio():
  function, kwargs = _build('ssd_random_crop_pad_fixed_aspect_ratio {}')
  assert function is preprocessor.ssd_random_crop_pad_fixed_aspect_ratio
  assert kwargs == {'aspect_ratio': 1.0}
  # The padding range is one pair for every operation (the OD API's fields).
  _, kwargs = _build("""
      ssd_random_crop_pad_fixed_aspect_ratio {
        operations { min_object_covered: 0.5 }
        operations { min_object_covered: 0.7 }
        aspect_ratio: 1.5
        min_padded_size_ratio: [1.25, 1.25] max_padded_size_ratio: [2.5, 3.0] }""")
  assert kwargs['aspect_ratio'] == 1.5
  assert kwargs['min_object_covered'] == pytest.approx([0.5, 0.7])
  assert (kwargs['min_padded_size_ratio'], kwargs['max_padded_size_ratio']) == (
      (1.25, 1.25), (2.5, 3.0))
  with pytest.raises(ValueError, match='ssd_random_crop_pad_fixed_aspect_ratio.'
                                       'max_padded_size_ratio'):
    _build('ssd_random_crop_pad_fixed_aspect_ratio { max_padded_size_ratio: [2.0] }')


def test_unknown_or_unset_step():
  with pytest.raises(ValueError, match='Unknown preprocessing step.'):
    preprocessor_builder.build(preprocessor_pb2.PreprocessingStep())


def test_every_proto_step_is_built():
  oneof = preprocessor_pb2.PreprocessingStep.DESCRIPTOR.oneofs_by_name[
      'preprocessing_step']
  arg_map = preprocessor.get_default_func_arg_map()
  for field in oneof.fields:
    step = preprocessor_pb2.PreprocessingStep()
    getattr(step, field.name).SetInParent()
    if field.name in preprocessor_builder.NOT_BUILT_STEPS:
      with pytest.raises(ValueError, match='data_augmentation_options.%s is set, but '
                                           'slimtrain does not build it' % field.name):
        preprocessor_builder.build(step)
      continue
    if field.name == 'normalize_image':
      step.normalize_image.original_maxval = 255.0
    function, kwargs = preprocessor_builder.build(step)
    assert function in arg_map, field.name
    assert function.__name__ == field.name, field.name
    assert isinstance(kwargs, dict)


def test_built_steps_run_through_preprocess():
  """A config-built pipeline runs end to end on a small example."""
  texts = ['random_horizontal_flip {}', 'random_rotation90 {}',
           'random_crop_image { min_object_covered: 0.0 }',
           'random_pad_image { pad_color: [0.0, 0.0, 0.0] }',
           'random_distort_color {}', 'ssd_random_crop {}',
           'resize_image { new_height: 16 new_width: 24 }']
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(1)
    tensor_dict = {
        'image': tf.random.uniform([1, 20, 30, 3], 0.0, 255.0),
        'groundtruth_boxes': tf.constant([[0.1, 0.1, 0.6, 0.6]]),
        'groundtruth_classes': tf.constant([1]),
        'groundtruth_weights': tf.constant([1.0]),
    }
    out = preprocessor.preprocess(tensor_dict, [_build(t) for t in texts])
    with tf.compat.v1.Session() as sess:
      result = sess.run(out)
  assert result['image'].shape == (1, 16, 24, 3)
  assert len(result['groundtruth_boxes']) == len(result['groundtruth_classes'])


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
