"""How long a resumed run's training input takes to reach its step: the first batch after
initialising the array pipeline at global step S, with the constant-time start (a full shuffle,
the default) and with TF's buffered shuffle resumed by skipping (``data.shuffle_buffer`` smaller
than the data). Interleaved, in one process.

    python -m bench.resume --examples 60000 --steps 0 1000 10000 50000 --json resume.json
"""

import argparse
import json
import time

import trainer.process

trainer.process.set_environment()  # a benchmark script: as the command does, before TensorFlow
import tensorflow as tf  # noqa: E402

from trainer.data.pipelines import make_pipeline
from trainer.data.sources.synthetic import make_synthetic
from bench import write_results

tf1 = tf.compat.v1


def first_batch_secs(arrays, step: int, batch: int, shuffle_buffer) -> float:
    with tf.Graph().as_default():
        pipeline = make_pipeline(arrays.train_x, arrays.train_y, batch, "x", train=True, seed=0,
                                 shuffle_buffer=shuffle_buffer)
        with tf1.Session() as sess:
            start = time.perf_counter()
            sess.run(pipeline.initializer, feed_dict=pipeline.feeds(step))
            sess.run(pipeline.labels)
            return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.resume")
    parser.add_argument("--examples", type=int, default=60000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 1000, 10000, 50000])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    arrays = make_synthetic(args.examples, 10)
    rows = []
    for step in args.steps:
        row = {"step": step,
               "constant_secs": round(first_batch_secs(arrays, step, args.batch, None), 3),
               "skip_secs": round(first_batch_secs(arrays, step, args.batch, args.examples - 1), 3)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_results(args.json, args, rows=rows)


if __name__ == "__main__":
    main()
