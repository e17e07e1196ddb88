"""TensorFlow's "Multi-worker training with Estimator" tutorial program (TF 2.x era), as its users
ran it: graph mode turned on at the top, ``MultiWorkerMirroredStrategy`` in
``RunConfig(train_distribute=...)``, ``TF_CONFIG`` set by the platform on every worker, an
``input_fn`` that shards by its ``input_context``, a Keras model inside the model_fn with a TF1
optimizer's ``minimize``, and ``tf.estimator.train_and_evaluate``. Small synthetic data in place
of tensorflow_datasets' MNIST, a fixed number of steps, and no shuffle, so that a run on one
worker with the whole global batch sees the same batches. ``--strategy`` swaps in the other
strategies such programs passed (a v1 ``ParameterServerStrategy`` with ps tasks in ``TF_CONFIG``,
a ``CentralStorageStrategy`` on one machine).
"""

import argparse

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

LEARNING_RATE = 0.1


def make_data(seed, count):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(count, 8)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] - x[:, 2] > 0).astype(np.int64)


def make_input_fn(batch_size):
    def input_fn(mode, input_context=None):
        x, y = make_data(0 if mode == tf.estimator.ModeKeys.TRAIN else 1, 1024)
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
        if input_context:
            dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if mode == tf.estimator.ModeKeys.TRAIN:
            dataset = dataset.repeat()
        return dataset.batch(batch_size)
    return input_fn


def make_model_fn(batch_size):
    def model_fn(features, labels, mode):
        model = tf.keras.Sequential([
            tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
            tf.keras.layers.Dense(2),
        ])
        logits = model(features, training=False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode=mode, predictions={"logits": logits})
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=LEARNING_RATE)
        loss = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)(labels, logits)
        loss = tf.reduce_sum(loss) * (1.0 / batch_size)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.EstimatorSpec(mode, loss=loss)
        return tf.estimator.EstimatorSpec(
            mode=mode, loss=loss,
            train_op=optimizer.minimize(loss, tf.compat.v1.train.get_or_create_global_step()))
    return model_fn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--one-worker", action="store_true", help="no strategy: the single-process reference")
    parser.add_argument("--strategy", choices=["multi_worker_mirrored", "parameter_server", "central_storage"],
                        default="multi_worker_mirrored")
    args = parser.parse_args()
    strategy = None if args.one_worker else {
        "multi_worker_mirrored": tf.distribute.experimental.MultiWorkerMirroredStrategy,
        "parameter_server": tf.compat.v1.distribute.experimental.ParameterServerStrategy,
        "central_storage": tf.distribute.experimental.CentralStorageStrategy,
    }[args.strategy]()
    config = tf.estimator.RunConfig(train_distribute=strategy, tf_random_seed=3, save_checkpoints_steps=20)
    classifier = tf.estimator.Estimator(model_fn=make_model_fn(args.batch_size), model_dir=args.model_dir,
                                        config=config)
    tf.estimator.train_and_evaluate(
        classifier,
        train_spec=tf.estimator.TrainSpec(input_fn=make_input_fn(args.batch_size), max_steps=args.steps),
        eval_spec=tf.estimator.EvalSpec(input_fn=make_input_fn(args.batch_size)))


if __name__ == "__main__":
    main()
