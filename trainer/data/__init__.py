"""Data: sources (files, downloads, synthetic; no TensorFlow) and pipelines (tf.data, input_fns)."""
