"""``tf.estimator.export``: the serving input functions Estimator built, and the namespace with the
export outputs and ``ServingInputReceiver`` of the model_fn contract (``trainer.contract``)."""

from trainer.contract import ClassificationOutput, PredictOutput, RegressionOutput, ServingInputReceiver


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A serving input function feeding ``features`` (a dict of tensors shaped like the real features)
    through placeholders of the same dtype and shape, the batch dimension ``default_batch_size``."""
    import tensorflow as tf

    def serving_input_receiver_fn():
        receivers = {}
        for name, tensor in features.items():
            shape = [default_batch_size] + tensor.shape.as_list()[1:]
            receivers[name] = tf.compat.v1.placeholder(tensor.dtype, shape, name=name)
        return ServingInputReceiver(dict(receivers), receivers)

    return serving_input_receiver_fn


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    """A serving input function taking serialized ``tf.Example`` protos (``examples``) parsed with
    ``feature_spec`` (as given to ``tf.io.parse_example``)."""
    import tensorflow as tf

    def serving_input_receiver_fn():
        serialized = tf.compat.v1.placeholder(tf.string, [default_batch_size], name="input_example_tensor")
        features = tf.compat.v1.io.parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


class export:  # noqa: N801  (mirrors the tf.estimator.export namespace)
    PredictOutput = PredictOutput
    ClassificationOutput = ClassificationOutput
    RegressionOutput = RegressionOutput
    ServingInputReceiver = ServingInputReceiver
    build_raw_serving_input_receiver_fn = staticmethod(build_raw_serving_input_receiver_fn)
    build_parsing_serving_input_receiver_fn = staticmethod(build_parsing_serving_input_receiver_fn)
