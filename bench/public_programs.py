"""Public Estimator-era programs, fetched from their repositories (never copied here), run unedited
through ``train-estimator`` and, with the fewest edits TensorFlow 2.15 needs, on real Estimator 2.15 in
a side environment:

    python3 -m venv ../est215 && ../est215/bin/pip install tensorflow-cpu==2.15.1 \\
        tensorflow-estimator==2.15.0 "numpy<2" "pandas<2.3" tf-slim
    python -m bench.public_programs --sources SOURCES --reference-python ../est215/bin/python \\
        --rounds 2 --json bench/results/public-programs.json

``SOURCES`` holds one entry per repository, named ``owner+name``: either a git directory
(``owner+name/repo``, as ``git clone --bare`` makes it) read at the commit listed below, or the files
themselves under ``owner+name/`` at their repository paths. The data: Fisher's iris table from
scikit-learn's wheel (``pip download``), the UCI Adult rows the cloudml-samples repository ships,
Fashion-MNIST from Debian's ``dataset-fashion-mnist`` written as the TFRecords ``mnist_tpu.py`` reads,
and a small generated corpus, vocabulary and sentence task in BERT's formats (the pre-training
records written by BERT's own ``create_pretraining_data.py`` through ``train-estimator``).

For each program and round, in alternating order: each side trains from scratch (its own seed), then
each side continues the other's ``model_dir`` to twice the steps. Read from each ``model_dir`` with
TensorFlow's event reader: the eval metrics the program wrote, training steps/s between its first and
last loss summaries, and the seconds from process start to the step-0 checkpoint (time to first step).
A bare ``import tensorflow`` is timed on each side too, since the two TensorFlow versions differ there.
The Estimator side's edits are listed per program and counted in changed lines.
"""

import argparse
import difflib
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Callable, Dict, List, NamedTuple, Sequence, Tuple

import numpy as np

_COMPAT = (r"^import tensorflow as tf$", "import tensorflow.compat.v1 as tf")


class Program(NamedTuple):
    name: str
    repo: str
    commit: str
    files: Tuple[str, ...]
    run_dir: str  # repository-relative directory the program runs in
    command: Callable[[str, str, int], List[str]]  # (data dir, model_dir, 1 or 2 for the continuation) -> argv
    metric: str
    edits: Dict[str, Sequence[Tuple[str, str]]]  # file -> (regex, replacement) for Estimator 2.15
    style: str


def _tpu_iris(data, model_dir, k):
    return ["custom_tpuestimator.py", "--use_tpu=False", f"--model_dir={model_dir}", f"--train_steps={400 * k}"]


def _mnist_tpu(data, model_dir, k):
    return ["mnist_tpu.py", "--use_tpu=False", f"--model_dir={model_dir}", f"--data_dir={data}/mnist",
            f"--train_steps={300 * k}", "--batch_size=64", "--eval_steps=16", "--enable_predict=False"]


def _bert_classifier(data, model_dir, k):
    return ["run_classifier.py", "--task_name=cola", "--do_train=true", "--do_eval=true", f"--data_dir={data}/bert/cola",
            f"--vocab_file={data}/bert/vocab.txt", f"--bert_config_file={data}/bert/bert_config.json",
            "--max_seq_length=32", "--train_batch_size=32", "--learning_rate=1e-3", f"--num_train_epochs={5 * k}",
            "--save_checkpoints_steps=1000", f"--output_dir={model_dir}"]


def _bert_pretraining(data, model_dir, k):
    return ["run_pretraining.py", f"--input_file={data}/bert/pretrain.tfrecord", f"--output_dir={model_dir}",
            "--do_train=True", "--do_eval=True", f"--bert_config_file={data}/bert/bert_config.json",
            "--train_batch_size=16", "--max_seq_length=32", "--max_predictions_per_seq=5",
            f"--num_train_steps={300 * k}", "--num_warmup_steps=10", "--learning_rate=1e-3", "--max_eval_steps=20"]


def _cloudml_iris(data, model_dir, k):
    return ["-m", "trainer.task", "--train-files", f"{data}/home/.keras/datasets/iris_training.csv", "--eval-files",
            f"{data}/home/.keras/datasets/iris_test.csv", "--job-dir", model_dir, f"--train-steps={400 * k}"]


def _census(data, model_dir, k):
    return ["-m", "trainer.task", f"--train-files={data}/adult.data", f"--eval-files={data}/adult.test",
            f"--job-dir={model_dir}", f"--train-steps={400 * k}", "--eval-steps=50"]


def _premade(data, model_dir, k):
    return ["premade_estimator.py", f"--train_steps={400 * k}"]


_BERT = ("modeling.py", "optimization.py", "tokenization.py")
_BERT_EDITS = {
    "modeling.py": [_COMPAT, (r"^import six$", "import six\nimport tf_slim"),
                    (r"tf\.contrib\.layers\.layer_norm", "tf_slim.layers.layer_norm")],
    "optimization.py": [_COMPAT], "tokenization.py": [_COMPAT],
}
_CLOUDML = "GoogleCloudPlatform/cloudml-samples"
_CLOUDML_COMMIT = "efddc4a9898127e55edc0946557aca4bfaf59705"
_TPU = "tensorflow/tpu"
_TPU_COMMIT = "7dc921f846c9e4071f3884b768a7ddf521272a49"
_BERT_REPO = "google-research/bert"
_BERT_COMMIT = "eedf5716ce1268e56f0a50264a88cafad334ac61"
_CENSUS_LOOKUP = [(r"^import tensorflow as tf$", "import tensorflow.compat.v1 as tf\n"
                                                 "from tensorflow.python.ops import lookup_ops"),
                  (r"tf\.contrib\.lookup\.", "lookup_ops.")]

PROGRAMS = (
    Program("tpu/custom_tpuestimator (iris)", _TPU, _TPU_COMMIT,
            ("models/samples/core/get_started/custom_tpuestimator.py",
             "models/samples/core/get_started/iris_data_tpu.py"),
            "models/samples/core/get_started", _tpu_iris, "accuracy",
            {"custom_tpuestimator.py": [
                (r"^from tensorflow\.contrib import cluster_resolver as contrib_cluster_resolver$",
                 "from tensorflow.compat.v1.distribute import cluster_resolver as contrib_cluster_resolver"),
                (r"^from tensorflow\.contrib import tpu as contrib_tpu$",
                 "from tensorflow.compat.v1.estimator import tpu as contrib_tpu"),
                (r"contrib_cluster_resolver\.TPUClusterResolver\(FLAGS\.tpu\)", "None"),
                (r"^  tf\.app\.run\(main\)$", "  tf.disable_v2_behavior()\n  tf.app.run(main)")]},
            "TF 1.15 compat.v1, TPUEstimator, tf.contrib.tpu, tf.flags, tf.app.run"),
    Program("tpu/mnist_tpu", _TPU, _TPU_COMMIT, ("models/official/mnist/mnist_tpu.py",), "models/official/mnist",
            _mnist_tpu, "accuracy",
            {"mnist_tpu.py": [(r"tpu_cluster_resolver = tf\.distribute", "tpu_cluster_resolver = None and tf.distribute"),
                              (r"^  app\.run\(main\)$", "  tf.disable_v2_behavior()\n  app.run(main)")]},
            "compat.v1, TPUEstimator, TPUClusterResolver with no TPU name, absl"),
    Program("bert/run_classifier", _BERT_REPO, _BERT_COMMIT, ("run_classifier.py", *_BERT), "", _bert_classifier,
            "eval_accuracy",
            {**_BERT_EDITS, "run_classifier.py": [_COMPAT, (r"tf\.contrib\.tpu\.", "tf.estimator.tpu."),
                                                  (r"tf\.contrib\.data\.", "tf.data.experimental."),
                                                  (r"^  tf\.app\.run\(\)$", "  tf.disable_v2_behavior()\n  tf.app.run()")]},
            "TF 1.x, TPUEstimator, tf.contrib.layers.layer_norm, tf.flags, tf.gfile"),
    Program("bert/run_pretraining", _BERT_REPO, _BERT_COMMIT, ("run_pretraining.py", *_BERT), "", _bert_pretraining,
            "masked_lm_accuracy",
            {**_BERT_EDITS, "run_pretraining.py": [
                _COMPAT, (r"tf\.contrib\.tpu\.", "tf.estimator.tpu."),
                (r"tf\.contrib\.data\.", "tf.data.experimental."),
                (r"^  tf\.app\.run\(\)$", "  tf.disable_v2_behavior()\n  tf.app.run()")]},
            "TF 1.x, TPUEstimator, tf.contrib.data, init_checkpoint"),
    Program("cloudml-samples/iris (trainer/)", _CLOUDML, _CLOUDML_COMMIT,
            ("tensorflow/standard/iris/trainer/__init__.py", "tensorflow/standard/iris/trainer/model.py",
             "tensorflow/standard/iris/trainer/task.py"), "tensorflow/standard/iris", _cloudml_iris, "accuracy",
            {"trainer/model.py": [_COMPAT], "trainer/task.py": [
                _COMPAT, (r"^  tf\.logging\.set_verbosity", "  tf.disable_v2_behavior()\n  tf.logging.set_verbosity")]},
            "TF 1.x canned DNNClassifier, train_and_evaluate, FinalExporter, python -m trainer.task"),
    Program("cloudml-samples/census estimator (trainer/)", _CLOUDML, _CLOUDML_COMMIT,
            tuple(f"census/estimator/{p}" for p in ("constants/__init__.py", "constants/constants.py",
                                                    "trainer/__init__.py", "trainer/featurizer.py",
                                                    "trainer/input.py", "trainer/model.py", "trainer/task.py")),
            "census/estimator", _census, "accuracy",
            {"trainer/featurizer.py": [_COMPAT], "trainer/model.py": [_COMPAT], "trainer/input.py": _CENSUS_LOOKUP,
             "trainer/task.py": [_COMPAT, (r"^    tf\.logging\.set_verbosity",
                                          "    tf.disable_v2_behavior()\n    tf.logging.set_verbosity")]},
            "TF 1.x canned DNNLinearCombinedClassifier, tf.contrib.lookup, train_and_evaluate"),
    Program("cloudml-samples/census customestimator (trainer/)", _CLOUDML, _CLOUDML_COMMIT,
            tuple(f"census/customestimator/trainer/{p}" for p in ("__init__.py", "model.py", "task.py")),
            "census/customestimator", _census, "accuracy",
            {"trainer/model.py": _CENSUS_LOOKUP + [(r"tf\.contrib\.framework\.", "tf.train.")],
             "trainer/task.py": [_COMPAT, (r"^    tf\.logging\.set_verbosity",
                                          "    tf.disable_v2_behavior()\n    tf.logging.set_verbosity")]},
            "TF 1.x custom model_fn, tf.contrib.lookup and .framework, train_and_evaluate"),
    Program("models/premade_estimator (iris)", "tensorflow/models", "009556f32100e064006309d409d0e94eca1dbf6a",
            ("samples/core/get_started/premade_estimator.py",
             "samples/core/get_started/iris_data.py@2c94ade5739d82e03a3116218144b54d1838caa5"),
            "samples/core/get_started", _premade, "accuracy",
            {"premade_estimator.py": [_COMPAT, (r"^    tf\.logging\.set_verbosity",
                                                "    tf.disable_v2_behavior()\n    tf.logging.set_verbosity")],
             "iris_data.py": [_COMPAT]},
            "TF 1.x canned DNNClassifier, no model_dir (a temporary one), tf.app.run"),
)


# ---- sources and data -------------------------------------------------------------------------------


def materialize(program: Program, sources: str, dest: str) -> str:
    """Writes the program's files under ``dest`` at their repository paths; returns the dir it runs in."""
    root = os.path.join(sources, program.repo.replace("/", "+"))
    for entry in program.files:
        path, _, commit = entry.partition("@")
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            out.write(_read_source(root, path, commit or program.commit))
    return os.path.join(dest, program.run_dir)


def _read_source(root: str, path: str, commit: str) -> bytes:
    git_dir = os.path.join(root, "repo")
    if os.path.isdir(git_dir):
        for rev in (commit, "HEAD"):  # a snapshot may hold only its newest commit
            done = subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], capture_output=True)
            if done.returncode == 0:
                return done.stdout
    plain = os.path.join(root, path)
    if os.path.isfile(plain):
        with open(plain, "rb") as handle:
            return handle.read()
    raise SystemExit(f"error: {path} of {root}: not found; fetch the repository into --sources")


def edited(run_dir: str, edits: Dict[str, Sequence[Tuple[str, str]]]) -> int:
    """Applies the Estimator side's edits in place; returns the number of changed lines."""
    changed = 0
    for name, rules in edits.items():
        path = os.path.join(run_dir, name)
        with open(path, encoding="utf-8") as handle:
            before = handle.read()
        after = before
        for pattern, replacement in rules:
            after, count = re.subn(pattern, replacement, after, flags=re.M)
            if not count:
                raise SystemExit(f"error: edit {pattern!r} matches nothing in {name}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(after)
        diff = difflib.ndiff(before.splitlines(), after.splitlines())
        changed += sum(1 for line in diff if line.startswith("+ "))
    return changed


def prepare_data(data: str, sources: str) -> None:
    """The data every program reads (see the module's doc), written once into ``data``."""
    os.makedirs(data, exist_ok=True)
    _iris(os.path.join(data, "home", ".keras", "datasets"), os.path.join(data, "wheel"))
    _adult(data, os.path.join(sources, _CLOUDML.replace("/", "+")))
    _mnist_records(os.path.join(data, "mnist"))
    _bert_inputs(os.path.join(data, "bert"), sources)


def _iris(target: str, wheels: str) -> None:
    if os.path.isfile(os.path.join(target, "iris_test.csv")):
        return
    os.makedirs(target, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels, "scikit-learn"],
                   check=True)
    wheel = next(os.path.join(wheels, w) for w in os.listdir(wheels) if w.startswith("scikit_learn"))
    rows = zipfile.ZipFile(wheel).read("sklearn/datasets/data/iris.csv").decode().strip().splitlines()[1:]
    order = np.random.RandomState(0).permutation(len(rows))  # TensorFlow's files: 120 to train, 30 to test
    for name, part in (("iris_training.csv", order[:120]), ("iris_test.csv", order[120:])):
        with open(os.path.join(target, name), "w") as out:
            out.write(f"{len(part)},4,setosa,versicolor,virginica\n" + "".join(rows[i] + "\n" for i in part))


def _adult(data: str, cloudml: str) -> None:
    """UCI Adult rows as the census samples read them (``adult.data``: cells joined by ``", "``)."""
    for name, path in (("adult.data", "train-data-01.csv"), ("adult.test", "eval-data-01.csv")):
        target = os.path.join(data, name)
        if not os.path.isfile(target):
            text = _read_source(cloudml, f"cloudml-template/examples/classification/census/data/{path}",
                                _CLOUDML_COMMIT).decode()
            with open(target, "w") as out:
                out.write("".join(", ".join(line.split(",")) + "\n" for line in text.strip().splitlines()))


def _idx(path: str) -> np.ndarray:
    with gzip.open(path) as handle:
        raw = handle.read()
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3])]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def _mnist_records(target: str, source: str = "/usr/share/datasets/fashion-mnist") -> None:
    if os.path.isfile(os.path.join(target, "test.tfrecords")):
        return
    import tensorflow as tf

    os.makedirs(target, exist_ok=True)
    train = _idx(f"{source}/train-images-idx3-ubyte.gz"), _idx(f"{source}/train-labels-idx1-ubyte.gz")
    test = _idx(f"{source}/t10k-images-idx3-ubyte.gz"), _idx(f"{source}/t10k-labels-idx1-ubyte.gz")
    for name, (images, labels) in (("train", (train[0][:10000], train[1][:10000])),
                                   ("validation", (test[0][:2048], test[1][:2048])),
                                   ("test", (test[0][-10:], test[1][-10:]))):
        with tf.io.TFRecordWriter(os.path.join(target, f"{name}.tfrecords")) as writer:
            for image, label in zip(images, labels):
                feature = {"image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _bert_inputs(target: str, sources: str) -> None:
    """A 2-layer, 32-wide BERT config, a 159-word vocabulary, a CoLA-style task whose label is which of
    two word groups a sentence holds (15% of labels flipped), and a pre-training corpus, written as
    records by BERT's own ``create_pretraining_data.py`` (through ``train-estimator``)."""
    if os.path.isfile(os.path.join(target, "pretrain.tfrecord")):
        return
    rng = np.random.RandomState(0)
    words = [f"w{i}" for i in range(150)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "good", "fine", "bad", "awful"]
    os.makedirs(os.path.join(target, "cola"), exist_ok=True)
    _write(os.path.join(target, "vocab.txt"), "".join(w + "\n" for w in vocab))
    config = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 64,
              "num_attention_heads": 2, "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": len(vocab)}
    _write(os.path.join(target, "bert_config.json"), json.dumps(config, indent=1))

    def sentence():
        label = int(rng.rand() < 0.5)
        tokens = list(rng.choice(words, rng.randint(4, 13)))
        tokens.insert(rng.randint(0, len(tokens) + 1), rng.choice(["good", "fine"] if label else ["bad", "awful"]))
        return label if rng.rand() > 0.15 else 1 - label, " ".join(tokens)

    for name, rows in (("train.tsv", 2000), ("dev.tsv", 400)):
        _write(os.path.join(target, "cola", name),
               "".join("src{}\t{}\t\t{}\n".format(i, *sentence()) for i in range(rows)))
    _write(os.path.join(target, "cola", "test.tsv"),
           "index\tsentence\n" + "".join(f"{i}\t{sentence()[1]}\n" for i in range(20)))
    corpus = "".join("".join(" ".join(rng.choice(words[:40 + d], rng.randint(5, 16))) + "\n" for _ in range(8)) + "\n"
                     for d in range(60))
    _write(os.path.join(target, "corpus.txt"), corpus)
    with tempfile.TemporaryDirectory() as tree:
        program = Program("bert/create_pretraining_data", _BERT_REPO, _BERT_COMMIT,
                          ("create_pretraining_data.py", "tokenization.py"), "", None, "", {}, "")
        run_dir = materialize(program, sources, tree)
        subprocess.run([_launcher(), "create_pretraining_data.py",
                        f"--input_file={target}/corpus.txt", f"--output_file={target}/pretrain.tfrecord",
                        f"--vocab_file={target}/vocab.txt", "--max_seq_length=32", "--max_predictions_per_seq=5",
                        "--dupe_factor=3"], cwd=run_dir, check=True, capture_output=True)


def _write(path: str, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


# ---- running and reading ------------------------------------------------------------------------------

SIDES = ("estimator", "trainer")


def run_side(side: str, reference_python: str, run_dir: str, argv: List[str], data: str, log: str) -> dict:
    """Runs one side's process; returns its exit status, wall seconds, start time and the log's path."""
    command = [reference_python, *argv] if side == "estimator" else [_launcher(), *argv]
    env = dict(os.environ, HOME=os.path.join(data, "home"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    start = time.time()
    with open(log, "w") as out:
        done = subprocess.run(command, cwd=run_dir, env=env, stdout=out, stderr=subprocess.STDOUT)
    return {"rc": done.returncode, "wall_s": round(time.time() - start, 2), "start": start, "log": log}


def _launcher() -> str:
    return shutil.which("train-estimator") or os.path.join(os.path.dirname(sys.executable), "train-estimator")


def _events(directory: str):
    import tensorflow as tf

    for name in sorted(os.listdir(directory)):
        if name.startswith("events.out.tfevents"):
            yield from tf.compat.v1.train.summary_iterator(os.path.join(directory, name))


def read_model_dir(model_dir: str, start: float) -> dict:
    """What the run left in ``model_dir``: final step, eval metrics, steps/s, time to first step."""
    import tensorflow as tf

    found: dict = {"global_step": None, "metrics": {}, "steps_per_s": None, "first_step_s": None}
    latest = tf.train.latest_checkpoint(model_dir) if os.path.isdir(model_dir) else None
    if latest:
        found["global_step"] = int(latest.rsplit("-", 1)[1])
    step0 = os.path.join(model_dir, "model.ckpt-0.index")
    if os.path.isfile(step0):
        found["first_step_s"] = round(os.path.getmtime(step0) - start, 2)
    events = [e for e in _events(model_dir) if e.wall_time >= start] if latest else []
    losses = [(e.step, e.wall_time) for e in events for v in e.summary.value if v.tag == "loss"]
    rates = [v.simple_value for e in events for v in e.summary.value if v.tag == "global_step/sec"]
    if len(losses) >= 2 and losses[-1][0] > losses[0][0]:
        found["steps_per_s"] = round((losses[-1][0] - losses[0][0]) / (losses[-1][1] - losses[0][1]), 1)
    elif rates:  # no loss summaries (TPUEstimator's): the step counter's own rate, after its first
        found["steps_per_s"] = round(statistics.median(rates[1:] or rates), 1)
    evals = [os.path.join(model_dir, d) for d in sorted(os.listdir(model_dir)) if d.startswith("eval")] if latest else []
    for directory in (d for d in evals if os.path.isdir(d)):
        for event in _events(directory):
            values = {v.tag: round(float(v.simple_value), 6) for v in event.summary.value if v.HasField("simple_value")}
            if values:
                found["metrics"] = values
    return found


_TEMP_DIR = re.compile(r"Using temporary folder as model directory: (\S+)")


def trained(side: str, args, program: Program, tree: str, model_dir: str, k: int, log: str) -> dict:
    """One run of ``program`` on ``side`` (k=1 from scratch, 2 to continue ``model_dir``), read back."""
    run = run_side(side, args.reference_python, tree, program.command(args.data, model_dir, k), args.data, log)
    with open(log, errors="replace") as handle:
        text = handle.read()
    used = _TEMP_DIR.search(text)
    where = used.group(1) if used else model_dir
    result = {"rc": run["rc"], "wall_s": run["wall_s"], **read_model_dir(where, run["start"])}
    if run["rc"]:
        result["error"] = text.strip().splitlines()[-1][-300:] if text.strip() else "no output"
    if used:
        shutil.rmtree(where, ignore_errors=True)
    return result


def one_program(program: Program, args, work: str, rounds: int) -> dict:
    """The rounds of one program: both sides from scratch, then each continuing the other's model_dir."""
    trees = {}
    for side in SIDES:
        trees[side] = materialize(program, args.sources, os.path.join(work, side))
    edits = edited(trees["estimator"], program.edits)
    runs: Dict[str, list] = {side: [] for side in SIDES}
    crossed: Dict[str, list] = {side: [] for side in SIDES}
    for r in range(rounds):
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        dirs = {}
        for side in order:
            dirs[side] = os.path.join(work, f"{side}-{r}")
            runs[side].append(trained(side, args, program, trees[side], dirs[side], 1,
                                      os.path.join(work, f"{side}-{r}.log")))
        for side, other in (("trainer", "estimator"), ("estimator", "trainer")):
            if not runs[other][-1]["global_step"] or not os.path.isdir(dirs[other]):  # failed, or a temporary dir
                continue
            shutil.copytree(dirs[other], dirs[other] + f"-by-{side}")
            crossed[side].append(trained(side, args, program, trees[side], dirs[other] + f"-by-{side}", 2,
                                         os.path.join(work, f"{side}-continues-{other}-{r}.log")))
    return {"program": program.name, "repo": program.repo, "style": program.style, "metric": program.metric,
            "estimator_edits": edits, "runs": runs, "continues_other": crossed}


def _summary(result: dict) -> dict:
    """Per side: ran (all rounds exited 0), the metric's mean (and spread), steps/s and first-step medians."""
    out = {}
    for side in SIDES:
        runs = result["runs"][side]
        metric = [r["metrics"].get(result["metric"]) for r in runs if r["metrics"].get(result["metric"]) is not None]
        speed = [r["steps_per_s"] for r in runs if r["steps_per_s"]]
        first = [r["first_step_s"] for r in runs if r["first_step_s"] is not None]
        cont = result["continues_other"][side]
        out[side] = {
            "ran": all(r["rc"] == 0 for r in runs),
            "metric": round(statistics.mean(metric), 4) if metric else None,
            "metric_spread": round(max(metric) - min(metric), 4) if len(metric) > 1 else None,
            "steps_per_s": statistics.median(speed) if speed else None,
            "first_step_s": statistics.median(first) if first else None,
            "continues_other": (all(c["rc"] == 0 and c["global_step"] and c["global_step"] > 0 for c in cont)
                                if cont else None),
        }
    return out


def table(results: Sequence[dict]) -> str:
    """The markdown table BENCHMARKS.md shows."""
    lines = ["| program | unedited on train-estimator | Estimator 2.15 edits (lines) | metric | Estimator 2.15 "
             "| train-estimator | steps/s Estimator / ours | first step s Estimator / ours "
             "| ours continues Estimator's model_dir / Estimator continues ours |",
             "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        s = result["summary"]
        e, t = s["estimator"], s["trainer"]
        lines.append(f"| {result['program']} | {'yes' if t['ran'] else 'NO'} | {result['estimator_edits']} "
                     f"| {result['metric']} | {_num(e['metric'])} | {_num(t['metric'])} "
                     f"| {_num(e['steps_per_s'])} / {_num(t['steps_per_s'])} "
                     f"| {_num(e['first_step_s'])} / {_num(t['first_step_s'])} "
                     f"| {_yes(t['continues_other'])} / {_yes(e['continues_other'])} |")
    return "\n".join(lines)


def _num(value) -> str:
    return "n/a" if value is None else f"{value:g}"


def _yes(value) -> str:
    return "n/a" if value is None else ("yes" if value else "NO")


def import_seconds(reference_python: str, rounds: int) -> Dict[str, float]:
    """Median seconds of a bare ``import tensorflow`` on each side (TensorFlow 2.15 against this
    environment's), interleaved: the part of the time to first step neither program nor framework owns."""
    times: Dict[str, list] = {side: [] for side in SIDES}
    for r in range(rounds):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            python = reference_python if side == "estimator" else sys.executable
            start = time.time()
            subprocess.run([python, "-c", "import tensorflow"], check=True, capture_output=True)
            times[side].append(time.time() - start)
    return {side: round(statistics.median(t), 2) for side, t in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", required=True, help="dir of owner+name repositories (see the module's doc)")
    parser.add_argument("--reference-python", required=True, help="python of the Estimator 2.15 environment")
    parser.add_argument("--data", default=None, help="where the data is written once (default: a temp dir)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", default=None, help="run the programs whose name contains this")
    parser.add_argument("--json", default=None, help="write every run's numbers here")
    args = parser.parse_args(argv)
    args.sources = os.path.abspath(args.sources)
    args.data = os.path.abspath(args.data or tempfile.mkdtemp(prefix="public-data-"))
    prepare_data(args.data, args.sources)
    imports = import_seconds(args.reference_python, max(3, 2 * args.rounds))
    print(json.dumps({"import_tensorflow_s": imports}), flush=True)
    results = []
    for program in PROGRAMS:
        if args.only and args.only not in program.name:
            continue
        with tempfile.TemporaryDirectory(prefix="public-") as work:
            result = one_program(program, args, work, args.rounds)
        result["summary"] = _summary(result)
        print(json.dumps({"program": program.name, **result["summary"]}), flush=True)
        results.append(result)
    print(table(results))
    print(f"import tensorflow alone: Estimator 2.15's {imports['estimator']} s, this environment's "
          f"{imports['trainer']} s (medians)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rounds": args.rounds, "import_tensorflow_s": imports, "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
