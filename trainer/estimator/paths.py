"""The private import paths of Estimator that programs of 2018-2020 imported, resolved to the matching
parts of ``trainer.estimator``: ``tensorflow.python.estimator.<part>`` (TF <= 1.13, and TensorFlow's
forwarding modules after) and ``tensorflow_estimator.python.estimator.<part>`` (the package since 1.14),
e.g. ``from tensorflow.python.estimator.model_fn import ModeKeys`` or ``from
tensorflow_estimator.python.estimator.canned import metric_keys``. A part the runner does not provide
is one line naming it (``trainer.errors.TrainerError``'s style, raised as ``SystemExit``).

Each part is a module made on first import from :data:`PARTS`: the module's names, taken from the
runner's modules by attribute.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

ROOTS = ("tensorflow.python.estimator", "tensorflow_estimator.python.estimator")

_SPEC = "trainer.contract"
_SERVING = "trainer.estimator.serving"
_INPUTS = "trainer.estimator.input_fns"
_HEAD = "trainer.estimator.head"
_EST = "trainer.estimator"
_V1 = "trainer.estimator.v1"

# part -> {name in the part: (module, attribute)}; None as the attribute: the module itself.
PARTS = {
    "": {},
    "model_fn": {n: (_SPEC, n) for n in ("ModeKeys", "EstimatorSpec")},
    "mode_keys": {"ModeKeys": (_SPEC, "ModeKeys")},
    "run_config": {"RunConfig": (_EST, "RunConfig")},
    "estimator": {"Estimator": (_EST, "Estimator"), "EstimatorV2": (_EST, "Estimator")},
    "training": {n: (_EST, n) for n in ("TrainSpec", "EvalSpec", "train_and_evaluate")},
    "exporter": {n: (_EST, n) for n in ("Exporter", "LatestExporter", "BestExporter", "FinalExporter")},
    "export": {"export": (_SERVING, "export"), "export_output": ("trainer.estimator.paths", "_export_output"),
               **{n: (_SERVING, n) for n in ("ServingInputReceiver", "build_raw_serving_input_receiver_fn",
                                             "build_parsing_serving_input_receiver_fn")}},
    "export.export": {n: (_SERVING, n) for n in ("ServingInputReceiver", "build_raw_serving_input_receiver_fn",
                                                 "build_parsing_serving_input_receiver_fn")},
    "export.export_output": {n: (_SPEC, n) for n in ("PredictOutput", "ClassificationOutput", "RegressionOutput")},
    "export.export_lib": {n: (_SERVING, n) for n in ("ServingInputReceiver", "build_raw_serving_input_receiver_fn",
                                                     "build_parsing_serving_input_receiver_fn")},
    "inputs": {"numpy_io": ("trainer.estimator.paths", "_numpy_io"), "pandas_io": ("trainer.estimator.paths", "_pandas_io"),
               "numpy_input_fn": (_INPUTS, "numpy_input_fn"), "pandas_input_fn": (_INPUTS, "pandas_input_fn")},
    "inputs.numpy_io": {"numpy_input_fn": (_INPUTS, "numpy_input_fn")},
    "inputs.pandas_io": {"pandas_input_fn": (_INPUTS, "pandas_input_fn")},
    "early_stopping": {n: (_EST, n) for n in ("stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
                                              "stop_if_no_increase_hook")},
    "hooks": {"InMemoryEvaluatorHook": (_EST, "InMemoryEvaluatorHook")},
    "canned": {n: ("trainer.estimator.paths", "_" + n) for n in ("head", "metric_keys", "prediction_keys",
                                                                 "optimizers")},
    "canned.metric_keys": {"MetricKeys": ("trainer.estimator.head.base", "MetricKeys")},
    "canned.prediction_keys": {"PredictionKeys": ("trainer.estimator.head.base", "PredictionKeys")},
    "canned.optimizers": {"get_optimizer_instance": ("trainer.estimator.optimizers", "get_optimizer_v1")},
    "canned.head": {"_Head": (_HEAD, "Head"), "_binary_logistic_or_multi_class_head":
                    ("trainer.estimator.head.v1", "classifier_head_v1"),
                    "_binary_logistic_head_with_sigmoid_cross_entropy_loss": ("trainer.estimator.head.v1",
                                                                              "BinaryClassHeadV1"),
                    "_regression_head": ("trainer.estimator.head.v1", "RegressionHeadV1")},
    "head.base_head": {"Head": (_HEAD, "Head")},
    "head.binary_class_head": {"BinaryClassHead": (_HEAD, "BinaryClassHead")},
    "head.multi_class_head": {"MultiClassHead": (_HEAD, "MultiClassHead")},
    "head.multi_label_head": {"MultiLabelHead": (_HEAD, "MultiLabelHead")},
    "head.multi_head": {"MultiHead": (_HEAD, "MultiHead")},
    "head.regression_head": {n: (_HEAD, n) for n in ("RegressionHead", "PoissonRegressionHead",
                                                     "LogisticRegressionHead")},
    "canned.dnn": {"DNNClassifier": (_V1, "DNNClassifier"), "DNNRegressor": (_V1, "DNNRegressor"),
                   "DNNEstimator": (_V1, "DNNEstimator"), "DNNClassifierV2": (_EST, "DNNClassifier"),
                   "DNNRegressorV2": (_EST, "DNNRegressor"), "DNNEstimatorV2": (_EST, "DNNEstimator")},
    "canned.linear": {"LinearClassifier": (_V1, "LinearClassifier"), "LinearRegressor": (_V1, "LinearRegressor"),
                      "LinearEstimator": (_V1, "LinearEstimator"), "LinearClassifierV2": (_EST, "LinearClassifier"),
                      "LinearRegressorV2": (_EST, "LinearRegressor"), "LinearEstimatorV2": (_EST, "LinearEstimator")},
    "canned.dnn_linear_combined": {
        "DNNLinearCombinedClassifier": (_V1, "DNNLinearCombinedClassifier"),
        "DNNLinearCombinedRegressor": (_V1, "DNNLinearCombinedRegressor"),
        "DNNLinearCombinedEstimator": (_V1, "DNNLinearCombinedEstimator"),
        "DNNLinearCombinedClassifierV2": (_EST, "DNNLinearCombinedClassifier"),
        "DNNLinearCombinedRegressorV2": (_EST, "DNNLinearCombinedRegressor"),
        "DNNLinearCombinedEstimatorV2": (_EST, "DNNLinearCombinedEstimator")},
    "canned.baseline": {"BaselineClassifier": (_V1, "BaselineClassifier"), "BaselineRegressor": (_V1, "BaselineRegressor"),
                        "BaselineClassifierV2": (_EST, "BaselineClassifier"),
                        "BaselineRegressorV2": (_EST, "BaselineRegressor")},
    "tpu": {n: ("trainer.estimator.tpu", n) for n in ("TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig",
                                                      "InputPipelineConfig")},
    "tpu.tpu_estimator": {n: ("trainer.estimator.tpu", n) for n in ("TPUEstimator", "TPUEstimatorSpec")},
    "tpu.tpu_config": {n: ("trainer.estimator.tpu", n) for n in ("RunConfig", "TPUConfig", "InputPipelineConfig")},
}

# The parts that are namespaces of other parts (``canned.head`` is also ``canned``'s attribute ``head``).
_export_output = "export.export_output"
_numpy_io = "inputs.numpy_io"
_pandas_io = "inputs.pandas_io"
_head = "canned.head"
_metric_keys = "canned.metric_keys"
_prediction_keys = "canned.prediction_keys"
_optimizers = "canned.optimizers"


def _missing(fullname: str) -> SystemExit:
    return SystemExit(f"error: {fullname} is not provided by trainer.estimator (an Estimator module; the parts "
                      f"provided are {', '.join(sorted(p for p in PARTS if p))}); port that import to "
                      f"trainer.estimator's public names")


class _PartModule(types.ModuleType):
    """A part: its names resolved on first read; a name it lacks fails in one line."""

    def __init__(self, name: str, part: str):
        super().__init__(name)
        self.__path__ = []  # a package, so that its parts import beneath it
        self._part = part

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        where = PARTS[self._part].get(attr)
        if where is None:
            child = f"{self._part}.{attr}" if self._part else attr
            if child in PARTS:
                return importlib.import_module(f"{self.__name__}.{attr}")
            raise SystemExit(f"error: {self.__name__}.{attr} is not provided by trainer.estimator; use "
                             f"trainer.estimator's public names instead")
        module, name = where
        value = getattr(importlib.import_module(module), name)
        if module == __name__:  # a part named by another part
            value = importlib.import_module(f"{_root_of(self.__name__)}.{value}")
        setattr(self, attr, value)
        return value


def _root_of(name: str) -> str:
    for root in ROOTS:
        if name == root or name.startswith(root + "."):
            return root
    raise ValueError(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "tensorflow.contrib" or fullname.startswith("tensorflow.contrib."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if fullname == "tensorflow_estimator.python":
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        for root in ROOTS:
            if fullname == root or fullname.startswith(root + "."):
                part = fullname[len(root) + 1:]
                if part not in PARTS:
                    raise _missing(fullname)
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        if spec.name == "tensorflow.contrib" or spec.name.startswith("tensorflow.contrib."):
            module = sys.modules["tensorflow"].compat.v1.contrib  # put there by alias.alias_estimator
            for part in spec.name.split(".")[2:]:
                module = getattr(module, part)
            return module
        if spec.name == "tensorflow_estimator.python":
            module = types.ModuleType(spec.name)
            module.__path__ = []
            return module
        return _PartModule(spec.name, spec.name[len(_root_of(spec.name)) + 1:])

    def exec_module(self, module):
        pass


_finder = _Finder()


def install_private_paths() -> None:
    """Put the finder of the private paths before Python's own (an installed ``tensorflow_estimator``,
    on TensorFlow <= 2.15, is left to answer for itself)."""
    if _finder in sys.meta_path:
        return
    if "tensorflow_estimator" not in sys.modules and importlib.util.find_spec("tensorflow_estimator") is not None:
        return
    for name in [n for n in sys.modules if any(n == r or n.startswith(r + ".") for r in ROOTS)]:
        del sys.modules[name]  # TensorFlow's own forwarding modules of tensorflow.python.estimator
    sys.meta_path.insert(0, _finder)
