"""The loopback Tinker server the SDK tests drive: trajkit's service over a tiny random model."""
import copy
import os

import pytest
import tinker
import torch

from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.tinker.server import running
from trajkit.tinker.service import TinkerService

os.environ.setdefault("TINKER_TELEMETRY", "0")


def tiny_base():
    spec = TinySpec(vocab_size=259, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2, intermediate_size=64)
    return build_model(spec, seed=0, init_scale=5.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(service, SDK ServiceClient, the base model, URL) of a server in this module's process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    base = tiny_base()
    service = TinkerService(copy.deepcopy(base), byte_tokenizer(), "tiny", "unused", str(tmp_path_factory.mktemp("ck")))
    with running(service) as url:
        client = tinker.ServiceClient(base_url=url, api_key="tml-test")
        yield service, client, base, url
        client.holder.close()
    torch.set_num_threads(threads)
