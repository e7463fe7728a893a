"""``policy.lora`` in the RL trainer: a LoRA update equals peft's own forward/backward + AdamW by hand; the
adapter-only sync makes trajkit's engine reproduce the merged (or peft's unmerged) model; resuming from an
adapter checkpoint is bitwise; combinations not implemented are refused naming the key."""
import copy

import pytest
import torch

from trajkit.engine import Engine
from trajkit.errors import ConfigError
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.learner import build_policy_side
from trajkit.rl.lora import adapter_of, peft_config, wrap
from trajkit.rl.rollout import Rollout
from trajkit.envs.sample import Sample
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import make_optimizer, update_policy

LORA = ("policy.lora.rank=4", "policy.lora.alpha=8", "optim.lr=1e-2", "shaping.overlong_buffer=3")
VOCAB = 259


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    samples = [Sample([1, 2, 3], torch.randint(3, VOCAB, (n,), generator=g).tolist(), [-1.0] * n, [1] * n)
               for n in (5, 6, 4, 6)]
    return collate(samples, torch.tensor([1.0, -1.0, 0.5, -0.5]), pad_id=0)


def _randomise_b(model, seed=1):
    """Non-zero B matrices (peft initialises B = 0, which would make every merge a no-op)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def _peft_logp(model, batch):
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention).logits[:, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)


def test_a_lora_update_equals_peft_forward_backward_and_adamw(tiny):
    """GRPO at ratio 1: loss = -sum_b mean_t(A_b * ratio) / B; its gradient through peft's own model,
    clipped at 1, then torch's AdamW over the adapters alone, gives the trainer's adapters exactly."""
    cfg = tiny(*LORA, "optim.micro_batch_size=2")
    base = random_model(cfg.policy, VOCAB)
    policy = wrap(copy.deepcopy(base), cfg.policy.lora)
    _randomise_b(policy)
    from peft import get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.policy.lora.seed)
        ref = get_peft_model(copy.deepcopy(base), peft_config(cfg.policy.lora))
    _randomise_b(ref)
    assert all(torch.equal(a, b) for a, b in zip(policy.state_dict().values(), ref.state_dict().values()))
    batch = _batch()
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    update_policy(policy, make_optimizer(policy, cfg), batch, old, None, cfg)

    trainable = [p for p in ref.parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n, p in ref.named_parameters() if p.requires_grad)
    logp = _peft_logp(ref, batch)
    ratio = torch.exp(logp - logp.detach())
    per_seq = (batch.advantages[:, None] * ratio * batch.mask).sum(1) / batch.mask.sum(1)
    (-per_seq.mean()).backward()
    torch.nn.utils.clip_grad_norm_(trainable, cfg.optim.grad_clip)
    torch.optim.AdamW(trainable, lr=cfg.optim.lr, betas=(0.9, 0.99), weight_decay=0.0).step()

    got, want = dict(policy.named_parameters()), dict(ref.named_parameters())
    moved = 0
    for name, p in want.items():
        if "lora_" in name:
            torch.testing.assert_close(got[name], p, rtol=0, atol=2e-6)
            moved += 1
        else:
            assert torch.equal(got[name], base.state_dict()[name.removeprefix("base_model.model.")
                                                             .replace(".base_layer", "")])
    assert moved == 2 * 7  # A and B of q, k, v, o, gate, up, down in the one layer


def test_adapter_sync_reproduces_the_merged_model(tiny):
    """After a weight sync of the adapters alone, the engine's log-probs equal the merged model's."""
    cfg = tiny(*LORA)
    side = build_policy_side(cfg, tokenizer=_Vocab())
    rollout = Rollout(cfg, side.policy)
    _randomise_b(side.policy)
    batch = _batch(seed=3)
    payload = adapter_of(side.policy)
    assert payload.numel() == sum(p.numel() for n, p in side.policy.named_parameters() if "lora_" in n)
    assert payload.numel() < sum(p.numel() for p in side.policy.parameters()) / 5
    rollout.sync(side.policy)
    merged = copy.deepcopy(side.policy).merge_and_unload()
    with torch.no_grad():
        want = _peft_logp(merged, batch)
        unmerged = _peft_logp(side.policy, batch)
    torch.testing.assert_close(unmerged, want, rtol=0, atol=1e-5)  # peft's merge is the same model
    prompts = [[1, 2, 3]] * 4
    completions = [batch.input_ids[i, 3:3 + int(batch.mask[i].sum())].tolist() for i in range(4)]
    got = rollout.engine.token_logprobs(prompts, completions)
    for i, row in enumerate(got):
        torch.testing.assert_close(torch.tensor(row), want[i, 2:2 + len(row)], rtol=0, atol=1e-5)
    assert rollout.backend.policy_version == 1


def test_an_adapter_on_a_tied_output_layer_leaves_the_embedding_alone():
    """SmolLM2 ties lm_head to the embedding: the engine unties it before merging an ``unembed`` adapter, so
    it samples from peft's (unmerged) model, whose embedding is unchanged."""
    from trajkit.rl.config import LoRAConfig, ModelConfig

    base = random_model(ModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), VOCAB)
    base.lm_head.weight = base.model.embed_tokens.weight
    engine = Engine(copy.deepcopy(base).eval())
    policy = wrap(base, LoRAConfig(rank=2, targets=["unembed", "attention"]))
    _randomise_b(policy)
    engine.update_adapter(adapter_of(policy))
    batch = _batch(seed=5)
    with torch.no_grad():
        want = _peft_logp(policy, batch)
    got = engine.token_logprobs([[1, 2, 3]], [batch.input_ids[0, 3:8].tolist()])[0]
    torch.testing.assert_close(torch.tensor(got), want[0, 2:7], rtol=0, atol=1e-5)
    assert torch.equal(engine.model.model.embed_tokens.weight, base.model.embed_tokens.weight)


def test_lora_resume_reproduces_the_next_step_and_saves_a_peft_adapter(tiny, tmp_path):
    straight = Trainer(tiny(*LORA), logger=False)
    for _ in range(3):
        straight.step_once()
    first = Trainer(tiny(*LORA), logger=False)
    for _ in range(2):
        first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    from peft import PeftModel

    loaded = PeftModel.from_pretrained(random_model(first.state.cfg.policy, VOCAB), f"{path}/policy")
    for name, p in first.state.side.policy.named_parameters():
        if "lora_" in name:
            assert torch.equal(loaded.get_parameter(name), p)
    resumed = Trainer(tiny(*LORA, f"checkpoint.resume_from={path}"), logger=False)
    resumed.step_once()
    moved = False
    for (name, a), b in zip(straight.state.side.policy.named_parameters(), resumed.state.side.policy.parameters()):
        assert torch.equal(a, b), name
        moved |= "lora_B" in name and bool(a.abs().sum() > 0)
    assert moved  # the adapters did train (B left zero)


@pytest.mark.parametrize("override, key", [("optim.name=logra", "optim.name=adamw"),
                                           ("rollout.backend=vllm;policy.lora.targets=[attention,unembed]",
                                            "policy.lora.targets with unembed"),
                                           ("rollout.backend=vllm;draft.kind=ngram", "draft.kind=none"),
                                           ("policy.lora.targets=[attention,embed]", "policy.lora.targets"),
                                           ("draft.model.lora.rank=2", "draft.model.lora")])
def test_what_lora_does_not_combine_with_is_refused_naming_the_key(tiny, override, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[")):
        tiny(*LORA, *override.split(";"))


def test_lora_on_the_vllm_backend_is_accepted(tiny):
    """Adapter-only sync to vLLM (tests/backends/test_vllm_lora.py runs it)."""
    assert tiny(*LORA, "rollout.backend=vllm").policy.lora.rank > 0


class _Vocab:
    """The byte vocabulary's size, all :func:`build_policy_side` reads of a tokenizer for a random policy."""

    def __len__(self):
        return VOCAB
