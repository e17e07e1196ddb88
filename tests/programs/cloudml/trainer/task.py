"""The task of a Cloud ML Engine trainer package (python -m trainer.task --job-dir ...), TF 1.x style."""
import argparse
import json

import numpy as np
import tensorflow as tf

import trainer.model as model
from trainer import model as same_model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=50)
    args = parser.parse_args()
    tf.logging.set_verbosity(tf.logging.INFO)
    assert model is same_model and "JSON" in model.SERVING_FUNCTIONS
    rng = np.random.RandomState(0)
    features = {"x0": rng.randn(256).astype(np.float32), "x1": rng.randn(256).astype(np.float32)}
    labels = (features["x0"] > 0).astype(np.int64)
    estimator = model.build_estimator(args.job_dir, [8])
    estimator.train(lambda: model.input_fn(features, labels), steps=args.train_steps)
    result = estimator.evaluate(lambda: model.input_fn(features, labels, 64, 1))
    print("RESULT " + json.dumps({k: float(v) for k, v in result.items()}))


if __name__ == "__main__":
    main()
