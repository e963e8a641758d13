"""DeepSpeed checkpoints written in the background (hpclaunch/runtime/train/dscheckpoint.py): which configs keep
DeepSpeed's own synchronous write and say why, and the copying engine that takes DeepSpeed's files as CPU copies
that training can no longer change."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from hpclaunch.runtime.train.cpucopy import to_cpu


class LossScaler:  # what DeepSpeed's ZeRO optimizer state holds: a live object, not a tensor or a container
    def __init__(self) -> None:
        self.cur_scale = 1024.0


def test_a_plain_config_is_written_in_the_background():
    from hpclaunch.runtime.train.dscheckpoint import blocking

    config = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}
    assert blocking(config, "TorchCheckpointEngine") is None


@pytest.mark.parametrize(("config", "engine", "words"), [
    ({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}, "TorchCheckpointEngine",
     "zero_optimization.offload_optimizer is on NVMe"),
    ({"zero_optimization": {"stage": 3, "offload_param": {"device": "NVMe"}}}, "TorchCheckpointEngine",
     "zero_optimization.offload_param is on NVMe"),
    ({"checkpoint": {"writer": {"decoupled": True}}}, "DecoupledCheckpointEngine",
     "its own checkpoint engine (DecoupledCheckpointEngine"),
])
def test_a_config_that_needs_deepspeed_to_write_says_why(config, engine, words):
    from hpclaunch.runtime.train.dscheckpoint import blocking

    assert words in (blocking(config, engine) or "")


def test_the_copy_keeps_the_state_of_its_moment():
    weights, scaler = torch.arange(4.0), LossScaler()
    module = torch.nn.Linear(2, 2).state_dict()
    copied = to_cpu({"w": weights, "scaler": scaler, "module": module, "shape": torch.Size([2, 2])})
    weights += 1
    scaler.cur_scale = 512.0
    assert copied["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert copied["scaler"].cur_scale == 1024.0  # deep-copied: it is pickled only later, in the background
    assert isinstance(copied["module"], OrderedDict) and copied["module"]._metadata == module._metadata
    assert copied["shape"] == torch.Size([2, 2])


def test_the_copying_engine_keeps_each_file_by_its_path_in_the_checkpoint(tmp_path):
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

    from hpclaunch.runtime.train.dscheckpoint import CopyingEngine

    live = TorchCheckpointEngine()
    engine = CopyingEngine(live, tmp_path)
    fp32 = torch.ones(3)
    engine.makedirs(str(tmp_path / "deepspeed"), exist_ok=True)  # DeepSpeed makes its folders through the engine
    engine.save({"optimizer_state_dict": {"fp32": fp32}}, str(tmp_path / "deepspeed" / "zero_pp_rank_1.pt"))
    engine.save({"module": {"w": fp32}}, str(tmp_path / "deepspeed" / "mp_rank_00_model_states.pt"))
    fp32.zero_()
    assert sorted(engine.files) == ["deepspeed/mp_rank_00_model_states.pt", "deepspeed/zero_pp_rank_1.pt"]
    part = engine.files["deepspeed/zero_pp_rank_1.pt"]["optimizer_state_dict"]["fp32"]
    assert part.tolist() == [1.0, 1.0, 1.0]
    assert engine.files["deepspeed/mp_rank_00_model_states.pt"]["module"]["w"] is part  # one copy for both
    assert (tmp_path / "deepspeed").is_dir() and not list(Path(tmp_path, "deepspeed").iterdir())  # nothing written
    assert engine.is_data_parallel_writer(0) and not engine.is_data_parallel_writer(1)  # DeepSpeed's own rule
    assert not engine.is_decoupled() and engine.commit(None)


def test_a_file_whose_copy_would_not_fit_in_host_memory_is_written_at_once(tmp_path):
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

    from hpclaunch.runtime.train.dscheckpoint import CopyingEngine

    engine = CopyingEngine(TorchCheckpointEngine(), tmp_path, room=100)
    engine.save({"small": torch.zeros(10)}, str(tmp_path / "model.pt"))  # 40 bytes: copied
    engine.save({"big": torch.ones(100)}, str(tmp_path / "optim.pt"))  # 400 more: written now, by DeepSpeed's engine
    assert sorted(engine.files) == ["model.pt"] and not (tmp_path / "model.pt").exists()
    assert torch.load(tmp_path / "optim.pt")["big"].tolist() == [1.0] * 100
    assert engine.written == ["optim.pt (4e-07 GB, 1e-07 GB of host memory free)"]


def test_host_room_is_the_available_memory_shared_by_the_node_s_ranks(tmp_path):
    from hpclaunch.runtime.train.dscheckpoint import host_room

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   16000000 kB\n")
    assert host_room({"LOCAL_WORLD_SIZE": "8"}, meminfo) == 16000000 * 1024 // 8
    assert host_room({}, meminfo) == 16000000 * 1024
    assert host_room({}, tmp_path / "absent") is None
