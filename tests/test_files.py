"""Datasets from files: TFRecord, CSV and NumPy of non-MNIST shapes, trained, resumed, sharded,
predicted and exported through config alone; bad data named by file and record."""

import csv
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from helpers import read_jsonl, weights
from trainer import run
from trainer.config.rules import prepare
from trainer.data import files as file_data, pipelines
from trainer.data.csv_files import csv_columns
from trainer.data.features import Feature
from trainer.data.tfrecord_files import check_example
from trainer.data.sources import load_data
from trainer.errors import CheckpointError, ConfigError, DataError

tf1 = tf.compat.v1
NOT_ARRAYS = ["data.train_examples=null", "data.test_examples=null"]
IMAGE_SPEC = "data.features.image={shape: [32, 32, 3], dtype: uint8, encoding: raw}"


def images(n, seed):
    """Learnable 32x32 RGB images of 3 classes."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    pixels = rng.normal(0, 40, (n, 32, 32, 3)) + labels[:, None, None, None] * 60
    return pixels.clip(0, 255).astype(np.uint8), labels


def write_tfrecords(folder, name, shards, per_shard, seed=0, corrupt=None):
    """Shards of tf.train.Example records, written the way input pipelines write them: a raw image,
    an int64 label and the record's running id."""
    paths = []
    x, y = images(shards * per_shard, seed)
    for shard in range(shards):
        path = os.path.join(folder, f"{name}-{shard:05d}-of-{shards:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(shard * per_shard, (shard + 1) * per_shard):
                image = x[i].tobytes() if (shard, i - shard * per_shard) != corrupt else x[i].tobytes()[:-1]
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y[i])])),
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                }))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def write_csv(path, n, seed, columns=13, bad_row=None):
    """A 14-column table: 13 numeric features and a string label (census style)."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(n, columns))
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([f"f{i}" for i in range(columns)] + ["income_bracket"])
        for i, row in enumerate(table):
            fields = [f"{v:.5f}" for v in row] + [">50K" if row[0] + row[1] > 0 else "<=50K"]
            writer.writerow(fields[:-2] + fields[-1:] if i == bad_row else fields)
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    write_tfrecords(str(folder), "train", shards=4, per_shard=50)
    write_tfrecords(str(folder), "eval", shards=1, per_shard=40, seed=1)
    return folder


def tfrecord_cfg(folder, *more):
    return [*NOT_ARRAYS, "data=tfrecord", f"data.train_files={folder}/train-*", f"data.eval_files={folder}/eval-*",
            IMAGE_SPEC, "data.label_key=label", *more]


def _stream(cfg, step, batches, replicas=(1, 0), key="id", ignored=("image",)):
    """The first ``batches`` training batches of ``key`` for a run at global step ``step``."""
    source = load_data(cfg.data)
    with tf.Graph().as_default():
        spec = dict(source.features)
        spec.setdefault("id", Feature("id", (), "int64"))
        source.features = spec
        p = pipelines.make_file_pipeline(source, 16, True, None, seed=3, replicas=replicas, ignored=ignored)
        with tf1.Session() as sess:
            sess.run(p.initializer, p.feeds(step))
            return np.concatenate([sess.run(p.features[key]) for _ in range(batches)])


@pytest.mark.slow
def test_a_resumed_tfrecord_stream_continues_the_batches_of_an_uninterrupted_one(make_cfg, records):
    cfg = make_cfg(*tfrecord_cfg(records))
    straight = _stream(cfg, 0, 30)  # 480 records: 2.4 epochs of 200
    epochs = straight[:400].reshape(2, 200)
    assert all(sorted(e) == list(range(200)) for e in epochs) and not np.array_equal(epochs[0], epochs[1])
    for step in (5, 12, 25):  # within the first epoch, straddling the boundary, in the third epoch
        np.testing.assert_array_equal(_stream(cfg, step, 3), straight[step * 16:(step + 3) * 16])
    # Step 10**9 starts at once: epoch 80,000,000, no replay (the records are counted, not read).
    far = _stream(cfg, 10**9, 1)
    assert len(far) == 16 and set(far) <= set(range(200))


def test_a_csv_table_in_memory_resumes_its_batches_and_shards_by_row(make_cfg, tmp_path):
    path = tmp_path / "ids.csv"
    with open(path, "w") as f:  # an id per row, Windows line ends and an empty line, as CSV files come
        f.write("id,x,label\r\n" + "".join(f"{i},{i / 10},{i % 2}\r\n" for i in range(200)) + "\r\n")
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={path}", f"data.eval_files={path}",
                   "data.label_key=label")
    assert len(pipelines._csv_lines_in_memory(load_data(cfg.data))) == 200
    straight = _stream(cfg, 0, 30, ignored=())  # 480 rows: 2.4 epochs of 200
    epochs = straight[:400].reshape(2, 200)
    assert all(sorted(e) == list(range(200)) for e in epochs) and not np.array_equal(epochs[0], epochs[1])
    for step in (5, 12, 25):  # within the first epoch, straddling the boundary, in the third epoch
        np.testing.assert_array_equal(_stream(cfg, step, 3, ignored=()), straight[step * 16:(step + 3) * 16])
    shards = [set(_stream(cfg, 0, 7, replicas=(2, i), ignored=())) for i in (0, 1)]  # 100 rows each
    assert not shards[0] & shards[1] and shards[0] | shards[1] == set(range(200))


def test_training_tasks_read_disjoint_shards(make_cfg, records, tmp_path):
    cfg = make_cfg(*tfrecord_cfg(records))
    by_file = [set(_stream(cfg, 0, 7, replicas=(2, i))) for i in (0, 1)]  # 4 files: two each
    assert not by_file[0] & by_file[1] and by_file[0] | by_file[1] == set(range(200))
    one = write_tfrecords(str(tmp_path), "one", shards=1, per_shard=64)[0]
    cfg = make_cfg(*tfrecord_cfg(records, f"data.train_files={one}"))
    by_record = [set(_stream(cfg, 0, 2, replicas=(2, i))) for i in (0, 1)]  # 1 file: every other record
    assert not by_record[0] & by_record[1] and by_record[0] | by_record[1] == set(range(64))


@pytest.mark.slow
@pytest.mark.parametrize("session", ["monitored", "plain"])
def test_tfrecord_images_train_resume_exactly_predict_and_export(make_cfg, records, tmp_path, session):
    hook = "+hooks.recorder={{_target_: user_hooks.LossRecorder, path: {}}}"
    # 200 records in batches of 24: the resumed run (from step 4) crosses into the second epoch.
    base = tfrecord_cfg(records, "model=mnist", "train.batch_size=24", "train.deterministic=true",
                        "model.params.dropout_rate=0.3", "eval.every_steps=null", f"session={session}")
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    for out in (straight, resumed):
        out.mkdir()
    run(make_cfg(*base, "train.max_steps=10", hook.format(straight / "losses.jsonl")), str(straight))
    run(make_cfg(*base, "train.max_steps=4", hook.format(resumed / "losses.jsonl")), str(resumed))
    result = run(make_cfg(*base, "train.max_steps=10", hook.format(resumed / "losses.jsonl")), str(resumed))
    losses = [r["loss"] for r in read_jsonl(straight / "losses.jsonl")]
    assert len(losses) == 10 and [r["loss"] for r in read_jsonl(resumed / "losses.jsonl")] == losses
    a, b = weights(str(straight / "checkpoints")), weights(str(resumed / "checkpoints"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert result["eval_examples"] == 40 and result["eval_accuracy"] > 0.5
    assert a["dense_1/kernel"].shape == (1024, 3)  # the classes came from the labels
    if session == "plain":
        return
    x, _ = images(5, 9)
    np.save(tmp_path / "five.npy", x)
    predicted = run(make_cfg(*base, "mode=predict", f"predict.input={tmp_path / 'five.npy'}"), str(resumed))
    exported = run(make_cfg(*base, "mode=export"), str(resumed))
    serve = tf.saved_model.load(exported["export_dir"]).signatures["serving_default"]
    assert serve.structured_input_signature[1]["x"].shape.as_list() == [None, 32, 32, 3]
    out = serve(x=tf.constant(x.astype(np.float32) / 255))
    with np.load(predicted["predictions"]) as f:
        assert f["probabilities"].shape == (5, 3)
        np.testing.assert_array_equal(out["classes"].numpy(), f["classes"])


@pytest.mark.slow
def test_csv_table_with_string_labels_trains_with_no_other_key(make_cfg, tmp_path):
    train_csv = write_csv(tmp_path / "train.csv", 600, seed=0)
    test_csv = write_csv(tmp_path / "test.csv", 150, seed=1)
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={train_csv}", f"data.eval_files={test_csv}",
                   "data.label_key=income_bracket", "train.max_steps=300", "eval.every_steps=null")
    result = run(cfg, str(tmp_path / "run"))
    assert result["eval_examples"] == 150
    assert result["eval_accuracy"] > 0.85  # y = f0 + f1 > 0: learnable from two of the 13 columns
    trained = weights(str(tmp_path / "run" / "checkpoints"))
    assert trained["dense/kernel"].shape == (13, 16) and trained["dense_1/kernel"].shape == (16, 2)


def test_resuming_on_relabelled_csv_data_is_refused_naming_the_classes(make_cfg, tmp_path):
    """cat/dog/emu became zebra/dog/emu: "dog" would move from class 1 to class 0 under the same
    weights. The manifest records the classes; the resume is refused and the checkpoint kept."""
    def animals(path, first):
        rng = np.random.default_rng(0)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["a", "b", "animal"])
            for i in range(90):
                writer.writerow([f"{rng.normal():.4f}", f"{rng.normal():.4f}", [first, "dog", "emu"][i % 3]])
        return path

    data = animals(tmp_path / "animals.csv", "cat")
    cfg = (*NOT_ARRAYS, "data=csv", f"data.train_files={data}", f"data.eval_files={data}", "data.label_key=animal",
           "eval.every_steps=null")
    run(make_cfg(*cfg, "train.max_steps=4"), str(tmp_path / "run"))
    manifest = json.loads((tmp_path / "run" / "checkpoints" / "manifest.json").read_text())
    assert manifest["data"]["classes"] == ["cat", "dog", "emu"]
    animals(data, "zebra")
    with pytest.raises(CheckpointError, match=r"classes: \['cat', 'dog', 'emu'\] then, \['dog', 'emu', 'zebra'\] now"):
        run(make_cfg(*cfg, "train.max_steps=8"), str(tmp_path / "run"))
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["global_step"] == 4


def test_integers_beyond_float32s_exact_range_are_refused_not_rounded(make_cfg, tmp_path):
    path = tmp_path / "counts.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["clicks", "label"])
        for i in range(64):
            writer.writerow([2**25 + 1 if i == 40 else i, i % 2])  # 33554433 would become 33554432
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={path}", f"data.eval_files={path}",
                   "data.label_key=label", "train.max_steps=5", "train.batch_size=16", "eval.every_steps=null")
    with pytest.raises(DataError, match=r"counts.csv: row 41 \(line 42\): feature 'clicks' holds an integer beyond 2\*\*24"):
        run(cfg, str(tmp_path / "run"))
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("on_nan", ["stop", "skip_step"])
def test_a_nan_in_a_later_record_is_named_not_blamed_on_the_learning_rate(make_cfg, tmp_path, on_nan):
    path = tmp_path / "table.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["a", "b", "label"])
        for i in range(200):
            writer.writerow(["nan" if i == 150 else f"{i / 100:.2f}", "0.5", i % 2])
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={path}", f"data.eval_files={path}",
                   "data.label_key=label", "train.max_steps=30", "train.batch_size=16", "eval.every_steps=null",
                   f"train.on_nan={on_nan}")
    with pytest.raises(DataError, match=r"table.csv: row 151 \(line 152\): feature 'a' is NaN or Inf"):
        run(cfg, str(tmp_path / "run"))


def test_numpy_arrays_of_any_shape_memory_mapped(make_cfg, tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "arrays"
    folder.mkdir()
    table = rng.normal(size=(300, 14)).astype(np.float64)
    labels = (table[:, 0] > 0).astype(np.int64) + (table[:, 1] > 0)
    for key, value in dict(x_train=table[:240], y_train=labels[:240], x_test=table[240:], y_test=labels[240:]).items():
        np.save(folder / f"{key}.npy", value)
    cfg = make_cfg(*NOT_ARRAYS, "data=numpy", f"data.path={folder}", "train.max_steps=60", "eval.every_steps=null")
    data = load_data(cfg.data)
    assert isinstance(data.train_x, np.memmap) and data.num_classes == 3
    result = run(cfg, str(tmp_path / "run"))
    assert result["eval_examples"] == 60 and weights(str(tmp_path / "run" / "checkpoints"))["dense/kernel"].shape == (14, 16)


def _failing_run(make_cfg, folder, tmp_path, *more):
    with pytest.raises(DataError) as raised:
        run(make_cfg(*tfrecord_cfg(folder, "eval.every_steps=null", *more)), str(tmp_path / "run"))
    return str(raised.value)


@pytest.mark.slow
def test_bad_records_are_named_by_file_and_record(make_cfg, records, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    write_tfrecords(str(bad), "train", shards=2, per_shard=20, corrupt=(1, 7))
    write_tfrecords(str(bad), "eval", shards=1, per_shard=8)
    message = _failing_run(make_cfg, bad, tmp_path, "train.batch_size=8", "train.max_steps=10")
    assert "train-00001-of-00002.tfrecord: record 7: feature 'image' holds 3071 bytes" in message
    assert "3072" in message and "\n" not in message
    assert json.load(open(tmp_path / "run" / "metrics.json"))["status"] == "failed"
    with pytest.raises(DataError, match=r"data.train_files: .*nothing-\* matches no file"):
        load_data(make_cfg(*tfrecord_cfg(records, f"data.train_files={tmp_path}/nothing-*")).data)
    with pytest.raises(DataError, match=r"record 0: feature 'image' holds 3072 bytes, the spec \[32, 32, 1\]"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.features.image.shape=[32,32,1]")).data)
    with pytest.raises(DataError, match=r"record 0: no feature 'weight'"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.features.weight={shape: [], dtype: float32}")).data)
    with pytest.raises(DataError, match=r"record 0: feature 'id' is a int64_list, the spec \(float32\) reads a float_list"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.features.id={shape: [], dtype: float32}")).data)
    # a float32 label is a regressor's number: here the records hold integers, and the spec says which
    with pytest.raises(DataError, match=r"record 0: feature 'label' is a int64_list, the spec \(float32\) reads a "
                                        r"float_list; fix data.features.label"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.features.label={shape: [], dtype: float32}")).data)
    truncated = bad / "cut.tfrecord"
    truncated.write_bytes((bad / "train-00000-of-00002.tfrecord").read_bytes()[:-100])
    with pytest.raises(DataError, match=r"cut.tfrecord: record 19 is truncated"):
        file_data.count_records("tfrecord", str(truncated))
    message = _failing_run(make_cfg, records, tmp_path, "data.num_classes=2", "train.max_steps=40",
                           "train.batch_size=16")
    assert "label 2 is outside the 2 classes 0..1" in message


def test_bad_csv_rows_are_named_by_file_and_line(make_cfg, tmp_path):
    train_csv = write_csv(tmp_path / "train.csv", 160, seed=0, bad_row=120)
    test_csv = write_csv(tmp_path / "test.csv", 16, seed=1)
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={train_csv}", f"data.eval_files={test_csv}",
                   "data.label_key=income_bracket", "data.label_vocabulary=['<=50K','>50K']", "train.max_steps=30",
                   "train.batch_size=16", "eval.every_steps=null")
    with pytest.raises(DataError, match=r"train.csv: row 121 \(line 122\): 13 fields, the header has 14 columns"):
        run(cfg, str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="data.ignore: \\['f99'\\] are not features"):
        run(make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={test_csv}", f"data.eval_files={test_csv}",
                     "data.label_key=income_bracket", "data.ignore=[f99]"), str(tmp_path / "run2"))


def test_file_source_keys_fail_before_tensorflow_work(make_cfg, records, tmp_path):
    with pytest.raises(ConfigError, match="data.train_files is not set"):
        prepare(make_cfg(*NOT_ARRAYS, "data=tfrecord"), str(tmp_path))
    with pytest.raises(ConfigError, match="data.features.image.dtype=uint16: use one of"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.features.image.dtype=uint16")).data)
    with pytest.raises(ConfigError, match="data.train_examples: not for data=tfrecord"):
        load_data(make_cfg(*tfrecord_cfg(records, "data.train_examples=10")).data)


def sharded_input_fn(params, input_context=None):
    """A TF2-era input_fn: shards by the input context when it gets one."""
    ds = tf.data.Dataset.range(40)
    if input_context:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.map(lambda i: ({"x": tf.cast(i, tf.float32)}, i)).batch(params["batch_size"])


def test_input_fns_get_their_shard_as_an_input_context():
    firsts = {}
    for task in (0, 1):
        with tf.Graph().as_default():
            p = pipelines.make_input_fn_pipeline(sharded_input_fn, "tests.sharded_input_fn", "train", {"batch_size": 2},
                                                 None, replicas=(2, task))
            with tf1.Session() as sess:
                sess.run(p.initializer, p.feeds(6))  # global step 6 shared by 2 tasks: 3 batches each
                firsts[task] = sess.run(p.labels).tolist()
    assert firsts == {0: [12, 14], 1: [13, 15]}


def test_png_images_variable_length_and_defaulted_features_parse_as_specified(make_cfg, tmp_path):
    x, y = images(6, 4)
    with tf.io.TFRecordWriter(str(tmp_path / "png.tfrecord")) as writer:
        for i in range(6):
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.encode_png(x[i]).numpy()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y[i])])),
                "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
            }
            if i % 2:
                feature["weight"] = tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    path = tmp_path / "png.tfrecord"
    cfg = make_cfg(*NOT_ARRAYS, "data=tfrecord", f"data.train_files={path}", f"data.eval_files={path}",
                   "data.features.image={shape: [32, 32, 3], dtype: uint8, encoding: png}",
                   "data.features.tags={dtype: int64, var_len: true}",
                   "data.features.weight={shape: [], dtype: float32, default: 1.0}", "data.num_classes=3")
    source = load_data(cfg.data)
    with tf.Graph().as_default():
        p = pipelines.make_file_pipeline(source, 6, False, None)
        with tf1.Session() as sess:
            sess.run(p.initializer)
            features, labels = sess.run([p.features, p.labels])
    np.testing.assert_array_equal(features["image"], x)  # PNG is lossless: the pixels as written
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_array_equal(features["weight"], [1.0, 0.5, 1.0, 0.5, 1.0, 0.5])
    assert isinstance(features["tags"], tf.compat.v1.SparseTensorValue)
    assert features["tags"].values.tolist() == [j for i in range(6) for j in range(i)]


@pytest.mark.cli
def test_a_training_split_without_records_is_refused_before_the_session(records, tmp_path):
    """An empty TFRecord file or a header-only CSV (with declared types) once made the input spin for
    ever: each endless epoch ended at once. The command refuses it in one line naming the files."""
    import subprocess

    from helpers import TRAIN

    empty = tmp_path / "empty.tfrecord"
    with tf.io.TFRecordWriter(str(empty)):
        pass
    header_only = tmp_path / "header.csv"
    header_only.write_text("a,b,label\n")
    cases = [
        (tfrecord_cfg(records, f"data.train_files={empty}"), "no TFRecord records in " + str(empty)),
        ([*NOT_ARRAYS, "data=csv", f"data.train_files={header_only}", f"data.eval_files={header_only}",
          "data.label_key=label", "data.num_classes=2", "data.features.a={shape: [], dtype: float32}",
          "data.features.b={shape: [], dtype: float32}", "data.features.label={shape: [], dtype: int64}"],
         "no CSV rows in " + str(header_only)),
    ]
    for i, (overrides, expected) in enumerate(cases):
        run_dir = tmp_path / f"run{i}"
        proc = subprocess.run([TRAIN, *overrides, "model=mlp", "train.max_steps=5", "eval.every_steps=null",
                               "log.progress=off", f"hydra.run.dir={run_dir}"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and expected in errors[0] and "data.train_files" in errors[0], proc.stderr
        assert not (run_dir / "checkpoints").exists()


# --- every bad input in one line naming the file -----------------------------------------------


def _damaged_files(folder, records):
    """Each file a user could point the runner at by mistake, next to the good ones."""
    import gzip

    good = (records / "train-00000-of-00004.tfrecord").read_bytes()
    flipped = bytearray(good)
    flipped[200] ^= 0xFF  # inside record 0's image: the payload no longer matches its checksum
    (folder / "flipped.tfrecord").write_bytes(bytes(flipped))
    (folder / "random.tfrecord").write_bytes(np.random.RandomState(0).bytes(5000))
    packed = gzip.compress(good)
    (folder / "train.tfrecord.gz").write_bytes(packed)
    (folder / "cut.tfrecord.gz").write_bytes(packed[: len(packed) // 2])
    (folder / "gzipped.tfrecord").write_bytes(packed)
    (folder / "binary.csv").write_bytes(np.random.RandomState(1).bytes(3000))
    (folder / "train.csv").write_text("a,b,label\n1,2,x\n3,4,y\n")
    with tf.io.TFRecordWriter(str(folder / "notpng.tfrecord")) as writer:
        for _ in range(4):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"\x89PNG but not one"])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})).SerializeToString())
    png = tf.io.encode_png(tf.zeros([20, 30, 1], tf.uint8)).numpy()
    with tf.io.TFRecordWriter(str(folder / "wrongsize.tfrecord")) as writer:
        for _ in range(4):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})).SerializeToString())
    arrays = {"x_train": np.zeros((8, 4), np.float32), "y_train": np.arange(8), "x_test": np.zeros((2, 4), np.float32),
              "y_test": np.arange(2)}
    np.savez(folder / "big_label.npz", **dict(arrays, y_train=np.array([0, 1, 2, 3, 4, 5, 6, 10**9])))
    np.savez(folder / "big_endian.npz", **dict(arrays, x_train=arrays["x_train"].astype(">f4")))


PNG_SPEC = "data.features.image={shape: [32, 32, 3], dtype: uint8, encoding: png}"
BAD_INPUTS = [
    ("flipped", ["data.train_files=flipped.tfrecord"], DataError,
     r"flipped.tfrecord: record 0 fails its checksum \(the file is damaged there\)"),
    ("random bytes", ["data.train_files=random.tfrecord"], DataError,
     r"random.tfrecord: record 0's header fails its checksum: not a TFRecord file"),
    ("GZIP on a plain file", ["data.compression=GZIP"], DataError,
     r"train-00000-of-00004.tfrecord: not a GZIP file .*; fix data.compression"),
    ("truncated .gz", ["data.train_files=cut.tfrecord.gz", "data.compression=GZIP"], DataError,
     r"cut.tfrecord.gz: the GZIP stream ends early \(the file is truncated\)"),
    ("gzipped, no compression", ["data.train_files=gzipped.tfrecord"], DataError,
     r"gzipped.tfrecord: the file is GZIP-compressed; set data.compression=GZIP"),
    ("not a PNG", ["data.train_files=notpng.tfrecord", "data.eval_files=notpng.tfrecord", PNG_SPEC], DataError,
     r"notpng.tfrecord: record 0: feature 'image' is not an encoded image"),
    ("a PNG of another size", ["data.train_files=wrongsize.tfrecord", "data.eval_files=wrongsize.tfrecord", PNG_SPEC],
     DataError, r"wrongsize.tfrecord: record 0: feature 'image' is a 30x20 PNG, the spec's shape \[32, 32, 3\] needs 32x32"),
    ("binary as CSV", ["data=csv", "data.train_files=binary.csv", "data.eval_files=train.csv", "data.label_key=label",
                       ], DataError, r"binary.csv: not UTF-8 text \(byte \d+ is"),
    ("duplicate label vocabulary", ["data=csv", "data.train_files=train.csv", "data.eval_files=train.csv",
                                    "data.label_key=label", "data.label_vocabulary=[x,y,x]"],
     ConfigError, r"data.label_vocabulary: \['x'\] given more than once"),
    ("a label of 10**9", ["data=numpy", "data.path=big_label.npz"], DataError,
     r"big_label.npz: a label of 1000000000 makes 1000000001 classes .* set data.num_classes"),
    ("big-endian floats", ["data=numpy", "data.path=big_endian.npz"], DataError,
     r"big_endian.npz x_train: big-endian float32 features \(>f4\); .* save them as <f4"),
]


@pytest.mark.parametrize("name,more,error,pattern", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_a_bad_input_is_one_line_naming_the_file(make_cfg, records, tmp_path, monkeypatch, name, more, error, pattern):
    _damaged_files(tmp_path, records)
    monkeypatch.chdir(tmp_path)
    own_source = any(m in ("data=numpy", "data=csv") for m in more)
    base = [*NOT_ARRAYS] if own_source else tfrecord_cfg(records)
    with pytest.raises(error) as raised:
        load_data(make_cfg(*base, *more).data)
    message = str(raised.value)
    assert re.search(pattern, message) and "\n" not in message, message


def test_a_damaged_record_found_during_training_is_named(make_cfg, records, tmp_path):
    """A payload that fails its checksum in a later record (past the first-record check): the
    DataLossError TensorFlow raises mid-training becomes the file and record."""
    bad = tmp_path / "bad"
    bad.mkdir()
    write_tfrecords(str(bad), "train", shards=1, per_shard=40)
    write_tfrecords(str(bad), "eval", shards=1, per_shard=8)
    path = bad / "train-00000-of-00001.tfrecord"
    data = bytearray(path.read_bytes())
    data[len(data) - 300] ^= 0xFF  # inside the last record's image
    path.write_bytes(bytes(data))
    message = _failing_run(make_cfg, bad, tmp_path, "train.batch_size=8", "train.max_steps=30")
    assert re.search(r"train-00000-of-00001.tfrecord: record 39 fails its checksum", message), message


def test_csv_column_types_are_logged_and_a_mostly_numeric_column_is_refused(tmp_path, caplog):
    """One "unknown" among a numeric column's values would make it a string column (an embedding
    instead of a number) without a word: it is refused naming the line; the inferred types are logged."""
    rows = [f"{i},{0.5 * i},c{i % 3},{i % 2}" for i in range(40)]
    clean = tmp_path / "clean.csv"
    clean.write_text("age,score,kind,label\n" + "\n".join(rows) + "\n")
    with caplog.at_level("INFO", logger="trainer.data.files"):
        columns = csv_columns(str(clean), {})
    assert {n: c.dtype for n, c in columns.items()} == {"age": "int64", "score": "float32", "kind": "string",
                                                        "label": "int64"}
    assert "age int64, score float32, kind string, label int64" in caplog.text
    rows[17] = "17,unknown,c2,1"
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("age,score,kind,label\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"mixed.csv:19: column 'score' is 'unknown', not a number, while 39 of its "
                                        r"first 40 values are numbers; .* data.features.score.dtype=string"):
        csv_columns(str(mixed), {})
    declared = csv_columns(str(mixed), {"score": Feature("score", (), "string")})
    assert declared["score"].dtype == "string"


def test_a_csv_file_saved_with_a_utf8_bom_reads_its_first_column_by_name(tmp_path):
    """Excel's "CSV UTF-8" starts the file with a byte order mark: it is not part of the first name."""
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffage,label\n".encode("utf-8") + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(12)))
    assert list(csv_columns(str(path), {})) == ["age", "label"]


def test_a_csv_training_batch_larger_than_its_rows_is_refused(make_cfg, tmp_path):
    """200 CSV rows and train.batch_size=100000000: each batch would repeat the rows half a million
    times (17 GB); the run is refused before the graph runs, naming the key and what fits."""
    train_csv = write_csv(tmp_path / "train.csv", 200, seed=0)
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={train_csv}", f"data.eval_files={train_csv}",
                   "data.label_key=income_bracket", "train.max_steps=3", "train.batch_size=100000000")
    with pytest.raises(ConfigError, match=r"^train.batch_size=100000000: larger than the 200 training examples.*"
                                          r"at most 200"):
        run(cfg, str(tmp_path / "run"))
    assert run(make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={train_csv}", f"data.eval_files={train_csv}",
                        "data.label_key=income_bracket", "train.max_steps=3", "train.batch_size=200"),
               str(tmp_path / "run2"))["global_step"] == 3


def _table(path, header, rows):
    with open(path, "w", newline="") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(row) + "\n")
    return path


def _counts(n, at=None, value=None):
    """Rows of (count, x, label): an integer column, a number column and a 0/1 label; ``value``
    written in the integer column at row ``at``."""
    rng = np.random.default_rng(0)
    return [[value if i == at else str(i), f"{rng.normal():.4f}", str(i % 2)] for i in range(n)]


@pytest.mark.parametrize("case", ["underscore digits, sampled", "other scripts' digits, sampled",
                                  "underscore digits, past the sample", "a quoted line break, sampled",
                                  "a quoted line break, past the sample", "a header name twice",
                                  "a header column without a name", "an int64 label Python reads and TensorFlow not"])
def test_csv_text_tensorflow_reads_otherwise_than_python_is_named_by_file_and_line(make_cfg, tmp_path, case):
    """Values Python's int()/float() take and tf.io.decode_csv does not, a quoted field over two lines
    (TensorFlow reads one line per row), a header naming a column twice or not at all: each is one
    line naming the file, the line an editor shows, the column and the fix, before training or, for
    a row past the sampled ones, as the run fails (not TensorFlow's record number in its batch)."""
    header, rows, line = ["count", "x", "label"], _counts(300), None
    if case == "underscore digits, sampled":
        rows, line, says = _counts(300, 40, "1_000"), 42, r"column 'count' is '1_000', not a number"
    elif case == "other scripts' digits, sampled":
        rows, line, says = _counts(300, 40, "\u0661\u0662"), 42, r"column 'count' is '\u0661\u0662', not a number"
    elif case == "underscore digits, past the sample":
        rows, says = _counts(300, 250, "1_000"), r"row 251 \(line 252\): column 'count' is '1_000', not an integer"
    elif case == "a quoted line break, sampled":
        rows, line, says = _counts(300, 40, '"1\n2"'), 42, "the quoted value of column 'count' runs over more than one line"
    elif case == "a quoted line break, past the sample":
        rows, says = _counts(300, 250, '"1\n2"'), r"row 251 \(line 252\): the quoted value of column 'count' runs over"
    elif case == "a header name twice":
        header, line, says = ["count", "count", "label"], 1, r"the header names column 'count' twice \(columns 1 and 2\)"
    elif case == "a header column without a name":
        header, line, says = ["count", "", "label"], 1, "column 2 of the header has no name"
    else:
        rows = [[r[0], r[1], "1_0" if i == 250 else r[2]] for i, r in enumerate(_counts(300))]
        line, says = 252, r"label '1_0' is not int64 as TensorFlow reads it"
    data = _table(tmp_path / "table.csv", header, rows)
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={data}", f"data.eval_files={data}", "data.label_key=label",
                   "model=mlp", "model.params.hidden_units=[4]", "train.max_steps=40", "train.batch_size=50",
                   "eval.every_steps=null")
    where = re.escape(f"{data}:{line}: ") if line else re.escape(f"{data}: ")
    with pytest.raises(DataError, match=where + says):
        run(cfg, str(tmp_path / "run"))


FEATURE_COLUMN_MODEL = '''
import tensorflow as tf


def model_fn(features, labels, mode, params):
    columns = [tf.feature_column.numeric_column(name) for name in sorted(features)]
    net = tf.compat.v1.feature_column.input_layer(features, columns)
    logits = tf.compat.v1.layers.dense(net, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
'''


def test_a_csv_header_name_feature_columns_refuse_is_named_with_its_fix(make_cfg, tmp_path, monkeypatch):
    """A spreadsheet's header ("hours per week") read by a model_fn that makes a feature column of each
    feature: one line naming the file's header, the column and a name TensorFlow takes."""
    (tmp_path / "census_model.py").write_text(FEATURE_COLUMN_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = _table(tmp_path / "table.csv", ["age", "hours per week", "label"], _counts(100))
    cfg = make_cfg(*NOT_ARRAYS, "data=csv", f"data.train_files={data}", f"data.eval_files={data}", "data.label_key=label",
                   "model=model_fn", "model.fn=census_model.model_fn", "train.max_steps=4", "train.batch_size=10")
    with pytest.raises(DataError, match=re.escape(f"{data}:1: column 'hours per week' of the header is not a name "
                                                  "TensorFlow takes") + ".*e.g. 'hours_per_week'"):
        run(cfg, str(tmp_path / "run"))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_record_that_is_not_an_example_is_named():
    """check_example: bytes that do not parse as a tf.train.Example are one DataError naming where."""
    features = {"x": Feature("x", (2,))}
    good = tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))})).SerializeToString()
    check_example(good, features, "a.tfrecord record 0")
    with pytest.raises(DataError,
                       match=r"a.tfrecord record 1: not a tf.train.Example \(.*\); write tf.train.Example records"):
        check_example(b"\x0a\xff\xff\xff", features, "a.tfrecord record 1")
