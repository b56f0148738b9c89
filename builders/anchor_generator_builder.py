"""Builds an anchor generator from an `AnchorGenerator` proto.

    ssd_anchor_generator        -> core.anchor_generator.create_ssd_anchors(...)
    multiscale_anchor_generator -> core.anchor_generator.MultiscaleGridAnchorGenerator
    grid_anchor_generator       -> core.grid_anchor_generator.GridAnchorGenerator
                                   (Faster R-CNN's first stage; pixel anchors)

flexible_grid_anchor_generator parses and is refused by name.

    generator = anchor_generator_builder.build(ssd_config.anchor_generator)
    rpn_anchors = anchor_generator_builder.build(
        frcnn_config.first_stage_anchor_generator,
        'model.faster_rcnn.first_stage_anchor_generator')
"""

from builders import config_checks
from core import anchor_generator as anchor_generator_lib
from core import grid_anchor_generator
from protos import anchor_generator_pb2

_PATH = 'model.ssd.anchor_generator'


def build(anchor_generator_config, path=_PATH):
  """Returns the anchor generator `anchor_generator_config` describes.

  Raises:
    ValueError: on a config of another type, no generator set, an unsupported
      generator or bad fields (named).
  """
  if not isinstance(anchor_generator_config, anchor_generator_pb2.AnchorGenerator):
    raise ValueError('anchor_generator_config not of type '
                     'anchor_generator_pb2.AnchorGenerator')
  kind = config_checks.oneof_choice(
      anchor_generator_config, 'anchor_generator_oneof', path,
      ('ssd_anchor_generator', 'multiscale_anchor_generator', 'grid_anchor_generator'),
      why={'flexible_grid_anchor_generator': 'not implemented'})
  if kind == 'grid_anchor_generator':
    return _build_grid(anchor_generator_config.grid_anchor_generator, path + '.' + kind)
  if kind == 'ssd_anchor_generator':
    return _build_ssd(anchor_generator_config.ssd_anchor_generator,
                      path + '.ssd_anchor_generator')
  if kind == 'multiscale_anchor_generator':
    config = anchor_generator_config.multiscale_anchor_generator
    return anchor_generator_lib.MultiscaleGridAnchorGenerator(
        min_level=config.min_level, max_level=config.max_level,
        anchor_scale=config.anchor_scale,
        aspect_ratios=list(config.aspect_ratios) or [1.0],
        scales_per_octave=config.scales_per_octave,
        normalize_coordinates=config.normalize_coordinates)
  raise ValueError('%s: set one of ssd_anchor_generator, multiscale_anchor_generator or '
                   'grid_anchor_generator' % path)


def _pairs(config, first, second, path, num_layers):
  """Zips two repeated fields into per-layer (y, x) pairs, or None when unset."""
  ys, xs = list(getattr(config, first)), list(getattr(config, second))
  if not ys and not xs:
    return None
  if len(ys) != len(xs) or len(ys) != num_layers:
    raise ValueError('%s.%s and %s must each have num_layers (%d) values, got %d and %d'
                     % (path, first, second, num_layers, len(ys), len(xs)))
  return list(zip(ys, xs))


def _build_ssd(config, path):
  if config.num_layers < 1:
    raise ValueError('%s.num_layers must be at least 1, got %d' % (path, config.num_layers))
  if not config.scales and not 0 < config.min_scale <= config.max_scale:
    raise ValueError('%s needs 0 < min_scale <= max_scale, got %s and %s'
                     % (path, config.min_scale, config.max_scale))
  aspect_ratios = list(config.aspect_ratios) or [1.0]
  if any(ratio <= 0 for ratio in aspect_ratios):
    raise ValueError('%s.aspect_ratios must be positive, got %s' % (path, aspect_ratios))
  if config.scales and len(config.scales) != config.num_layers:
    raise ValueError('%s.scales must have num_layers (%d) values, got %d'
                     % (path, config.num_layers, len(config.scales)))
  return anchor_generator_lib.create_ssd_anchors(
      num_layers=config.num_layers,
      min_scale=config.min_scale,
      max_scale=config.max_scale,
      scales=list(config.scales) or None,
      aspect_ratios=aspect_ratios,
      interpolated_scale_aspect_ratio=config.interpolated_scale_aspect_ratio,
      base_anchor_size=[config.base_anchor_height, config.base_anchor_width],
      reduce_boxes_in_lowest_layer=config.reduce_boxes_in_lowest_layer,
      anchor_strides=_pairs(config, 'height_stride', 'width_stride', path,
                            config.num_layers),
      anchor_offsets=_pairs(config, 'height_offset', 'width_offset', path,
                            config.num_layers))


def _build_grid(config, path):
  """GridAnchorGenerator of a GridAnchorGenerator proto.

  Unset scales or aspect_ratios take the generator's defaults (0.5, 1, 2);
  the OD API passes the empty list on, which makes no anchors at all.
  """
  for field in ('height', 'width', 'height_stride', 'width_stride'):
    if getattr(config, field) < 1:
      raise ValueError('%s.%s must be positive, got %d' % (path, field, getattr(config, field)))
  for field in ('scales', 'aspect_ratios'):
    if any(value <= 0 for value in getattr(config, field)):
      raise ValueError('%s.%s must be positive, got %s'
                       % (path, field, list(getattr(config, field))))
  return grid_anchor_generator.GridAnchorGenerator(
      scales=[float(scale) for scale in config.scales] or (0.5, 1.0, 2.0),
      aspect_ratios=[float(ratio) for ratio in config.aspect_ratios] or (0.5, 1.0, 2.0),
      base_anchor_size=[config.height, config.width],
      anchor_stride=[config.height_stride, config.width_stride],
      anchor_offset=[config.height_offset, config.width_offset])
