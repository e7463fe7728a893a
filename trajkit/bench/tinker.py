"""Benchmark: the Tinker path's overhead, one ``forward_backward`` + ``optim_step`` through the real SDK vs
the same step called in process.

One server (:mod:`trajkit.tinker`) over SmolLM2-135M-Instruct (prepared offline) or the tiny random model
(``--model tiny``), on a loopback port in this process. Two LoRA clients of the same rank: one driven by
``tinker.ServiceClient`` (protobuf request, future, ``retrieve_future`` poll, protobuf result, then
``optim_step``'s JSON round trip), one by calling :class:`trajkit.tinker.training.TrainingClients` directly with
the same data (what the server's worker runs). Both start from the same seed and take the same steps, so
they must end with the same adapter: ``adapter_max_abs_diff`` says they did. ``--rows`` data of ``--length`` random token ids, the
``cross_entropy`` loss; ``--repeat`` steps of each, interleaved, after one warm-up step each; the table gives
the medians and the ratio SDK / in process (the goal: within 1.3x).
"""
from __future__ import annotations

import os
import statistics
import time

from trajkit.bench.output import emit

DESCRIPTION = "Tinker path overhead: forward_backward + optim_step through the tinker SDK vs in process"
EXAMPLE = "trajkit bench tinker --rows 4 --length 128 --repeat 5 --out bench-out/tinker.json"
GOAL = 1.3


def add_arguments(p) -> None:
    p.add_argument("--model", default="smollm2-135m", choices=("smollm2-135m", "tiny"),
                   help="SmolLM2-135M-Instruct (prepared offline) or a tiny random model")
    p.add_argument("--rows", type=int, default=4, help="data per forward_backward")
    p.add_argument("--length", type=int, default=128, help="tokens per datum")
    p.add_argument("--rank", type=int, default=32, help="LoRA rank of both clients")
    p.add_argument("--repeat", type=int, default=5, help="timed steps of each path (medians kept)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--out", default="bench-out/tinker.json", help="where to write the results (JSON)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _service(model: str, folder: str):
    from trajkit.tinker.service import TinkerService

    if model == "tiny":
        from trajkit.models.spec import TinySpec, build_model
        from trajkit.models.tokenizer import byte_tokenizer

        net = build_model(TinySpec(vocab_size=259, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                                   intermediate_size=128), seed=0)
        return TinkerService(net, byte_tokenizer(), "tiny", "unused", folder)
    from trajkit.recipes.smollm2 import prepare_model
    from trajkit.tinker.server import load_service

    path = str(prepare_model())
    return load_service(path, path, folder)


def _data(vocab: int, rows: int, length: int):
    import torch

    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, vocab, (length + 1,), generator=g).tolist() for _ in range(rows)]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(args, folder: str) -> dict:
    import tinker
    import torch
    from tinker import types

    from trajkit.tinker.server import running
    from trajkit.tinker.training import Datum, lora_config

    os.environ.setdefault("TINKER_TELEMETRY", "0")
    service = _service(args.model, folder)
    seqs = _data(service.trainer.base.config.vocab_size, args.rows, args.length)
    sdk_data = [types.Datum(model_input=types.ModelInput.from_ints(s[:-1]),
                            loss_fn_inputs={"target_tokens": s[1:], "weights": [1.0] * args.length}) for s in seqs]
    local_data = [Datum(s[:-1], {"target_tokens": torch.tensor(s[1:]), "weights": torch.ones(args.length)})
                  for s in seqs]
    adam = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}
    service.trainer.create("local", lora_config(args.rank, 0))
    with running(service) as url:
        client = tinker.ServiceClient(base_url=url, api_key="tml-bench")
        tc = client.create_lora_training_client(base_model=service.model_name, rank=args.rank, seed=0).result()

        def through_sdk():
            tc.forward_backward(sdk_data, "cross_entropy").result()
            tc.optim_step(types.AdamParams(**adam)).result()

        def in_process():
            service.trainer.forward_backward("local", local_data, "cross_entropy", {})
            service.trainer.optim_step("local", adam)
        sdk, local = [], []
        for i in range(args.repeat + 1):  # the first of each is a warm-up
            s, l_ = _timed(through_sdk), _timed(in_process)
            if i:
                sdk.append(s)
                local.append(l_)
        client.holder.close()
        gap = _adapter_gap(service.trainer.adapter("local"), service.trainer.adapter(tc.model_id))
    return {"sdk_s": statistics.median(sdk), "in_process_s": statistics.median(local), "sdk_all_s": sdk,
            "in_process_all_s": local, "steps_each": args.repeat + 1, "adapter_max_abs_diff": gap}


def _adapter_gap(a, b) -> float:
    """Largest |difference| between two adapters' tensors: the two paths ran the same steps on the same data
    from the same seed, so they should have trained the same adapter (the check that both really trained)."""
    return max(float((x - y).abs().max()) for name in a.modules
               for x, y in zip(a.modules[name], b.modules[name]))


def run(args) -> int:
    import tempfile

    import torch

    from trajkit.errors import ConfigError

    if args.repeat < 1 or args.rows < 1 or args.length < 1:
        raise ConfigError("--repeat, --rows and --length must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="tinker-bench-") as folder:
        m = measure(args, folder)
    ratio = m["sdk_s"] / m["in_process_s"]
    results = {"model": args.model, "machine": f"{os.cpu_count()} CPU cores", "threads": torch.get_num_threads(),
               "rows": args.rows, "length": args.length, "rank": args.rank, "repeat": args.repeat, **m,
               "ratio": ratio, "goal": {"what": f"SDK step within {GOAL:g}x the in-process step", "met": ratio <= GOAL}}
    emit(args, results, _print_table)
    return 0


def _print_table(r: dict) -> None:
    print(f"{r['model']}: forward_backward ({r['rows']} x {r['length']} tokens, cross_entropy) + optim_step, "
          f"LoRA rank {r['rank']}, {r['threads']} torch thread(s), medians of {r['repeat']}")
    print(f"{'path':<28} {'step s':>8}")
    print(f"{'tinker SDK over HTTP':<28} {r['sdk_s']:>8.3f}")
    print(f"{'in process (TrainingClients)':<28} {r['in_process_s']:>8.3f}")
    print(f"ratio SDK / in process: {r['ratio']:.3f} (goal <= {GOAL:g}: {'met' if r['goal']['met'] else 'not met'})")
    print(f"after {r['steps_each']} steps each, the two adapters differ by at most {r['adapter_max_abs_diff']:.2e}")
