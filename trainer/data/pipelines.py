"""Input pipelines in a graph: tf.data over the loaded arrays, or the tensors of an input_fn.

The arrays never become graph constants (that makes start-up slow and every ``.meta``
file as large as the dataset): the pipelines read them from placeholders fed when
their iterators are initialised.
"""

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from trainer.config.targets import declared_args, load_callable
from trainer.data.sources import IMAGE_SHAPE
from trainer.errors import ConfigError
from trainer.estimator import ModeKeys

tf1 = tf.compat.v1

INPUT_FN_ARGS = ("params", "mode", "config")


@dataclass(frozen=True)
class Pipeline:
    """An input pipeline in a graph: its output tensors and how to (re)start it.

    ``initializer`` is None for a pipeline that needs none (tensors an input_fn returned);
    ``feeds(step)`` is what the initializer must be fed when the global step is ``step``.
    """

    features: Dict[str, object]  # {feature_key: float32 [batch, 28, 28, 1] in [0, 1]} for the built-in data
    labels: object  # int64 [batch]
    initializer: Optional[object]
    feeds: Callable[[int], dict]


def without_autotune_model(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` without tf.data's autotuning model thread. Destroying an iterator waits for that
    thread's next wake-up, which comes up to a minute apart: closing the session after SIGTERM
    then blocked for 5-60 s (measured: up to 14 s with the default CNN; 0.01 s without). With it
    off, ``AUTOTUNE`` parallelism becomes the number of cores and ``prefetch(AUTOTUNE)`` keeps its
    own buffer heuristic."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def _shuffled_batches(images, labels, batch_size: int, seed: Optional[int], replicas, start_batch):
    """Batches of a full shuffle per epoch, starting at batch ``start_batch``, in constant time.

    Epoch ``e``'s order is a permutation drawn from the stateless seed (``seed``, ``e``), and the
    stream of example indices runs on across epochs, so batch ``b`` is the same whether the run
    started at 0 or resumed at ``b``: a resumed run starts in its epoch and skips at most one
    epoch's indices (not ``b`` batches of data). The images are gathered per batch of indices.
    A seed of None draws one at random (no exact resumption then).
    """
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    count, shard = replicas
    order = tf.range(shard, tf.shape(labels, out_type=tf.int64)[0], count, dtype=tf.int64)  # this task's examples
    examples = tf.size(order, out_type=tf.int64)
    position = start_batch * batch_size
    first_epoch = position // tf.maximum(examples, 1)

    def epoch_order(epoch):
        keys = tf.random.stateless_uniform(tf.reshape(examples, [1]), seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
        return tf.data.Dataset.from_tensor_slices(tf.gather(order, tf.argsort(keys)))

    indices = tf.data.Dataset.range(first_epoch, tf.int64.max).flat_map(epoch_order)
    indices = indices.skip(position % tf.maximum(examples, 1)).batch(batch_size, drop_remainder=True)
    return indices.map(lambda index: (tf.gather(images, index), tf.gather(labels, index)))


def make_pipeline(
    images: np.ndarray, labels: np.ndarray, batch_size: int, feature_key: str, train: bool,
    seed: Optional[int] = None, shuffle_buffer: Optional[int] = None, replicas=(1, 0),
) -> Pipeline:
    """Build a pipeline over in-memory arrays in the default graph, fed through placeholders.

    Training: a seeded full shuffle per epoch, fixed-size batches running on across epochs,
    started at the restored global step's batch in constant time (``data.shuffle_buffer``
    smaller than the data keeps TF's buffered shuffle, resumed by skipping), so that a resumed
    run sees the same batches as one that never stopped. Evaluation: one pass, the last batch
    may be short.

    ``replicas`` = (N, i): a cluster's training task i of N reads every N-th example from the
    i-th, and skips step // N batches (asynchronous replicas share the global step).
    """
    prefix = "train_input" if train else "eval_input"
    with tf1.name_scope(prefix):
        pixels = images.dtype == np.uint8  # else float images, already scaled (trainer.data.sources.checked_images)
        images_ph = tf1.placeholder(tf.uint8 if pixels else tf.float32, [None, *IMAGE_SHAPE], name="images")
        labels_ph = tf1.placeholder(tf.int64, [None], name="labels")
        skip = None
        if train and shuffle_buffer and shuffle_buffer < len(images):
            # A partial shuffle buffer: TF's shuffle, resumed by skipping (time linear in the step).
            skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
            ds = tf.data.Dataset.from_tensor_slices((images_ph, labels_ph))
            if replicas[0] > 1:
                ds = ds.shard(replicas[0], replicas[1])
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
            ds = ds.batch(batch_size, drop_remainder=True).skip(skip)
        elif train:
            skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
            ds = _shuffled_batches(images_ph, labels_ph, batch_size, seed, replicas, skip)
        else:
            ds = tf.data.Dataset.from_tensor_slices((images_ph, labels_ph)).batch(batch_size)

        def to_features(x, y):
            x = tf.cast(tf.expand_dims(x, -1), tf.float32)
            x = x / 255.0 if pixels else x
            return {feature_key: x}, y

        ds = ds.map(to_features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        iterator = tf1.data.make_initializable_iterator(without_autotune_model(ds))
        features, batch_labels = iterator.get_next()

    def feeds(step: int = 0) -> dict:
        feed = {images_ph: images, labels_ph: labels}
        if skip is not None:
            feed[skip] = step // replicas[0]
        return feed

    return Pipeline(features, batch_labels, iterator.initializer, feeds)


def call_input_fn(input_fn: Callable, key: str, path: str, mode: str, params: dict, config) -> Any:
    """``input_fn`` called with the ones of ``params``, ``mode``, ``config`` it declares."""
    takes = declared_args(input_fn, key, path, INPUT_FN_ARGS)
    offered = {"params": params, "mode": mode, "config": config}
    return input_fn(**{k: v for k, v in offered.items() if k in takes})


def make_input_fn_pipeline(input_fn: Callable, path: str, mode: str, params: dict, run_config) -> Pipeline:
    """A pipeline from an Estimator-style ``input_fn``: a ``tf.data.Dataset`` of ``(features, labels)``
    batches, or ``(features, labels)`` tensors (from a one-shot iterator, queues, ...).

    The features reach the model_fn as the input_fn gave them (a dict or a tensor). A training
    Dataset gets ``skip(step)`` so a resumed run continues where it stopped (the input_fn's
    shuffle must be seeded for that to be exact).
    """
    train = mode == ModeKeys.TRAIN
    key = "data.train_fn" if train else ("data.eval_fn" if mode == ModeKeys.EVAL else "predict.input_fn")
    with tf1.name_scope("train_input" if train else "eval_input"):
        result = call_input_fn(input_fn, key, path, mode, params, run_config)
        if isinstance(result, tf.data.Dataset):
            skip = None
            if train:
                skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
                result = result.skip(skip)
            iterator = tf1.data.make_initializable_iterator(without_autotune_model(result))
            output = iterator.get_next()
            initializer = iterator.initializer
            feeds = (lambda step=0: {skip: step}) if train else (lambda step=0: {})
        else:
            output, initializer, feeds = result, None, (lambda step=0: {})
    features, labels = output if isinstance(output, (tuple, list)) else (output, None)
    return Pipeline(features, labels, initializer, feeds)


def _input_fn(cfg, key: str):
    path = cfg.data.get(key)
    if not path:
        raise ConfigError(f"data.{key} is not set; data=input_fn needs data.train_fn and data.eval_fn (dotted paths)")
    return load_callable(path, f"data.{key}"), path


def make_train_input(cfg, arrays, params: dict, run_config, replicas=(1, 0)) -> Pipeline:
    """The training pipeline: over the loaded arrays, or from ``data.train_fn`` (``params["batch_size"]``
    is ``train.batch_size``). ``replicas`` = (training tasks, this task's index): each reads its own shard."""
    if arrays is None:
        fn, path = _input_fn(cfg, "train_fn")
        return make_input_fn_pipeline(fn, path, ModeKeys.TRAIN, dict(params, batch_size=cfg.train.batch_size),
                                      run_config)
    return make_pipeline(arrays.train_x, arrays.train_y, cfg.train.batch_size, cfg.data.feature_key, train=True,
                         seed=cfg.train.seed, shuffle_buffer=cfg.data.shuffle_buffer, replicas=replicas)


def make_eval_input(cfg, arrays, params: dict, run_config) -> Pipeline:
    """The evaluation pipeline, one pass: the test split, or ``data.eval_fn`` (``params["batch_size"]``
    is ``eval.batch_size``)."""
    if arrays is None:
        fn, path = _input_fn(cfg, "eval_fn")
        return make_input_fn_pipeline(fn, path, ModeKeys.EVAL, dict(params, batch_size=cfg.eval.batch_size),
                                      run_config)
    return make_pipeline(arrays.test_x, arrays.test_y, cfg.eval.batch_size, cfg.data.feature_key, train=False)


def batch_size_of(features, labels):
    """The number of examples in a batch: the first dimension of the labels, else of the first feature."""
    tensor = labels
    if tensor is None:
        tensor = features[sorted(features)[0]] if isinstance(features, dict) else features
    if isinstance(tensor, tf.SparseTensor):
        return tensor.dense_shape[0]
    return tf.shape(tensor, out_type=tf.int64)[0]
