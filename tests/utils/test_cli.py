"""build_config's launcher handling: --local-rank as in mmseg, --launcher mpi outside mpirun."""

from __future__ import annotations

import os

import pytest

from hamseg.utils import CLIError, build_config
from tests.conftest import TINY_FCN


def test_local_rank_argument_sets_local_rank_only_when_the_launcher_did_not(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "3"  # torch.distributed.launch passes --local-rank only
    monkeypatch.setenv("LOCAL_RANK", "1")
    build_config(TINY_FCN, local_rank=3)
    assert os.environ["LOCAL_RANK"] == "1"  # torchrun's variable wins, as in mmseg


def test_mpi_launcher_outside_mpirun_says_what_to_install(monkeypatch):
    for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CLIError) as err:
        build_config(TINY_FCN, launcher="mpi")
    message = str(err.value)
    assert message.startswith("--launcher mpi: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,")
    assert "OpenMPI's mpirun" in message and "apt install openmpi-bin" in message
