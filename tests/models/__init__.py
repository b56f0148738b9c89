"""Tests of models/, builders/model_builder.py and the detector pieces in core/."""
