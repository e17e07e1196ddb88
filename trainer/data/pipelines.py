"""Input pipelines in a graph: tf.data over the loaded arrays, or the tensors of an input_fn.

The arrays never become graph constants (that makes start-up slow and every ``.meta``
file as large as the dataset): the pipelines read them from placeholders fed when
their iterators are initialised.
"""

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from trainer.config.targets import callable_name, declared_args, load_callable
from trainer.data.features import Feature
from trainer.data.files import CYCLE_LENGTH, DEFAULT_SHUFFLE_BUFFER, FileSource
from trainer.errors import ConfigError, ContractError, DataError, NanLossError
from trainer.contract import ModeKeys

tf1 = tf.compat.v1
log = logging.getLogger("trainer")

INPUT_FN_ARGS = ("params", "mode", "config", "input_context")


@dataclass(frozen=True)
class Pipeline:
    """An input pipeline in a graph: its output tensors and how to (re)start it.

    ``initializer`` is None for a pipeline that needs none (tensors an input_fn returned);
    ``feeds(step)`` is what the initializer must be fed when the global step is ``step``.
    """

    features: Dict[str, object]  # {feature_key: float32 [batch, ...]} for the built-in data
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


# The pipelines' own functions have no Python control flow on tensors: traced as written, without
# AutoGraph's conversion (about 0.5 s of the start-up on a 2-core CPU for the three of a run).
_traced_as_is = tf.autograph.experimental.do_not_convert


def seed_or_random(seed: Optional[int]) -> int:
    """``train.seed``, or one drawn at random for a run whose config leaves it null."""
    return int(np.random.default_rng().integers(2**31)) if seed is None else int(seed)


def batches_done(step: int, replicas) -> int:
    """The batches one training task read by global step ``step``. ``replicas`` = (N, i) or (N, i, lockstep):
    asynchronous tasks share the global step, so each read about step // N; tasks in lockstep
    (``distributed.strategy=collective``: every global step is a step of every task) read ``step``."""
    return step if len(replicas) > 2 and replicas[2] else step // replicas[0]


def _shuffled_batches(examples, batch_size: int, seed: Optional[int], replicas, start_batch):
    """Batches of example indices, a full shuffle per epoch, starting at batch ``start_batch`` in
    constant time.

    Epoch ``e``'s order is a permutation drawn from the stateless seed (``seed``, ``e``), and the
    stream of example indices runs on across epochs, so batch ``b`` is the same whether the run
    started at 0 or resumed at ``b``: a resumed run starts in its epoch and skips at most one
    epoch's indices (not ``b`` batches of data). A seed of None draws one at random (no exact
    resumption then).
    """
    seed = seed_or_random(seed)
    count, shard = replicas[0], replicas[1]
    order = tf.range(shard, examples, count, dtype=tf.int64)  # this task's examples
    size = tf.size(order, out_type=tf.int64)
    position = start_batch * batch_size
    first_epoch = position // tf.maximum(size, 1)

    @_traced_as_is
    def epoch_order(epoch):
        keys = tf.random.stateless_uniform(tf.reshape(size, [1]), seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
        return tf.data.Dataset.from_tensor_slices(tf.gather(order, tf.argsort(keys)))

    indices = tf.data.Dataset.range(first_epoch, tf.int64.max).flat_map(epoch_order)
    return indices.skip(position % tf.maximum(size, 1)).batch(batch_size, drop_remainder=True)


def example_shape(x: np.ndarray) -> tuple:
    """The shape one example of ``x`` reaches the model in: [H, W] images get a channel axis."""
    shape = tuple(x.shape[1:])
    return shape + (1,) if len(shape) == 2 else shape


def _check_unchanged(x: np.memmap) -> None:
    """Before each batch read from a memory-mapped file: it still holds the whole array. A file cut
    short under a running job would otherwise kill the process with SIGBUS on the next read (no
    line, no record); this fails the step in one line naming the file instead.

    Raises:
      DataError: the file is gone or shorter than the array.
    """
    path = getattr(x, "filename", None)
    if not path:
        return
    needed = int(getattr(x, "offset", 0)) + x.nbytes
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise DataError(f"{path}: the memory-mapped training array went away during the run ({e.strerror}); "
                        "restore it and run the same command to resume") from None
    if size < needed:
        raise DataError(f"{path}: the memory-mapped array file was cut to {size} bytes during the run (it needs "
                        f"{needed}); restore it and run the same command to resume")


def _rows_reader(x: np.ndarray, placeholder):
    """index batch -> feature rows: ``tf.gather`` from the fed array, or, for a memory-mapped array,
    a read of just those rows (the array never enters memory whole)."""
    if placeholder is not None:
        return lambda index: tf.gather(placeholder, index)

    def read(i):
        _check_unchanged(x)
        return np.ascontiguousarray(x[i])

    def rows(index):
        out = tf.numpy_function(read, [index], tf.as_dtype(x.dtype), stateful=False)
        out.set_shape([None, *x.shape[1:]])
        return out

    return rows


def check_batch_fits(batch_size: int, examples: int, replicas=(1, 0)) -> None:
    """A training batch holds each example at most once: a batch larger than the examples (this
    task's share of them) would repeat them within it, and a huge one would fill memory.

    Raises:
      ConfigError: naming ``train.batch_size`` and the largest that fits.
    """
    count, shard = replicas[0], replicas[1]
    share = len(range(shard, examples, count))
    if batch_size > share:
        task = "" if count <= 1 else f" of training task {shard} of {count}"
        raise ConfigError(f"train.batch_size={batch_size}: larger than the {share} training examples{task}, so a "
                          f"batch would hold examples more than once; set train.batch_size to at most {share}, or "
                          "use more data")


def make_pipeline(
    images: np.ndarray, labels: np.ndarray, batch_size: int, feature_key: str, train: bool,
    seed: Optional[int] = None, shuffle_buffer: Optional[int] = None, replicas=(1, 0),
) -> Pipeline:
    """Build a pipeline over arrays in the default graph: features of any shape and numeric dtype
    (``trainer.data.arrays.checked_features``) and int64 labels. In-memory arrays are fed through
    placeholders when the iterator is initialised; memory-mapped ones (``np.memmap``) are read a
    batch of rows at a time.

    Training: a seeded full shuffle per epoch, fixed-size batches running on across epochs,
    started at the restored global step's batch in constant time (``data.shuffle_buffer``
    smaller than the data keeps TF's buffered shuffle, resumed by skipping), so that a resumed
    run sees the same batches as one that never stopped. Evaluation: one pass, the last batch
    may be short.

    ``replicas`` = (N, i): a cluster's training task i of N reads every N-th example from the
    i-th, and on resuming skips the batches it read (:func:`batches_done`).

    Features reach the model as float32: uint8 pixels scaled to [0, 1], other numbers as they are;
    [N, H, W] images as [batch, H, W, 1].
    """
    prefix = "train_input" if train else "eval_input"
    pixels = images.dtype == np.uint8
    mapped = isinstance(images, np.memmap)
    shape = example_shape(images)
    with tf1.name_scope(prefix):
        images_ph = None if mapped else tf1.placeholder(tf.as_dtype(images.dtype), [None, *images.shape[1:]],
                                                        name="images")
        labels_ph = tf1.placeholder(tf.int64, [None], name="labels")
        rows = _rows_reader(images, images_ph)
        examples = tf.shape(labels_ph, out_type=tf.int64)[0]
        skip = None
        if train and shuffle_buffer and shuffle_buffer < len(images):
            # A partial shuffle buffer: TF's shuffle, resumed by skipping (time linear in the step).
            skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
            ds = tf.data.Dataset.range(examples)
            if replicas[0] > 1:
                ds = ds.shard(replicas[0], replicas[1])
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
            ds = ds.batch(batch_size, drop_remainder=True).skip(skip)
        elif train:
            skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
            ds = _shuffled_batches(examples, batch_size, seed, replicas, skip)
        else:
            ds = tf.data.Dataset.range(examples).batch(batch_size)

        @_traced_as_is
        def to_features(index):
            x = tf.cast(rows(index), tf.float32)
            x = x / 255.0 if pixels else x
            return {feature_key: tf.reshape(x, [-1, *shape])}, tf.gather(labels_ph, index)

        ds = ds.map(to_features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        iterator = tf1.data.make_initializable_iterator(without_autotune_model(ds))
        features, batch_labels = iterator.get_next()

    def feeds(step: int = 0) -> dict:
        feed = {labels_ph: labels}
        if images_ph is not None:
            feed[images_ph] = images
        if skip is not None:
            feed[skip] = batches_done(step, replicas)
        return feed

    return Pipeline(features, batch_labels, iterator.initializer, feeds)


_TF_DTYPES = {"uint8": tf.uint8, "int64": tf.int64, "int32": tf.int32, "float32": tf.float32, "string": tf.string}


def _read_file(source: FileSource):
    if source.kind == "tfrecord":
        return _traced_as_is(lambda path: tf.data.TFRecordDataset(path, compression_type=source.compression or ""))
    non_empty = _traced_as_is(lambda line: tf.strings.length(line) > 0)
    return _traced_as_is(lambda path: tf.data.TextLineDataset(path).skip(1).filter(non_empty))


def _parse_spec(feature: Feature):
    if feature.var_len:
        return tf.io.VarLenFeature(_TF_DTYPES[feature.dtype] if not feature.encoding else tf.string)
    if feature.encoding:
        return tf.io.FixedLenFeature([], tf.string)
    dtype = tf.int64 if feature.stored == "int64_list" else _TF_DTYPES[feature.dtype]
    return tf.io.FixedLenFeature(list(feature.shape), dtype, default_value=feature.default)


def _decoded(feature: Feature, value):
    """A batch of one parsed feature, decoded: raw bytes to arrays, encoded images to pixels."""
    if feature.var_len:
        return value
    if feature.encoding == "raw":
        return tf.reshape(tf.io.decode_raw(value, _TF_DTYPES[feature.dtype]), [-1, *feature.shape])
    if feature.encoding:
        def decode(one):
            image = tf.io.decode_image(one, channels=feature.shape[-1], expand_animations=False)
            return tf.ensure_shape(image, list(feature.shape))

        return tf.map_fn(decode, value, fn_output_signature=tf.TensorSpec(feature.shape, tf.uint8))
    if feature.dtype == "int32":
        return tf.cast(value, tf.int32)
    return value


def _parser(source: FileSource):
    """A batch of serialized records (or CSV lines) -> {name: [batch, ...]} for every feature, label
    included (parsed a batch at a time: several times faster than record by record)."""
    if source.kind == "tfrecord":
        spec = {name: _parse_spec(f) for name, f in source.features.items()}

        def parse(records):
            parsed = tf.io.parse_example(records, spec)
            return {name: _decoded(f, parsed[name]) for name, f in source.features.items()}

        return parse
    defaults = [[] if f.default is None else [f.default] for f in source.features.values()]
    defaults = [tf.constant(d, _TF_DTYPES[f.dtype]) for d, f in zip(defaults, source.features.values())]

    def parse_csv(lines):
        values = tf.io.decode_csv(lines, defaults)
        return dict(zip(source.features, values))

    return parse_csv


def _class_id(source: FileSource, label):
    """A batch of labels as int64 class ids, checked against the classes (a bad one fails the input
    op, which :meth:`FileSource.diagnose` then explains); float32 labels (a regressor's) as they are,
    checked to be finite."""
    if label.dtype == tf.float32:
        return tf.debugging.assert_all_finite(label, f"{_NOT_FINITE} data.label_key")
    if source.label_vocabulary is not None:
        vocabulary = tf.constant(source.label_vocabulary)
        label = tf.strings.as_string(label) if label.dtype != tf.string else label
        hits = tf.cast(tf.equal(tf.expand_dims(label, -1), vocabulary), tf.int64)
        check = tf.debugging.assert_equal(tf.reduce_sum(hits, axis=-1), tf.constant(1, tf.int64),
                                          message="label not in vocabulary")
        with tf.control_dependencies([check]):
            return tf.argmax(hits, axis=-1, output_type=tf.int64)
    label = tf.cast(label, tf.int64)
    check = tf.debugging.assert_less(label, tf.constant(source.num_classes, tf.int64), message="label out of range")
    check_low = tf.debugging.assert_non_negative(label, message="label out of range")
    with tf.control_dependencies([check, check_low]):
        return tf.identity(label)


def _packable(source: FileSource, ignored) -> list:
    """The inputs the built-in models' one tensor is made of.

    Raises:
      ConfigError: none is left, or one is a string or of variable length.
    """
    inputs = [f for name, f in source.inputs.items() if name not in ignored]
    if not inputs:
        raise ConfigError("data.ignore leaves no feature for the model; ignore fewer")
    for f in inputs:
        if f.dtype == "string" or f.var_len:
            raise ConfigError(f"data.features.{f.name} is {'a string' if f.dtype == 'string' else 'of variable length'}; "
                              f"the built-in models read numbers: add it to data.ignore, or use your own model_fn "
                              "(model=model_fn), which gets every feature by name")
    return inputs


def _packed(inputs: list, features: dict) -> object:
    """The inputs as the built-in models read them: one float32 tensor (uint8 scaled to [0, 1]);
    a single input keeps its shape ([H, W] gets a channel axis), several are flattened and joined."""

    def number(f):
        x = features[f.name]
        if f.dtype in ("int64", "int32"):  # float32 holds integers exactly up to 2**24 only: refuse, never round
            exact = tf.debugging.assert_less_equal(tf.abs(x), tf.constant(_EXACT_IN_FLOAT32, x.dtype),
                                                   message=f"{_BEYOND_FLOAT32} data.features.{f.name}")
            with tf.control_dependencies([exact]):
                x = tf.identity(x)
        x = tf.cast(x, tf.float32)
        if f.dtype == "float32":  # a NaN input is the data's fault: say so before it reaches the loss
            x = tf.debugging.assert_all_finite(x, f"{_NOT_FINITE} data.features.{f.name}")
        return x / 255.0 if f.dtype == "uint8" else x

    if len(inputs) == 1:
        x = number(inputs[0])
        return tf.expand_dims(x, -1) if len(inputs[0].shape) == 2 else x
    return tf.concat([tf.reshape(number(f), [-1, f.size]) for f in inputs], axis=1)


# Uncompressed CSV training files up to this size in all are read into memory once: parsing a batch
# of lines gathered from memory ran a census-style DNN 2-3x faster than streaming the lines through
# a record-level shuffle (bench.csv_canned).
CSV_IN_MEMORY_BYTES = 256 * 2**20


def _csv_lines_in_memory(source: FileSource) -> Optional[np.ndarray]:
    """The CSV training files' rows (header and empty lines dropped, as streamed) in file order, as
    bytes; None for TFRecord, compressed or larger files."""
    if source.kind != "csv" or source.compression:
        return None
    if sum(os.path.getsize(path) for path in source.train_files) > CSV_IN_MEMORY_BYTES:
        return None
    lines = []
    for path in source.train_files:
        with open(path, "rb") as f:
            lines.extend(line for line in f.read().split(b"\n")[1:] if line.rstrip(b"\r"))
    return np.array([line[:-1] if line.endswith(b"\r") else line for line in lines], dtype=object)


def _csv_from_memory(lines: np.ndarray, examples: Callable, batch_size: int, seed: int, replicas) -> Pipeline:
    """Training batches of CSV ``lines`` held in memory (fed through a placeholder, never a graph
    constant): a full seeded shuffle per epoch, started at the restored step's batch in constant
    time (``_shuffled_batches``), each batch of lines gathered and parsed at once."""
    check_batch_fits(batch_size, len(lines), replicas)
    with tf1.name_scope("train_input"):
        lines_ph = tf1.placeholder(tf.string, [None], name="csv_lines")
        skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
        ds = _shuffled_batches(tf.shape(lines_ph, out_type=tf.int64)[0], batch_size, seed, replicas, skip)
        ds = ds.map(_traced_as_is(lambda index: examples(tf.gather(lines_ph, index))),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        iterator = tf1.data.make_initializable_iterator(without_autotune_model(ds.prefetch(tf.data.AUTOTUNE)))
        features, labels = iterator.get_next()
    return Pipeline(features, labels, iterator.initializer,
                    lambda step=0: {lines_ph: lines, skip: batches_done(step, replicas)})


def _examples(source: FileSource, pack_key: Optional[str], ignored) -> Callable:
    """A batch of records -> (features, labels): parsed, labels as class ids (or a regressor's
    numbers), the ignored features dropped, and (``pack_key``) the rest packed into one tensor."""
    unknown = set(ignored) - set(source.inputs)
    if unknown:
        raise ConfigError(f"data.ignore: {sorted(unknown)} are not features (there are {', '.join(source.inputs)})")
    parse, packed = _parser(source), _packable(source, ignored) if pack_key else None

    @_traced_as_is
    def examples(records):
        parsed = parse(records)
        label = _class_id(source, parsed.pop(source.label_key))
        for name in ignored:
            parsed.pop(name, None)
        features = {pack_key: _packed(packed, parsed)} if pack_key else parsed
        return features, label

    return examples


def make_file_pipeline(source: FileSource, batch_size: int, train: bool, pack_key: Optional[str],
                       seed: Optional[int] = None, replicas=(1, 0), ignored=()) -> Pipeline:
    """A pipeline over a TFRecord or CSV source (``trainer.data.files``), streamed from its files.

    Training: epochs of a seeded file order, interleaved, through a seeded shuffle buffer, started
    at the restored step's record without replaying earlier epochs (module doc of
    ``trainer.data.files``); CSV training files of up to ``CSV_IN_MEMORY_BYTES`` are read into memory
    once instead (``_csv_from_memory``). Evaluation: the files once, in order. Features: every input by name,
    or (``pack_key``, the built-in models) one float32 tensor under ``pack_key``.
    """
    seed = seed_or_random(seed)
    read = _read_file(source)
    examples = _examples(source, pack_key, ignored)
    lines = _csv_lines_in_memory(source) if train else None
    if lines is not None:
        source.check_training_records(replicas)
        return _csv_from_memory(lines, examples, batch_size, seed, replicas)
    with tf1.name_scope("train_input" if train else "eval_input"):
        first_epoch = offset = None
        if train:
            files, by_record = source.shard(replicas)
            source.check_training_records(replicas)
            if replicas[0] > 1:
                log.info("training task %d of %d reads %s", replicas[1], replicas[0],
                         f"one record in {by_record[0]}, from record {by_record[1]}" if by_record
                         else f"{len(files)} of the {len(source.train_files)} training files: {', '.join(files)}")
            names = tf.constant(files)
            buffer = source.shuffle_buffer
            if buffer > DEFAULT_SHUFFLE_BUFFER:
                # More than the records would only reserve memory (1e11 was std::bad_alloc): the same
                # full shuffle, the same order, with a buffer the size of the data.
                buffer = max(1, min(buffer, source.epoch_records(replicas)))
            first_epoch = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="first_epoch")
            offset = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_records")

            @_traced_as_is
            def epoch_records(epoch):
                keys = tf.random.stateless_uniform([len(files)], seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
                ds = tf.data.Dataset.from_tensor_slices(tf.gather(names, tf.argsort(keys)))
                ds = ds.interleave(read, cycle_length=min(CYCLE_LENGTH, len(files)), block_length=1,
                                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                if by_record is not None:
                    ds = ds.shard(*by_record)
                return ds.shuffle(buffer, seed=seed * 1_000_003 + epoch)

            ds = tf.data.Dataset.range(first_epoch, tf.int64.max).flat_map(epoch_records).skip(offset)
            ds = ds.batch(batch_size, drop_remainder=True)
        else:
            ds = tf.data.Dataset.from_tensor_slices(source.eval_files).flat_map(read).batch(batch_size)
        ds = ds.map(examples, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        iterator = tf1.data.make_initializable_iterator(without_autotune_model(ds.prefetch(tf.data.AUTOTUNE)))
        features, labels = iterator.get_next()

    def feeds(step: int = 0) -> dict:
        if not train:
            return {}
        position = batches_done(step, replicas) * batch_size
        if not position:
            return {}
        per_epoch = source.epoch_records(replicas)
        if not per_epoch:
            raise DataError(f"data.train_files: this task's files hold no records ({source.describe()})")
        epoch, skip = divmod(position, per_epoch)
        return {first_epoch: epoch, offset: skip}

    return Pipeline(features, labels, iterator.initializer, feeds)


_EXACT_IN_FLOAT32 = 2**24
_BEYOND_FLOAT32 = "an integer beyond 2**24 (not exact in float32) in"
_NOT_FINITE = "NaN or Inf in"


def input_error(data, error: Exception) -> Optional[DataError]:
    """A one-line DataError naming the file and record when ``error`` came from a file source's
    input (a record that does not parse, a bad label); None when it did not or nothing is found."""
    if not isinstance(data, FileSource):
        return None
    if isinstance(error, NanLossError):
        found = data.diagnose(data.train_files, numbers=True)  # a model_fn of the user's read a NaN input
        return DataError(f"{found}; the loss became NaN or Inf") if found else None
    if not isinstance(error, tf.errors.OpError):
        return None
    text = str(error)
    if "train_input/" in text:
        files, split = data.train_files, "data.train_files"
    elif "eval_input/" in text:
        files, split = data.eval_files, "data.eval_files"
    else:
        return None
    for marker in (_BEYOND_FLOAT32, _NOT_FINITE):
        if marker in text:
            found = data.diagnose(files, numbers=True)  # the file and record
            feature = text.split(marker, 1)[1].split()[0].rstrip(":")
            return DataError(found or f"{split}: {marker} {feature}; fix the records, rescale the feature or add it "
                                      "to data.ignore")

    found = data.diagnose(files)
    return DataError(found) if found else None


def call_input_fn(input_fn: Callable, key: str, path: str, mode: str, params: dict, config, replicas=(1, 0)) -> Any:
    """``input_fn`` called with the ones of ``params``, ``mode``, ``config``, ``input_context`` it
    declares. ``input_context`` is a ``tf.distribute.InputContext`` of this training task's shard
    (``num_input_pipelines``, ``input_pipeline_id``), as Estimator gave it under a distribution
    strategy; ``config`` carries the same as ``num_worker_replicas`` and ``global_id_in_cluster``."""
    takes = declared_args(input_fn, key, path, INPUT_FN_ARGS)
    context = tf.distribute.InputContext(num_input_pipelines=replicas[0], input_pipeline_id=replicas[1])
    offered = {"params": params, "mode": mode, "config": config, "input_context": context}
    return input_fn(**{k: v for k, v in offered.items() if k in takes})


def make_input_fn_pipeline(input_fn: Callable, path: str, mode: str, params: dict, run_config,
                           replicas=(1, 0), skip_trained: bool = True) -> Pipeline:
    """A pipeline from an Estimator-style ``input_fn``: a ``tf.data.Dataset`` of ``(features, labels)``
    batches, or ``(features, labels)`` tensors (from a one-shot iterator, queues, ...).

    The features reach the model_fn as the input_fn gave them (a dict or a tensor). A training
    Dataset gets ``skip(step // training tasks)`` so a resumed run continues where it stopped (the
    input_fn's shuffle must be seeded for that to be exact); unlike the built-in sources this replays
    the skipped batches, in time linear in the step. ``skip_trained=False``: the input starts from its
    beginning whatever the step (``data.skip_trained_batches``).
    """
    train = mode == ModeKeys.TRAIN
    key = "data.train_fn" if train else ("data.eval_fn" if mode == ModeKeys.EVAL else "predict.input_fn")
    with tf1.name_scope("train_input" if train else "eval_input"):
        result = call_input_fn(input_fn, key, path, mode, params, run_config, replicas if train else (1, 0))
        if isinstance(result, tf.data.Dataset):
            skip = None
            if train and skip_trained:
                skip = tf1.placeholder_with_default(tf.constant(0, tf.int64), [], name="skip_batches")
                result = result.skip(skip)
            # A prefetch, as tf.data injects one after the last stage when autotuning is on (TF >= 2.10):
            # with autotuning off (without_autotune_model) the step would wait for its batch to be made.
            iterator = tf1.data.make_initializable_iterator(without_autotune_model(result.prefetch(tf.data.AUTOTUNE)))
            output = iterator.get_next()
            initializer = iterator.initializer
            feeds = (lambda step=0: {skip: batches_done(step, replicas)}) if skip is not None else (lambda step=0: {})
        else:
            output, initializer, feeds = result, None, (lambda step=0: {})
    features, labels = _features_and_labels(output, callable_name(key, path, input_fn))
    return Pipeline(features, labels, initializer, feeds)


def _features_and_labels(output, name: str):
    """An input_fn's batch as (features, labels): a pair, or features alone (labels None).

    Raises:
      ContractError: a tuple or list of another length (naming the input_fn).
    """
    if not isinstance(output, (tuple, list)):
        return output, None
    if len(output) != 2:
        raise ContractError(f"{name} gave a {type(output).__name__} of {len(output)} per batch; an input_fn gives "
                            "(features, labels), or features alone, or a Dataset of either")
    return output[0], output[1]


def _input_fn(data_cfg, key: str):
    path = data_cfg.get(key)
    if not path:
        raise ConfigError(f"data.{key} is not set; data=input_fn needs data.train_fn and data.eval_fn (dotted paths)")
    return load_callable(path, f"data.{key}"), path


def _pack_key(data_cfg, params: dict) -> Optional[str]:
    """Where the built-in models read their one input (``data.feature_key``); None for a model_fn,
    which gets a file source's features by name."""
    return data_cfg.feature_key if "feature_key" in params else None


def make_train_input(data_cfg, train_cfg, arrays, params: dict, run_config, replicas=(1, 0)) -> Pipeline:
    """The training pipeline: over the loaded arrays or files, or from ``data.train_fn``
    (``params["batch_size"]`` is ``train.batch_size``). ``replicas`` = (training tasks, this task's
    index): each reads its own shard."""
    batch_size, seed = train_cfg.batch_size, train_cfg.seed
    if isinstance(arrays, FileSource):
        return make_file_pipeline(arrays, batch_size, True, _pack_key(data_cfg, params), seed, replicas,
                                  tuple(data_cfg.get("ignore") or ()))
    if arrays is None:
        fn, path = _input_fn(data_cfg, "train_fn")
        return make_input_fn_pipeline(fn, path, ModeKeys.TRAIN, dict(params, batch_size=batch_size),
                                      run_config, replicas, data_cfg.get("skip_trained_batches", True))
    return make_pipeline(arrays.train_x, arrays.train_y, batch_size, data_cfg.feature_key, train=True,
                         seed=seed, shuffle_buffer=data_cfg.shuffle_buffer, replicas=replicas)


def make_eval_input(data_cfg, batch_size: int, arrays, params: dict, run_config) -> Pipeline:
    """The evaluation pipeline, one pass: the test split, or ``data.eval_fn`` (``params["batch_size"]``
    is ``batch_size``, ``eval.batch_size``)."""
    if isinstance(arrays, FileSource):
        return make_file_pipeline(arrays, batch_size, False, _pack_key(data_cfg, params),
                                  ignored=tuple(data_cfg.get("ignore") or ()))
    if arrays is None:
        fn, path = _input_fn(data_cfg, "eval_fn")
        return make_input_fn_pipeline(fn, path, ModeKeys.EVAL, dict(params, batch_size=batch_size), run_config)
    return make_pipeline(arrays.test_x, arrays.test_y, batch_size, data_cfg.feature_key, train=False)


def batch_size_of(features, labels):
    """The number of examples in a batch: the first dimension of the labels, else of the first feature
    (of any structure: a dict, a list or tuple of tensors)."""
    tensor = tf.nest.flatten(labels)[0] if labels is not None else tf.nest.flatten(features)[0]
    if isinstance(tensor, tf.SparseTensor):
        return tensor.dense_shape[0]
    # The batch itself must have been read: with a static batch size (drop_remainder=True) the shape
    # folds to a constant that would otherwise be counted even for the read that found the input ended.
    with tf.control_dependencies([tensor]):
        return tf.identity(tf.shape(tensor, out_type=tf.int64)[0])
