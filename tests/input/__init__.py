"""Tests of the input pipeline: decoders, reader builder, batcher, dataset tools."""
