"""Every command's settings, built from shared sections, and the one loader they all use.

A bottom floor beside `protocol`: it imports only `calibrl.protocol` and `calibrl.errors`, so
training, evaluation, probe, the demo and the command line can all read it.

- `base`: `Section` (unknown keys refused, frozen, one-line `UserError`s), dotted-key helpers;
- `loader`: YAML file + typed options + `key=value` overrides -> settings; dump as YAML;
- `describe`: the resolved settings as YAML with every field's help (`--print-config`);
- `sections`: model, data, sampling, rollout, algorithm, optim, logging, checkpoint;
- `train`, `sft`, `eval`, `probe`, `demo`: each command's settings class.
"""

from calibrl.settings.demo import DemoSettings
from calibrl.settings.eval import EvalSection, EvalSettings
from calibrl.settings.loader import dump_settings, load_settings, parse_overrides, updated
from calibrl.settings.probe import ProbeSection, ProbeSettings
from calibrl.settings.sft import SFTMix, SFTSection, SFTSettings
from calibrl.settings.train import TrainSettings

__all__ = [
    "DemoSettings", "EvalSection", "EvalSettings", "ProbeSection", "ProbeSettings", "SFTMix",
    "SFTSection", "SFTSettings", "TrainSettings", "dump_settings", "load_settings",
    "parse_overrides", "updated",
]
