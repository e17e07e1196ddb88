"""A TPU cluster resolver on a machine without a TPU: what ``use_tpu=False`` programs of the Estimator era
built (``TPUClusterResolver(FLAGS.tpu)`` with no name) resolves to this process."""

import tensorflow as tf


class TPUClusterResolver:
    """``TPUClusterResolver`` as a program built it with ``use_tpu=False``: with no TPU named it resolves to
    this process (``master()`` is ``''``); naming a TPU fails in one line, as there is none."""

    def __init__(self, tpu=None, zone=None, project=None, job_name="worker", coordinator_name=None,
                 coordinator_address=None, credentials="default", service=None, discovery_url=None):
        if tpu:
            raise SystemExit(f"error: TPUClusterResolver(tpu={tpu!r}): the runner has no TPU; run with use_tpu=False "
                             f"and no TPU name")
        self.tpu = tpu

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        return ""

    get_master = master

    def cluster_spec(self):
        return tf.train.ClusterSpec({})
