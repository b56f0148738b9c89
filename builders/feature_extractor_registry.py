"""Which class builds each `ssd.feature_extractor.type` and `faster_rcnn.feature_extractor.type`.

The type strings are the OD API's (its SSD_FEATURE_EXTRACTOR_CLASS_MAP and
FASTER_RCNN_FEATURE_EXTRACTOR_CLASS_MAP), plus slimtrain's small CPU-demo
extractors. Modules are imported on first use, so
building one model does not import every backbone.

    extractor_class = feature_extractor_registry.lookup('ssd_mobilenet_v1',
                                                        'model.ssd.feature_extractor.type')
    feature_extractor_registry.types()     # every supported SSD type, sorted
    frcnn_class = feature_extractor_registry.lookup_faster_rcnn('faster_rcnn_resnet50')
"""

import importlib

# type -> (module under models/, class name).
_V1 = 'ssd_mobilenet_v1_feature_extractors'
_V2_V3 = 'ssd_mobilenet_v2_v3_feature_extractors'
_MOBILEDET = 'ssd_mobiledet_feature_extractors'
_INCEPTION = 'ssd_inception_feature_extractors'
_RESNET_FPN = 'ssd_resnet_fpn_feature_extractors'
_SSD_EXTRACTORS = {
    'small_mobilenet_v1': ('ssd_feature_extractors', 'SmallMobilenetV1FeatureExtractor'),
    'small_resnet': ('ssd_feature_extractors', 'SmallResnetFeatureExtractor'),
    'ssd_mobilenet_v1': (_V1, 'SSDMobileNetV1FeatureExtractor'),
    'embedded_ssd_mobilenet_v1': (_V1, 'EmbeddedSSDMobileNetV1FeatureExtractor'),
    'ssd_mobilenet_v1_fpn': (_V1, 'SSDMobileNetV1FpnFeatureExtractor'),
    'ssd_mobilenet_v1_ppn': (_V1, 'SSDMobileNetV1PpnFeatureExtractor'),
    'ssd_mobilenet_v2': (_V2_V3, 'SSDMobileNetV2FeatureExtractor'),
    'ssd_mobilenet_v2_fpn': (_V2_V3, 'SSDMobileNetV2FpnFeatureExtractor'),
    'ssd_mobilenet_v2_mnasfpn': ('ssd_mnasfpn_feature_extractor',
                                 'SSDMobileNetV2MnasFPNFeatureExtractor'),
    'ssd_mobilenet_v3_large': (_V2_V3, 'SSDMobileNetV3LargeFeatureExtractor'),
    'ssd_mobilenet_v3_small': (_V2_V3, 'SSDMobileNetV3SmallFeatureExtractor'),
    'ssd_mobilenet_edgetpu': (_V2_V3, 'SSDMobileNetEdgeTPUFeatureExtractor'),
    'ssd_mobiledet_cpu': (_MOBILEDET, 'SSDMobileDetCPUFeatureExtractor'),
    'ssd_mobiledet_dsp': (_MOBILEDET, 'SSDMobileDetDSPFeatureExtractor'),
    'ssd_mobiledet_edgetpu': (_MOBILEDET, 'SSDMobileDetEdgeTPUFeatureExtractor'),
    'ssd_inception_v2': (_INCEPTION, 'SSDInceptionV2FeatureExtractor'),
    'ssd_inception_v3': (_INCEPTION, 'SSDInceptionV3FeatureExtractor'),
    'ssd_resnet50_v1_fpn': (_RESNET_FPN, 'SSDResnet50V1FpnFeatureExtractor'),
    'ssd_resnet101_v1_fpn': (_RESNET_FPN, 'SSDResnet101V1FpnFeatureExtractor'),
    'ssd_resnet152_v1_fpn': (_RESNET_FPN, 'SSDResnet152V1FpnFeatureExtractor'),
}

# faster_rcnn.feature_extractor.type -> (module under models/, class name); the
# OD API's FASTER_RCNN_FEATURE_EXTRACTOR_CLASS_MAP keys.
_RESNET = 'faster_rcnn_resnet_v1_feature_extractors'
_FASTER_RCNN_EXTRACTORS = {
    'faster_rcnn_resnet50': (_RESNET, 'FasterRCNNResnet50FeatureExtractor'),
    'faster_rcnn_resnet101': (_RESNET, 'FasterRCNNResnet101FeatureExtractor'),
    'faster_rcnn_resnet152': (_RESNET, 'FasterRCNNResnet152FeatureExtractor'),
    'faster_rcnn_inception_v2': ('faster_rcnn_inception_v2_feature_extractor',
                                 'FasterRCNNInceptionV2FeatureExtractor'),
    'faster_rcnn_inception_resnet_v2': ('faster_rcnn_inception_resnet_v2_feature_extractor',
                                        'FasterRCNNInceptionResnetV2FeatureExtractor'),
    'faster_rcnn_nas': ('faster_rcnn_nas_feature_extractor', 'FasterRCNNNASFeatureExtractor'),
    'faster_rcnn_pnas': ('faster_rcnn_pnas_feature_extractor', 'FasterRCNNPNASFeatureExtractor'),
}

# slimtrain's own extractors make as many maps as the anchor generator has layers.
_LAYERS_FOLLOW_ANCHORS = ('small_mobilenet_v1', 'small_resnet')

# Types of the OD API's TF1 zoo that are not built (refused by name).
_KERAS = ('a Keras feature extractor of the OD API\'s TF2 generation; slimtrain builds '
          'the slim (TF1) extractors: use %r')
_NOT_BUILT = {
    'ssd_mobilenet_v1_keras': _KERAS % 'ssd_mobilenet_v1',
    'ssd_mobilenet_v1_fpn_keras': _KERAS % 'ssd_mobilenet_v1_fpn',
    'ssd_mobilenet_v2_keras': _KERAS % 'ssd_mobilenet_v2',
    'ssd_mobilenet_v2_fpn_keras': _KERAS % 'ssd_mobilenet_v2_fpn',
    'ssd_resnet50_v1_fpn_keras': _KERAS % 'ssd_resnet50_v1_fpn',
    'ssd_resnet101_v1_fpn_keras': _KERAS % 'ssd_resnet101_v1_fpn',
    'ssd_resnet152_v1_fpn_keras': _KERAS % 'ssd_resnet152_v1_fpn',
}


def types():
  """The supported `feature_extractor.type` strings, sorted."""
  return sorted(_SSD_EXTRACTORS)


def layers_follow_anchors(extractor_type):
  """Whether the extractor makes one map per anchor-generator layer."""
  return extractor_type in _LAYERS_FOLLOW_ANCHORS


def faster_rcnn_types():
  """The supported `faster_rcnn.feature_extractor.type` strings, sorted."""
  return sorted(_FASTER_RCNN_EXTRACTORS)


def lookup_faster_rcnn(extractor_type, path='model.faster_rcnn.feature_extractor.type'):
  """The FasterRCNNFeatureExtractor subclass of `extractor_type`.

  Raises:
    ValueError: naming `path` for an unknown type.
  """
  if extractor_type not in _FASTER_RCNN_EXTRACTORS:
    raise ValueError('%s: unknown feature extractor %r; expected one of %s'
                     % (path, extractor_type, ', '.join(faster_rcnn_types())))
  return _load(*_FASTER_RCNN_EXTRACTORS[extractor_type])


def _load(module_name, class_name):
  return getattr(importlib.import_module('models.' + module_name), class_name)


def lookup(extractor_type, path='feature_extractor.type'):
  """The SSDFeatureExtractor subclass of `extractor_type`.

  Raises:
    ValueError: naming `path` for an unknown or unsupported type.
  """
  if extractor_type in _NOT_BUILT:
    raise ValueError('%s: %r is set, but slimtrain does not build it: %s'
                     % (path, extractor_type, _NOT_BUILT[extractor_type]))
  if extractor_type not in _SSD_EXTRACTORS:
    raise ValueError('%s: unknown feature extractor %r; expected one of %s'
                     % (path, extractor_type, ', '.join(types())))
  return _load(*_SSD_EXTRACTORS[extractor_type])
