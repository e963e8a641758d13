"""The memory plan: will a job fit its devices, before it is queued (docs/plan.md).

    model.py    the model's facts from its config, built on the meta device (cached); `fetch_config` brings a
                hub model's config.json alone into the store for `hpclaunch plan`
    memory.py   bytes per device: model states by ZeRO stage / offload / precision, activations, buffers
    suggest.py  the nearest settings that fit when a job does not
    job.py      a JobSpec's plan (`plan_job`) and preflight's fit check (`check_fit`)
    promise.py  the goodput a job can expect from failures against checkpoints, and the checkpoint interval that
                maximizes it (Young/Daly): what `submit` promises and `report` sets the outcome beside

Importing this package imports neither torch nor transformers: only building a model does.

May import: assets, config, core, errors."""

from hpclaunch.plan.job import Plan, check_fit, plan_job
from hpclaunch.plan.model import fetch_config

__all__ = ["Plan", "check_fit", "fetch_config", "plan_job"]
