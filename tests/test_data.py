"""Loaders on small generated mnist.npz and IDX files; the input pipeline's resumable position."""

import gzip
import logging
import os
import struct
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from trainer import run
from trainer.data import ahead, download as downloads, mnist_files, pipelines, predict_input
from trainer.data.sources import mnist as mnist_source, source_names, source_of, synthetic
from trainer.errors import DataError


def write_idx(path, array, compress=True):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(payload)


def make_idx_dir(folder, n_train=20, n_test=10, compress=True):
    rng = np.random.default_rng(1)
    os.makedirs(folder, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test),
    }
    for stem, array in arrays.items():
        write_idx(os.path.join(folder, stem + (".gz" if compress else "")), array, compress)
    return arrays


def make_npz(path, n_train=20, n_test=10):
    rng = np.random.default_rng(2)
    arrays = dict(
        x_train=rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), y_train=rng.integers(0, 10, n_train),
        x_test=rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), y_test=rng.integers(0, 10, n_test),
    )
    np.savez(path, **arrays)
    return arrays


@pytest.mark.parametrize("compress", [True, False])
def test_idx_dir_round_trip(tmp_path, compress):
    written = make_idx_dir(str(tmp_path), compress=compress)
    arrays = mnist_files.load_idx_dir(str(tmp_path))
    np.testing.assert_array_equal(arrays.train_x, written["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(arrays.test_y, written["t10k-labels-idx1-ubyte"])
    assert arrays.train_y.dtype == np.int64 and arrays.train_x.shape == (20, 28, 28)


def test_npz_round_trip(tmp_path):
    written = make_npz(tmp_path / "mnist.npz")
    arrays = mnist_files.load_path(str(tmp_path / "mnist.npz"))
    np.testing.assert_array_equal(arrays.train_x, written["x_train"])
    np.testing.assert_array_equal(arrays.test_y, written["y_test"])


def test_mnist_prefers_data_path_then_keras_cache(tmp_path):
    (tmp_path / "cache").mkdir()
    make_npz(tmp_path / "cache" / "mnist.npz", n_train=7)
    arrays = mnist_source.load_mnist(None, allow_download=False, download_dir=str(tmp_path / "cache"))
    assert len(arrays.train_x) == 7
    make_idx_dir(str(tmp_path / "idx"), n_train=5)
    assert len(mnist_source.load_mnist(str(tmp_path / "idx"), allow_download=False, download_dir=str(tmp_path / "cache")).train_x) == 5


def test_bad_magic_number(tmp_path):
    make_idx_dir(str(tmp_path))
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(b"PK\x03\x04 not an idx file")
    with pytest.raises(DataError, match="not an IDX file"):
        mnist_files.load_idx_dir(str(tmp_path))


def test_truncated_idx(tmp_path):
    make_idx_dir(str(tmp_path), compress=False)
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="truncated or corrupt"):
        mnist_files.load_idx_dir(str(tmp_path))


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_damaged_gzip_idx(tmp_path, damage):
    make_idx_dir(str(tmp_path))
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = bytearray(path.read_bytes())
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:
        raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"^data.path: cannot read .*train-images-idx3-ubyte.gz: .*replace the file"):
        mnist_files.load_idx_dir(str(tmp_path))


def test_missing_idx_file(tmp_path):
    make_idx_dir(str(tmp_path))
    os.remove(tmp_path / "t10k-labels-idx1-ubyte.gz")
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte"):
        mnist_files.load_idx_dir(str(tmp_path))


def test_corrupt_npz(tmp_path):
    (tmp_path / "mnist.npz").write_bytes(b"garbage")
    with pytest.raises(DataError, match="cannot read"):
        mnist_files.load_path(str(tmp_path / "mnist.npz"))


def test_missing_path(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        mnist_files.load_path(str(tmp_path / "nope.npz"))


def test_mnist_offline_fails_fast_with_advice(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.setattr(downloads, "unreachable", lambda url: None)  # the host answers; the request then fails
    with pytest.raises(DataError, match="data.path=/path/to/mnist.npz") as e:
        mnist_source.load_mnist(None, allow_download=True, download_dir=str(tmp_path))
    assert "cannot download" in str(e.value)
    assert os.listdir(tmp_path) == []  # no partial file left


def test_download_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    import io

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Response(b"not mnist"))
    monkeypatch.setattr(downloads, "unreachable", lambda url: None)
    with pytest.raises(DataError, match="expected"):
        downloads.download("https://example.invalid/mnist.npz", str(tmp_path / "mnist.npz"), mnist_source.MNIST_NPZ_SHA256)
    assert os.listdir(tmp_path) == []


def test_download_verifies_and_stores(tmp_path, monkeypatch):
    import hashlib
    import io

    payload = b"some bytes"

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Response(payload))
    monkeypatch.setattr(downloads, "unreachable", lambda url: None)
    dest = downloads.download("https://example.invalid/f", str(tmp_path / "f"), hashlib.sha256(payload).hexdigest())
    assert open(dest, "rb").read() == payload


def test_synthetic_is_seeded_and_shaped():
    a, b = synthetic.make_synthetic(50, 20), synthetic.make_synthetic(50, 20)
    np.testing.assert_array_equal(a.train_x, b.train_x)
    assert a.train_x.shape == (50, 28, 28) and a.train_x.dtype == np.uint8 and a.test_y.shape == (20,)


def test_pipeline_skip_resumes_the_shuffled_stream():
    arrays = synthetic.make_synthetic(64, 8)
    labels = np.arange(64)  # label = example index, to follow the order

    def batches(skip, n):
        with tf.Graph().as_default():
            p = pipelines.make_pipeline(arrays.train_x, labels, 8, "x", train=True, seed=3)
            with tf.compat.v1.Session() as sess:
                sess.run(p.initializer, p.feeds(skip))
                return [sess.run(p.labels) for _ in range(n)]

    straight = batches(0, 20)  # 2.5 epochs: reshuffled each epoch
    resumed = batches(12, 8)
    for a, b in zip(straight[12:], resumed):
        np.testing.assert_array_equal(a, b)
    assert sorted(np.concatenate(straight[:8])) == list(range(64))  # one epoch sees every example once


def test_pipeline_does_not_embed_the_data_in_the_graph():
    arrays = synthetic.make_synthetic(6000, 10)
    with tf.Graph().as_default() as g:
        pipelines.make_pipeline(arrays.train_x, arrays.train_y, 8, "x", train=True, seed=0)
        assert len(g.as_graph_def().SerializeToString()) < 100_000


def _npz_of(path, train_x, train_y, test_x, test_y):
    np.savez(path, x_train=train_x, y_train=train_y, x_test=test_x, y_test=test_y)
    return str(path)


@pytest.mark.slow
def test_float_images_are_used_as_they_are_not_cast_to_uint8(make_cfg, tmp_path):
    # The same images as uint8 pixels and as floats in [0, 1]: both learn alike. (A uint8 cast
    # made the floats zeros: 0.108 accuracy, exit 0.)
    from trainer import run

    arrays = synthetic.make_synthetic(2048, 256)
    as_pixels = _npz_of(tmp_path / "pixels.npz", arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y)
    as_floats = _npz_of(tmp_path / "floats.npz", arrays.train_x / np.float32(255), arrays.train_y,
                        arrays.test_x / np.float32(255), arrays.test_y)
    loaded = mnist_files.load_npz(as_floats)
    assert loaded.train_x.dtype == np.float32 and loaded.train_x.max() <= 1.0 and loaded.train_x.max() > 0.5
    accuracy = {}
    for name, path in (("pixels", as_pixels), ("floats", as_floats)):
        cfg = make_cfg("data=mnist", f"data.path={path}", "train.max_steps=150", "model.params.hidden_units=[64]")
        accuracy[name] = run(cfg, str(tmp_path / name))["eval_accuracy"]
    assert accuracy["pixels"] > 0.5 and abs(accuracy["floats"] - accuracy["pixels"]) < 0.05, accuracy


@pytest.mark.parametrize("images, labels, message", [
    (np.full((4, 28, 28), 300, np.int16), np.zeros(4), r"int16 pixels range over \[300, 300\]"),
    (np.full((4, 28, 28), np.nan, np.float32), np.zeros(4), "NaN or Inf"),
    (np.zeros((4, 28, 28), np.uint8), np.array([0, 1, 57, 2]), r"labels range over \[0, 57\], outside the 10 classes"),
    (np.zeros((4, 28, 28), np.uint8), np.array([0.0, 1.5, 2.0, 3.0]), "not all whole numbers"),
])
def test_data_that_would_be_cast_is_refused_naming_the_file(tmp_path, images, labels, message):
    path = _npz_of(tmp_path / "bad.npz", images, labels, images, labels)
    with pytest.raises(DataError, match=f"data.path={path}.*{message}"):
        mnist_files.load_npz(path)


def test_integer_pixels_in_range_are_kept_exactly(tmp_path):
    images = np.arange(4 * 28 * 28).reshape(4, 28, 28) % 256
    path = _npz_of(tmp_path / "ints.npz", images.astype(np.int64), np.arange(4), images, np.arange(4))
    loaded = mnist_files.load_npz(path)
    assert loaded.train_x.dtype == np.uint8 and np.array_equal(loaded.train_x, images)


def test_bytes_that_are_not_an_npz_are_refused_without_pickle_advice(tmp_path):
    path = tmp_path / "random.npz"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(DataError, match=f"data.path: cannot read {path} as .npz") as raised:
        mnist_files.load_npz(str(path))
    assert "allow_pickle" not in str(raised.value)


MNIST_LIKE = np.zeros((1, 28, 28), np.uint8)


def test_predict_input_errors_name_predict_input(tmp_path):
    bad = tmp_path / "bad-images-idx3-ubyte"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(DataError, match=f"predict.input: {bad} is not an IDX file"):
        predict_input.load_prediction_input(str(bad), MNIST_LIKE)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="predict.input"):
        predict_input.load_prediction_input(str(junk), MNIST_LIKE)
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((3, 32, 32, 3), np.uint8))
    with pytest.raises(DataError, match=r"predict.input=.*examples of shape \(32, 32, 3\), the model was trained on 28x28"):
        predict_input.load_prediction_input(str(other), MNIST_LIKE)


@pytest.mark.parametrize("start", [7, 8, 15, 1000])
def test_a_resumed_pipeline_starts_at_its_batch_across_epoch_boundaries(start):
    # 60 examples in batches of 8: batches straddle epochs; each epoch is a new permutation.
    arrays = synthetic.make_synthetic(60, 8)
    labels = np.arange(60)

    def batches(step, n, replicas=(1, 0)):
        with tf.Graph().as_default():
            p = pipelines.make_pipeline(arrays.train_x, labels, 8, "x", train=True, seed=5, replicas=replicas)
            with tf.compat.v1.Session() as sess:
                sess.run(p.initializer, p.feeds(step))
                return [sess.run(p.labels) for _ in range(n)]

    straight = np.concatenate(batches(0, max(start + 3, 15)))  # at least two epochs
    resumed = np.concatenate(batches(start, 3))
    np.testing.assert_array_equal(straight[start * 8:(start + 3) * 8], resumed)
    epochs = straight[:120].reshape(2, 60)
    assert all(sorted(e) == list(range(60)) for e in epochs) and not np.array_equal(epochs[0], epochs[1])
    # Two replicas read disjoint halves; each sees its half once per epoch.
    halves = [np.concatenate(batches(0, 3, replicas=(2, i)))[:24] for i in (0, 1)]
    assert set(halves[0]) <= set(range(0, 60, 2)) and set(halves[1]) <= set(range(1, 60, 2))


# --- read while TensorFlow imports -------------------------------------------------------------

def test_data_read_ahead_is_taken_once_and_its_log_lines_wait_for_it(caplog):
    logged = threading.Event()

    def load(data_cfg):
        logging.getLogger("trainer.data.sources").info("read %s in %s", data_cfg.name, threading.current_thread().name)
        logged.set()
        return data_cfg.train_examples

    cfg = OmegaConf.create({"name": "synthetic", "train_examples": 7})
    with caplog.at_level(logging.INFO), ahead.loading_ahead(cfg, load):
        assert logged.wait(10)
        assert "read synthetic" not in caplog.text  # held: fd 2 is silenced during TensorFlow's import
        assert ahead.taken(OmegaConf.create({"name": "synthetic", "train_examples": 8})) is ahead.NOT_LOADED
        assert ahead.taken(cfg) == 7
        assert "read synthetic in data-ahead" in caplog.text
        assert ahead.taken(cfg) is ahead.NOT_LOADED  # once


def test_data_read_ahead_raises_its_error_where_taken():
    def load(data_cfg):
        raise DataError(f"data.path: {data_cfg.path} is not there")

    cfg = OmegaConf.create({"name": "mnist", "path": "/nowhere"})
    with ahead.loading_ahead(cfg, load), pytest.raises(DataError, match="^data.path: /nowhere is not there$"):
        ahead.taken(cfg)


def test_a_run_trains_on_the_data_read_while_tensorflow_imported(make_cfg, tmp_path, monkeypatch):
    threads = []
    make = synthetic.make_synthetic

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return make(*args, **kwargs)

    monkeypatch.setattr(synthetic, "make_synthetic", recording)
    result = run(make_cfg("train.max_steps=4", "eval.every_steps=0"), str(tmp_path))
    assert threads == ["data-ahead"]
    assert result["global_step"] == 4 and result["eval_examples"] == 128


@pytest.mark.cli
def test_the_sources_read_ahead_import_no_tensorflow(make_cfg, tmp_path):
    """The thread that reads the data runs while the main thread imports TensorFlow: a source it reads
    must not import TensorFlow itself (two threads importing it is a module-lock deadlock, as
    TFRecord's protobuf check was: those sources are not read ahead)."""
    import json
    import subprocess
    import sys

    make_idx_dir(tmp_path / "idx")
    make_npz(tmp_path / "arrays.npz")
    paths = {"mnist": tmp_path / "idx", "fashion_mnist": tmp_path / "idx", "numpy": tmp_path / "arrays.npz"}
    probe = ("import json, sys; from omegaconf import OmegaConf; from trainer.data.sources import load_arrays; "
             "arrays = load_arrays(OmegaConf.create(json.loads(sys.argv[1]))); assert len(arrays.train_x); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow'))")
    read_ahead = [n for n in source_names() if source_of(OmegaConf.create({"name": n})).read_ahead]
    assert sorted(read_ahead) == ["fashion_mnist", "mnist", "numpy", "synthetic"]
    for name in read_ahead:
        cfg = make_cfg(f"data={name}", *([f"data.path={paths[name]}"] if name in paths else []))
        spec = json.dumps(OmegaConf.to_container(cfg.data, resolve=True))
        proc = subprocess.run([sys.executable, "-c", probe, spec], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        assert proc.stdout.strip() == "[]", (name, proc.stdout)


def test_an_unreachable_download_host_is_named_within_seconds():
    import time

    from trainer.data.download import RESOLVE_SECS, unreachable

    started = time.time()
    why = unreachable("https://no-such-host.invalid/mnist.npz")
    assert why and why.startswith("no-such-host.invalid ") and "offline?" in why
    assert time.time() - started < RESOLVE_SECS + 1
