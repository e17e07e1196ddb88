"""Estimator's exporters, which ``train_and_evaluate`` runs after each evaluation: ``LatestExporter``,
``FinalExporter`` and ``BestExporter``, each writing SavedModels under ``<model_dir>/export/<name>``."""

import os
import shutil
from typing import Callable, Dict, Optional


class Exporter:
    """Exports after an evaluation: ``export(estimator, export_path, checkpoint_path, eval_result,
    is_the_final_export)`` returns the export dir (bytes) or None."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable, exports_to_keep: Optional[int] = 5):
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be a positive number. Got %s" % exports_to_keep)
        self._name, self._serving, self._keep = name, serving_input_receiver_fn, exports_to_keep

    @property
    def name(self) -> str:
        return self._name

    def _export(self, estimator, export_path: str, checkpoint_path: str) -> bytes:
        exported = estimator.export_saved_model(export_path, self._serving, checkpoint_path=checkpoint_path)
        self._collect(export_path)
        return exported

    def _collect(self, export_path: str) -> None:
        if self._keep is None:
            return
        stamps = sorted(int(n) for n in os.listdir(export_path) if n.isdigit())
        for stamp in stamps[:-self._keep]:
            shutil.rmtree(os.path.join(export_path, str(stamp)), ignore_errors=True)


class LatestExporter(Exporter):
    """Exports after every evaluation, keeping the newest ``exports_to_keep``."""

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._export(estimator, export_path, checkpoint_path)


class FinalExporter(Exporter):
    """Exports once, after the final evaluation."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable):
        super().__init__(name, serving_input_receiver_fn, exports_to_keep=None)

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._export(estimator, export_path, checkpoint_path) if is_the_final_export else None


def _loss_smaller(best_eval_result: Dict, current_eval_result: Dict) -> bool:
    for result in (best_eval_result, current_eval_result):
        if not result or "loss" not in result:
            raise ValueError("best_eval_result and current_eval_result cannot be empty or no loss is found in it.")
    return best_eval_result["loss"] > current_eval_result["loss"]


class BestExporter(Exporter):
    """Exports when an evaluation is better than every earlier one (``compare_fn(best, current)``,
    default: a smaller loss), keeping the newest ``exports_to_keep``."""

    def __init__(self, name: str = "best_exporter", serving_input_receiver_fn: Callable = None,
                 event_file_pattern: str = "eval/*.tfevents.*", compare_fn: Callable = _loss_smaller,
                 assets_extra=None, as_text: bool = False, exports_to_keep: int = 5):
        if serving_input_receiver_fn is None:
            raise ValueError("BestExporter needs a serving_input_receiver_fn")
        if assets_extra or as_text:
            raise ValueError("BestExporter: assets_extra and as_text are not supported; leave them unset")
        super().__init__(name, serving_input_receiver_fn, exports_to_keep)
        self._compare, self._best = compare_fn, None

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if self._best is None or self._compare(best_eval_result=self._best, current_eval_result=eval_result):
            self._best = dict(eval_result)
            return self._export(estimator, export_path, checkpoint_path)
        return None


