"""``trajkit serve --api tinker`` as a real process on a loopback port, driven by the tinker SDK: the served
base model is listed under the name ``create_lora_training_client`` accepts, the tokenizer the SDK loads
from ``get_info``'s ``tokenizer_id`` is the folder's, a step runs and its checkpoint lands under
``--checkpoint-dir``."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tinker  # the test extra pins tinker==0.38.0: a missing SDK fails here, never skips
from tinker import types

from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-tinker")
    build_model(TinySpec(vocab_size=259, hidden_size=32, num_layers=1, max_positions=512), seed=0).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return str(folder)


def _start(argv: list[str]) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TINKER_TELEMETRY": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "trajkit.cli.main", *argv], stderr=subprocess.PIPE, text=True,
                            env=env, cwd=str(ROOT))
    deadline, seen = time.time() + 180, []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(r"Tinker API on (http://127\.0\.0\.1:\d+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("trajkit serve --api tinker did not start:\n" + "".join(seen))


def test_serve_api_tinker_trains_and_checkpoints(model_dir, tmp_path):
    proc, url = _start(["serve", "--api", "tinker", "--model", model_dir, "--model-name", "tiny", "--port", "0",
                        "--checkpoint-dir", str(tmp_path / "ck")])
    try:
        client = tinker.ServiceClient(base_url=url, api_key="tml-test")
        names = [m.model_name for m in client.get_server_capabilities().supported_models]
        assert names == ["tiny"]
        tc = client.create_lora_training_client(base_model="tiny", rank=2, seed=0).result()
        tokenizer = tc.get_tokenizer()
        assert tokenizer.encode("ab", add_special_tokens=False) == byte_tokenizer().encode("ab", add_special_tokens=False)
        ids = tokenizer.encode("hello tinker", add_special_tokens=False)
        datum = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                            loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)})
        first = tc.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
        tc.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        second = tc.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
        assert second < first
        path = tc.save_state("one").result().path
        assert (tmp_path / "ck" / tc.model_id / "weights" / "one" / "state.pt").is_file()
        assert path == f"tinker://{tc.model_id}/weights/one"
        client.holder.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
