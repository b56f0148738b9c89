"""Faster R-CNN's PNASNet-5 large backbone (type faster_rcnn_pnas).

PNASNet-5 large (models/pnasnet.py) is cut before its second strided cell:

    first stage  (per image):    conv0, cell_stem_0/1, cell_0..7     stride 16
    second stage (per proposal): cell_8 (strided), cell_9..11, relu

As for NASNet (models/faster_rcnn_nas_feature_extractor.py, whose
`NasNetFamilyFeatureExtractor` this shares), the first stage's feature map
is its last two cells concatenated (cell_6 and cell_7: 2 x 2160 = 4320
channels) and the second stage splits each crop back into the two states
cell_8 reads. A 17x17 crop gives 9x9x4320 box classifier features.

Usage:

    extractor = FasterRCNNPNASFeatureExtractor(is_training=True,
                                               first_stage_features_stride=16)
    images = extractor.preprocess(resized_images)      # [0, 255] -> [-1, 1]
    rpn_features, endpoints = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')   # [B, H/16, W/16, 4320]
    box_features = extractor.extract_box_classifier_features(
        crops, scope='SecondStageFeatureExtractor')   # [N, 9, 9, 4320]

Behaviour kept from the OD API: drop path in training (keep probability 0.6
for the last cell, total 14 cells, 250k steps), first-stage batch norm
following `is_training`, PNASNet's own L2 weight decay 4e-5, static image
size; checkpoint names as for NASNet (unscoped, '/ExponentialMovingAverage').
The OD API has no faster_rcnn_pnas sample config, so no zoo variable list
checks this layout; its names follow slim's PNASNet.
"""

import tf_slim as slim

from models import faster_rcnn_nas_feature_extractor
from models import nasnet
from models import pnasnet


class FasterRCNNPNASFeatureExtractor(
    faster_rcnn_nas_feature_extractor.NasNetFamilyFeatureExtractor):
  """Faster R-CNN feature extractor over PNASNet-5 large (see the module docstring)."""

  _TYPE = 'faster_rcnn_pnas'
  _LAST_FIRST_STAGE_CELL = 7

  def _first_stage_cells(self, images):
    """Stem and cells 0..7 (cell_4 strided)."""
    config = pnasnet.LARGE
    cell = pnasnet.make_cell(config, self._is_training)
    with slim.arg_scope(pnasnet.large_arg_scope(batch_norm_training=self._is_training)):
      net, cell_outputs = nasnet.build_stem(images, config, cell)
      _, endpoints = pnasnet.stack_cells(net, cell_outputs, config, cell, 0,
                                         self._LAST_FIRST_STAGE_CELL + 1)
    endpoints['Stem'] = net
    return endpoints

  def _second_stage_cells(self, hidden_previous, hidden):
    """Cells 8..11 (cell_8 strided)."""
    config = pnasnet.LARGE
    cell = pnasnet.make_cell(config, self._is_training)
    with slim.arg_scope(pnasnet.large_arg_scope(batch_norm_training=self._train_batch_norm)):
      net, _ = pnasnet.stack_cells(hidden, [None, hidden_previous, hidden], config, cell,
                                   self._LAST_FIRST_STAGE_CELL + 1, config.num_cells)
    return net

