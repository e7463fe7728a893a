"""LoGRA on the SFT path: trajkit's OpenAI-messages export trained by TRL's ``SFTTrainer`` with
``optimizers=(LoGRA(model), None)``.

Reference: at full rank with an orthogonal projection (``AᵀA = I``) and ``update="sgd"``, LoGRA's step is
the dense SGD step for the sketched projections and for the vocabulary matrices (their exact, in-place
gradient). So the same TRL run with ``torch.optim.SGD`` must end on the same weights, through TRL's
collation, gradient accumulation (2 micro-batches per step), learning-rate schedule and loop. Only the
q/k/v/o/gate/up projections (all 32 wide at the input, so rank 32 is full), the embedding and the output
layer train; norms and ``down_proj`` are frozen in both runs.
"""
import json
import math
import re

import torch
from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

from tests.traces.export.test_trl_load import ROWS, tiny_llama, tok  # noqa: F401  (tok: the tiny tokenizer fixture)
from trajkit.optim import LoGRA

TARGETS = r"(q|k|v|o|gate|up)_proj$"
TRAINED = re.compile(r"((q|k|v|o|gate|up)_proj\.weight|embed_tokens\.weight|lm_head\.weight)$")


def _train(tok, tmp_path, name: str):  # noqa: F811
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    model = tiny_llama(tok)
    for n, p in model.named_parameters():
        p.requires_grad_(bool(TRAINED.search(n)))
    if name == "logra":
        opt = LoGRA(model, lr=0.5, rank=32, distribution="orthogonal", update="sgd", targets=TARGETS)
        assert opt.native is None and len(opt.sketches.states) == 12 and len(opt.rows) == 2
    else:
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    args = SFTConfig(output_dir=str(tmp_path / name), max_steps=3, per_device_train_batch_size=1,
                     gradient_accumulation_steps=2, assistant_only_loss=True, max_length=1024,
                     max_grad_norm=0.0, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                     bf16=False, dataloader_num_workers=0, disable_tqdm=True, seed=0)
    trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("json", data_files=str(path),
                         split="train"), processing_class=tok, optimizers=(opt, None))
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    return model, opt, losses


def test_logra_in_trl_sfttrainer_matches_dense_sgd_at_full_orthogonal_rank(tok, tmp_path):  # noqa: F811
    start = tiny_llama(tok)
    dense, _, dense_losses = _train(tok, tmp_path, "sgd")
    model, opt, losses = _train(tok, tmp_path, "logra")
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(dense_losses), rtol=1e-4, atol=1e-5)
    before, after = dict(start.named_parameters()), dict(dense.named_parameters())
    for n, p in model.named_parameters():
        torch.testing.assert_close(p, after[n], rtol=1e-4, atol=1e-5, msg=n)
        assert torch.equal(p, before[n]) != bool(TRAINED.search(n)), n  # trained weights moved, frozen did not
    assert all(s.weight.grad is None for s in opt.sketches.states) and opt.param_groups[0]["step"] == 3
