"""The runner's config for one call of the Estimator API, built from the schema's dataclasses with the
program's own objects in it: no Hydra composition, no names made up for the program's functions.

A call is the config groups it chooses (``model=model_fn``, ``data=input_fn``, the session backend,
``distributed``) and the keys it sets. The groups the API never changes keep their defaults
(``conf/config.yaml``); the Estimator's runs have no progress hook (``log.progress=off``).
"""

from dataclasses import dataclass, field
from typing import Any, Dict

from omegaconf import DictConfig, OmegaConf

from trainer.config.schema import AdamConfig, Config, DataConfig, DeviceConfig, DistributedConfig, ModelConfig, \
    SessionConfig

_ADAM_RATE = 0.001  # conf/optimizer/adam.yaml: unused by a model_fn, recorded in the manifest as before


@dataclass(frozen=True)
class Call:
    """One call's config: the options it chooses for ``session`` and ``distributed`` and each key it sets
    (dotted key -> value; a program's function is the object itself)."""

    session: str = "monitored"
    distributed: str = "none"
    settings: Dict[str, Any] = field(default_factory=dict)

    def choices(self) -> Dict[str, str]:
        """The config groups as the ``train`` command would be given them (the model_dir's record)."""
        return {"model": "model_fn", "data": "input_fn", "session": self.session, "distributed": self.distributed}

    def config(self) -> DictConfig:
        """The runner's whole config for this call, as ``trainer.run`` takes it."""
        cfg = OmegaConf.structured(
            Config(model=ModelConfig(name="model_fn"), data=DataConfig(name="input_fn"),
                   optimizer=AdamConfig(learning_rate=_ADAM_RATE), session=SessionConfig(kind=self.session),
                   device=DeviceConfig(kind="auto"), distributed=DistributedConfig(kind=self.distributed)),
            flags={"allow_objects": True})
        for key, value in self.settings.items():
            OmegaConf.update(cfg, key, value, merge=False)  # a key the schema lacks fails
        return cfg
