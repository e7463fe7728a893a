"""``draft.kind=eagle`` with ``draft.distill=true``: the head learns online from the hidden states of the
policy forward the ``logprob`` stage already runs (no extra policy forward), its loss is the soft
cross-entropy against the detached policy distribution shifted by one, and ``weight_sync`` refits it into
the engine, whose copy of the head drafts from the engine's own copy of the policy."""
import pytest
import torch

from trajkit.engine.drafters.eagle import EagleDrafter
from trajkit.rl.trainer import Trainer

SPEC = ("draft.kind=eagle", "draft.distill=true", "draft.distill_lr=3e-3")


def _forwards(model) -> list[int]:
    """Counts the policy's forwards over the batch's rows; a shared prefix's one-row forward
    (:mod:`trajkit.rl.shared_prefix`) belongs to the forward after it and is not counted; the rows packed into
    one sequence (:mod:`trajkit.rl.packed`, a 4D mask) are one forward over the rows."""
    calls = [0]

    def hook(_module, _args, kwargs):
        mask = kwargs.get("attention_mask")
        if kwargs["input_ids"].shape[0] > 1 or (mask is not None and mask.dim() == 4):
            calls[0] += 1
    model.register_forward_pre_hook(hook, with_kwargs=True)
    return calls


def test_online_head_learns_from_the_policy_forward_and_is_refit_at_weight_sync(tiny):
    trainer = Trainer(tiny(*SPEC), logger=False)
    state = trainer.state
    drafter = state.rollout.engine.drafter
    assert isinstance(drafter, EagleDrafter)
    engine_model = state.rollout.engine.model
    # the engine's head reads the engine's copy of the policy (embedding, norm, output layer), not the trainer's
    assert drafter.head.shared.out is engine_model.get_output_embeddings()
    assert state.side.draft.shared.out is state.side.policy.get_output_embeddings()
    calls = _forwards(state.side.policy)
    before = {k: v.clone() for k, v in state.side.draft.state_dict().items()}
    first = trainer.step_once()
    batches = -(-len(first.samples) // state.cfg.optim.micro_batch_size)
    assert calls[0] == 2 * batches  # logprob (one per micro-batch) + policy_update: nothing extra for the head
    assert "draft/distill_ce" in first.metrics and first.metrics["draft/distill_ce"] > 0
    assert any(not torch.equal(before[k], v) for k, v in state.side.draft.state_dict().items())
    after_one = {k: v.clone() for k, v in state.side.draft.state_dict().items()}
    trainer.step_once()  # its weight_sync pushes the step-1 head into the engine, then the head trains on
    served = drafter.head.state_dict()
    assert served.keys() == after_one.keys() and all(torch.equal(served[k], after_one[k]) for k in served)
    assert not torch.equal(served["fuse.weight"], before["fuse.weight"])
    assert not torch.equal(state.side.draft.state_dict()["fuse.weight"], after_one["fuse.weight"])


def test_the_distillation_loss_falls_over_steps(tiny):
    trainer = Trainer(tiny(*SPEC, "draft.distill_steps=4", "rollout.max_new_tokens=8"), logger=False)
    losses = [trainer.step_once().metrics["draft/distill_ce"] for _ in range(3)]
    assert losses[-1] < losses[0], losses


def test_eagle_distillation_is_off_without_distill(tiny):
    trainer = Trainer(tiny("draft.kind=eagle"), logger=False)
    before = {k: v.clone() for k, v in trainer.state.side.draft.state_dict().items()}
    result = trainer.step_once()
    assert "draft/distill_ce" not in result.metrics
    assert all(torch.equal(before[k], v) for k, v in trainer.state.side.draft.state_dict().items())
