"""The pieces of ``tf.contrib`` that Estimator programs used most and that TensorFlow's upgrader cannot
convert, as ``tf.contrib`` (and ``tensorflow.contrib``) of a program run by ``train-estimator``:

- ``layers.layer_norm``: TF 1.x's layer normalisation, with its variables ``<scope>/LayerNorm/beta`` and
  ``.../gamma`` and its epsilon (1e-12), so BERT's published checkpoints load by name;
- ``training.HParams``: the hyperparameter container (attributes, ``values()``, ``parse``, ``to_json``);
- ``tpu`` (``TPUEstimator``, ``TPUEstimatorSpec``, ``RunConfig``, ``TPUConfig``, ``InputPipelineConfig``,
  ``CrossShardOptimizer``) and ``cluster_resolver.TPUClusterResolver``, as used with ``use_tpu=False``;
- ``estimator``: the heads' factories, ``add_metrics`` and the early-stopping hooks;
- ``lookup``: the vocabulary tables (``index_table_from_tensor`` and ``_from_file``, their inverses,
  ``HashTable``, ``KeyValueTensorInitializer``, ``TextFileInitializer``, ``MutableHashTable``...), which
  TensorFlow still ships in ``tensorflow.python.ops.lookup_ops``, where TF 1.x's contrib took them from;
- ``framework``: the names it re-exported from ``tf.train`` and ``tf.compat.v1`` (the global step,
  ``list_variables``, ``load_variable``, ``get_variables``...).

Any other name of ``tf.contrib`` fails in one line naming it.
"""

import json
import types

import tensorflow as tf

from trainer.estimator.resolver import TPUClusterResolver

tf1 = tf.compat.v1


class _Namespace(types.ModuleType):
    """A part of ``tf.contrib``: the names given; any other fails in one line."""

    def __init__(self, name: str, **names):
        super().__init__(name)
        self.__path__ = []
        self.__dict__.update(names)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise SystemExit(f"error: {self.__name__}.{attr} is not provided (tf.contrib was removed in TensorFlow 2.0 "
                         f"and the runner provides only its most used pieces); port that part of the program")


def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None, variables_collections=None,
               outputs_collections=None, trainable=True, begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """TF 1.x's ``tf.contrib.layers.layer_norm``: normalise over the axes from ``begin_norm_axis`` on, then
    scale by ``gamma`` and shift by ``beta`` (shaped like the axes from ``begin_params_axis`` on)."""
    with tf1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        rank = inputs.shape.rank
        if rank is None:
            raise ValueError(f"layer_norm: inputs {inputs.name} must have a known rank")
        norm_axis = begin_norm_axis % rank
        params_axis = begin_params_axis % rank
        params_shape = inputs.shape[params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(f"layer_norm: inputs {inputs.name} has undefined dimensions {params_shape} to scale")
        dtype = inputs.dtype.base_dtype
        beta = gamma = None
        if center:
            beta = tf1.get_variable("beta", shape=params_shape, dtype=dtype, initializer=tf1.zeros_initializer(),
                                    collections=_collections(variables_collections, "beta"), trainable=trainable)
        if scale:
            gamma = tf1.get_variable("gamma", shape=params_shape, dtype=dtype, initializer=tf1.ones_initializer(),
                                     collections=_collections(variables_collections, "gamma"), trainable=trainable)
        mean, variance = tf.nn.moments(inputs, list(range(norm_axis, rank)), keepdims=True)
        variance_epsilon = 1e-12 if dtype != tf.float16 else 1e-3
        outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                            variance_epsilon=variance_epsilon)
        outputs.set_shape(inputs.shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        for collection in outputs_collections or ():
            tf1.add_to_collection(collection, outputs)
        return outputs


def _collections(collections, name):
    if collections is None:
        return None
    if isinstance(collections, dict):
        collections = collections.get(name, ())
    return [tf1.GraphKeys.GLOBAL_VARIABLES, tf1.GraphKeys.MODEL_VARIABLES, *collections]


class HParams:
    """TF 1.x's ``tf.contrib.training.HParams``: hyperparameters as attributes."""

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        self._names = []
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        if getattr(self, name, None) is not None and name in self._names:
            raise ValueError(f"Hyperparameter name is reserved or already taken: {name}")
        self._names.append(name)
        setattr(self, name, value)

    def set_hparam(self, name, value):
        if name not in self._names:
            raise ValueError(f"Unknown hyperparameter {name}")
        setattr(self, name, value)

    def del_hparam(self, name):
        if name in self._names:
            self._names.remove(name)
            delattr(self, name)

    def values(self):
        return {name: getattr(self, name) for name in self._names}

    def override_from_dict(self, values_dict):
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def parse(self, values: str):
        """``"a=1,b=x"``: each value cast to the type of the value it replaces."""
        for item in filter(None, (part.strip() for part in (values or "").split(","))):
            name, _, text = item.partition("=")
            if name not in self._names:
                raise ValueError(f"Unknown hyperparameter {name!r} in {values!r}")
            current = getattr(self, name)
            kind = type(current) if current is not None else str
            value = (text.lower() in ("true", "1")) if kind is bool else kind(text)
            setattr(self, name, value)
        return self

    def to_json(self, indent=None, separators=None, sort_keys=False):
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json):
        return self.override_from_dict(json.loads(values_json))

    def get(self, key, default=None):
        return getattr(self, key, default) if key in self._names else default

    def __contains__(self, key):
        return key in self._names

    def __repr__(self):
        return f"HParams({self.values()!r})"


def cross_shard_optimizer(opt, reduction=None, group_assignment=None):
    """``CrossShardOptimizer`` off a TPU: the optimizer itself (one shard)."""
    return opt


def _lookup() -> _Namespace:
    from tensorflow.python.ops import lookup_ops

    names = ("index_table_from_tensor", "index_table_from_file", "index_to_string_table_from_tensor",
             "index_to_string_table_from_file", "HashTable", "KeyValueTensorInitializer", "TextFileInitializer",
             "TextFileIndex", "IdTableWithHashBuckets", "MutableHashTable", "MutableDenseHashTable")
    return _Namespace("tf.contrib.lookup", **{n: getattr(lookup_ops, n) for n in names if hasattr(lookup_ops, n)})


def get_variables(scope=None, suffix=None, collection=None):
    """``tf.contrib.framework.get_variables``: the variables of ``collection`` (all global variables by
    default) under ``scope``, whose names end in ``suffix``."""
    scope = scope.name if isinstance(scope, tf1.VariableScope) else scope
    found = tf1.get_collection(collection or tf1.GraphKeys.GLOBAL_VARIABLES, scope)
    return [v for v in found if suffix is None or v.op.name.endswith(suffix)]


def _framework() -> _Namespace:
    return _Namespace(
        "tf.contrib.framework", get_or_create_global_step=tf1.train.get_or_create_global_step,
        get_global_step=tf1.train.get_global_step, assert_global_step=tf1.train.assert_global_step,
        list_variables=tf.train.list_variables, load_variable=tf.train.load_variable,
        load_checkpoint=tf.train.load_checkpoint, init_from_checkpoint=tf1.train.init_from_checkpoint,
        get_variables=get_variables, get_model_variables=tf1.model_variables,
        get_trainable_variables=lambda scope=None, suffix=None: get_variables(
            scope, suffix, tf1.GraphKeys.TRAINABLE_VARIABLES),
        get_local_variables=lambda scope=None, suffix=None: get_variables(scope, suffix, tf1.GraphKeys.LOCAL_VARIABLES),
        get_name_scope=lambda: tf1.get_default_graph().get_name_scope(),
        nest=tf.nest)


def build() -> _Namespace:
    """The ``tf.contrib`` namespace."""
    from trainer.estimator import (add_metrics, binary_classification_head, multi_class_head, multi_head,
                                   multi_label_head, poisson_regression_head, regression_head, stop_if_higher_hook,
                                   stop_if_lower_hook, stop_if_no_decrease_hook, stop_if_no_increase_hook, tpu)

    tpu_names = {n: getattr(tpu, n) for n in ("TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig",
                                               "InputPipelineConfig")}
    resolver = _Namespace("tf.contrib.cluster_resolver", TPUClusterResolver=TPUClusterResolver)
    return _Namespace(
        "tf.contrib",
        layers=_Namespace("tf.contrib.layers", layer_norm=layer_norm),
        training=_Namespace("tf.contrib.training", HParams=HParams),
        tpu=_Namespace("tf.contrib.tpu", CrossShardOptimizer=cross_shard_optimizer, **tpu_names),
        cluster_resolver=resolver,
        lookup=_lookup(),
        framework=_framework(),
        estimator=_Namespace("tf.contrib.estimator", add_metrics=add_metrics,
                             binary_classification_head=binary_classification_head, multi_class_head=multi_class_head,
                             multi_label_head=multi_label_head, multi_head=multi_head, regression_head=regression_head,
                             poisson_regression_head=poisson_regression_head,
                             stop_if_higher_hook=stop_if_higher_hook, stop_if_lower_hook=stop_if_lower_hook,
                             stop_if_no_decrease_hook=stop_if_no_decrease_hook,
                             stop_if_no_increase_hook=stop_if_no_increase_hook),
    )


_built = []


def namespace() -> _Namespace:
    """The ``tf.contrib`` namespace, built once."""
    if not _built:
        _built.append(build())
    return _built[0]


def __getattr__(name):  # tf.contrib.<name>, through the module that alias.alias_estimator puts there
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(namespace(), name)
