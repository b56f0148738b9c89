"""Builds a box coder from a `BoxCoder` proto.

    faster_rcnn_box_coder -> core.box_coder.FasterRcnnBoxCoder (also when unset)

mean_stddev_box_coder, square_box_coder and keypoint_box_coder parse and are
refused by name.

    coder = box_coder_builder.build(ssd_config.box_coder)
"""

from builders import config_checks
from core import box_coder as box_coder_lib
from protos import box_coder_pb2


def build(box_coder_config, path='model.ssd.box_coder'):
  """Returns the box coder `box_coder_config` describes.

  Raises:
    ValueError: on a config of another type or an unsupported coder (named).
  """
  if not isinstance(box_coder_config, box_coder_pb2.BoxCoder):
    raise ValueError('box_coder_config not of type box_coder_pb2.BoxCoder.')
  config_checks.oneof_choice(box_coder_config, 'box_coder_oneof', path,
                             ('faster_rcnn_box_coder',))
  coder = box_coder_config.faster_rcnn_box_coder
  return box_coder_lib.FasterRcnnBoxCoder(
      [coder.y_scale, coder.x_scale, coder.height_scale, coder.width_scale])
