"""The task of a Cloud ML Engine trainer package (python -m trainer.task --job-dir ...), TF 1.x style."""
import argparse
import json

import tensorflow as tf

import trainer.model as model
from trainer import model as same_model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-files", required=True, nargs="+")
    parser.add_argument("--train-steps", type=int, default=50)
    args = parser.parse_args()
    tf.logging.set_verbosity(tf.logging.INFO)
    assert model is same_model and "JSON" in model.SERVING_FUNCTIONS
    estimator = model.build_estimator(args.job_dir, [8])
    estimator.train(lambda: model.input_fn(args.train_files), steps=args.train_steps)
    result = estimator.evaluate(lambda: model.input_fn(args.train_files, 64, 1))
    print("RESULT " + json.dumps({k: float(v) for k, v in result.items()}))


if __name__ == "__main__":
    main()
