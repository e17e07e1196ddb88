"""``MultiHead``: several named heads over one model (multi-objective learning), as Estimator's.

Training sums the heads' losses (times ``head_weights``); evaluation reports each head's metrics
under its name (``auc/head1``) and each head's loss (``loss/head1``); predictions are keyed
``(head name, prediction key)``; the export serves the first head by default, every head's outputs
under ``<head>`` and ``<head>/<signature>``, and all predictions under ``predict``
(``<head>/<key>``). Logits are a dict by head name, or one tensor split in the heads' order; labels
are a dict by head name.
"""

from typing import Dict, Optional, Sequence

import tensorflow as tf

from trainer.estimator.head.base import PREDICT, SERVING_DEFAULT, Head, make_train_op
from trainer.contract import EstimatorSpec, ModeKeys, PredictOutput


class MultiHead:
    def __init__(self, heads: Sequence[Head], head_weights: Optional[Sequence[float]] = None):
        heads = list(heads or ())
        if not heads:
            raise ValueError("MultiHead needs at least one head")
        if head_weights and len(head_weights) != len(heads):
            raise ValueError(f"head_weights has {len(head_weights)} entries for {len(heads)} heads; give one per head")
        names = [head.name for head in heads]
        if not all(names) or len(set(names)) != len(names):
            raise ValueError(f"every head of a MultiHead needs a name of its own (got {names}); give name=... to each")
        reductions = {head.loss_reduction for head in heads}
        if len(reductions) > 1:
            raise ValueError(f"the heads' loss_reduction must be the same, got {sorted(reductions)}")
        self._heads = heads
        self._weights = list(head_weights) if head_weights else None

    @property
    def name(self) -> str:
        return "_".join(head.name for head in self._heads)

    @property
    def logits_dimension(self) -> int:
        return sum(head.logits_dimension for head in self._heads)

    @property
    def loss_reduction(self):
        return self._heads[0].loss_reduction

    def _logits(self, logits) -> Dict:
        if isinstance(logits, dict):
            missing = sorted(set(h.name for h in self._heads) - set(logits))
            if missing:
                raise ValueError(f"logits has no entry for head(s) {missing}")
            return logits
        sizes = [head.logits_dimension for head in self._heads]
        return dict(zip((h.name for h in self._heads), tf.split(logits, sizes, axis=-1)))

    def _labels(self, labels) -> Dict:
        if not isinstance(labels, dict):
            raise ValueError(f"labels must be a dict by head name for a MultiHead, got {type(labels).__name__}")
        missing = sorted(set(h.name for h in self._heads) - set(labels))
        if missing:
            raise ValueError(f"labels has no entry for head(s) {missing}")
        return labels

    def predictions(self, logits, keys=None) -> Dict:
        by_head = self._logits(logits)
        return {(head.name, key): value for head in self._heads
                for key, value in head.predictions(by_head[head.name], keys).items()}

    def _losses(self, labels, logits, features, mode):
        by_head, labels = self._logits(logits), self._labels(labels)
        return [head.loss(labels[head.name], by_head[head.name], features, mode) for head in self._heads]

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        losses = self._losses(labels, logits, features, mode)
        weighted = [loss * weight for loss, weight in zip(losses, self._weights)] if self._weights else losses
        total = tf.add_n(weighted)
        return total + tf.add_n(list(regularization_losses)) if regularization_losses else total

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        by_head = self._logits(logits)
        with tf.name_scope(self.name):
            if mode == ModeKeys.PREDICT:
                specs = [head.create_estimator_spec(features, mode, by_head[head.name]) for head in self._heads]
                return EstimatorSpec(mode, predictions=self.predictions(by_head),
                                     export_outputs=self._export_outputs(specs))
            labels = self._labels(labels)
            loss = self.loss(labels, by_head, features, mode, regularization_losses)
            if mode == ModeKeys.EVAL:
                return EstimatorSpec(mode, predictions=self.predictions(by_head), loss=loss,
                                     eval_metric_ops=self._metrics(features, by_head, labels, regularization_losses))
        train_op = make_train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
        return EstimatorSpec(mode, predictions=self.predictions(by_head), loss=loss, train_op=train_op)

    def _metrics(self, features, by_head, labels, regularization_losses) -> Dict:
        metrics = {}
        for head in self._heads:
            spec = head.create_estimator_spec(features, ModeKeys.EVAL, by_head[head.name], labels[head.name])
            metrics.update(spec.eval_metric_ops)
            metrics[f"loss/{head.name}"] = tf.compat.v1.metrics.mean(spec.loss)
        if regularization_losses:
            metrics["regularization_loss"] = tf.compat.v1.metrics.mean(tf.add_n(list(regularization_losses)))
        return metrics

    def _export_outputs(self, specs) -> Dict:
        first = specs[0].export_outputs
        outputs = {SERVING_DEFAULT: first[SERVING_DEFAULT] if SERVING_DEFAULT in first else next(iter(first.values()))}
        merged = {}
        for head, spec in zip(self._heads, specs):
            for key, output in spec.export_outputs.items():
                outputs[head.name if key == SERVING_DEFAULT else f"{head.name}/{key}"] = output
                if key == PREDICT and isinstance(output, PredictOutput):
                    merged.update({f"{head.name}/{name}": value for name, value in output.outputs().items()})
        outputs[PREDICT] = PredictOutput(merged)
        return outputs
