"""trajkit's GRPO-family loss and gradient equal TRL's ``GRPOTrainer`` on one fixed batch.

The reference is TRL's own code path, not a re-derivation: a real ``GRPOTrainer`` (TRL 1.16, a tiny
random ``LlamaForCausalLM``, CPU, fp32) is built once per setting; only its generation is replaced by the
fixed batch (``_generate`` returns the batch's prompt and completion ids). TRL then scores the batch with
the reward function, computes its advantages (``scale_rewards``), and ``compute_loss`` computes its loss on
the model with given old and reference log-probs; ``backward`` gives its gradient. trajkit sees the same
rewards (:func:`trajkit.rl.scoring.score`), the same old/reference log-probs in its next-token layout, and
its real update path (:func:`trajkit.rl.update.update_policy`, micro-batched) on a copy of the same
weights, with a zero learning rate so the gradient stays readable.

The old log-probs are the model's own plus fixed noise (std 0.3), so ratios spread well past the clip
range and clipping is exercised on both sides. Prompts are of one length: TRL left-pads prompts and passes
no position ids, so a shorter prompt would be scored at shifted positions there (and in TRL's own
rollouts); trajkit right-pads.

Where TRL has a setting trajkit does not (``bnpo``: a token mean per *micro-batch*), the test pins the
difference: on one micro-batch TRL's ``bnpo`` equals trajkit's ``dapo``; split over micro-batches of
unequal token counts it differs, while trajkit's ``dapo`` and TRL's ``dapo`` (normalised by the whole
batch's tokens) stay equal.
"""
from __future__ import annotations

import copy

import pytest
import torch

from tests.traces.export.test_trl_load import tiny_llama, tok  # noqa: F401  (tok: the tiny tokenizer fixture)
from trajkit.rl.batching import collate
from trajkit.rl.config import load_config
from trajkit.envs.sample import Sample
from trajkit.rl.scoring import score
from trajkit.rl.update import update_policy

trl = pytest.importorskip("trl")

G = 4
MAX_COMPLETION = 7
TEMPERATURE = 0.7
PROMPTS = [[11, 12, 13, 14], [21, 22, 23, 24]]  # one length each (see the module docstring)
# completion lengths 1..7; eos (id 2 in the tiny tokenizer, checked below) ends most of them
COMPLETIONS = [[30, 2], [31, 32, 33, 2], [34, 35, 36, 37, 38, 39, 40], [41, 2],
               [42, 43, 44, 45, 2], [46, 2], [47, 48, 49, 50, 51, 52, 53], [54, 55, 56, 2]]
# group 0 has spread, group 1 one winner; a reward per completion, keyed by its ids
REWARDS = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.0]
BY_IDS = {tuple(c): r for c, r in zip(COMPLETIONS, REWARDS)}


def fixed_reward(completions, completion_ids, **kwargs):
    return [BY_IDS[tuple(ids)] for ids in completion_ids]


# (TRL settings, trajkit overrides): every shared loss type, token vs sequence ratios, clip-high, KL, scaling
CASES = {
    "grpo": ({"loss_type": "grpo"}, ["loss.name=grpo", "loss.clip_low=0.2", "loss.clip_high=0.2"]),
    "grpo_clip_high": ({"loss_type": "grpo", "epsilon_high": 0.28},
                       ["loss.name=grpo", "loss.clip_low=0.2", "loss.clip_high=0.28"]),
    "dapo": ({"loss_type": "dapo", "epsilon_high": 0.28}, ["loss.name=dapo"]),
    "dr_grpo": ({"loss_type": "dr_grpo", "scale_rewards": "none"},
                ["loss.name=dr_grpo", "loss.scale_rewards=none"]),
    "gspo": ({"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 0.05,
              "epsilon_high": 0.08}, ["loss.name=gspo", "loss.clip_low=0.05", "loss.clip_high=0.08"]),
    "grpo_batch_scale": ({"loss_type": "grpo", "scale_rewards": "batch"},
                         ["loss.name=grpo", "loss.clip_low=0.2", "loss.clip_high=0.2", "loss.scale_rewards=batch"]),
    "dapo_none_scale": ({"loss_type": "dapo", "scale_rewards": "none", "epsilon_high": 0.28},
                        ["loss.name=dapo", "loss.scale_rewards=none"]),
    "grpo_kl": ({"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": False},
                ["loss.name=grpo", "loss.clip_low=0.2", "loss.clip_high=0.2", "loss.kl_coef=0.04"]),
    "grpo_kl_ratio": ({"loss_type": "grpo", "beta": 0.04},  # TRL's default: the KL weighted by the ratio
                      ["loss.name=grpo", "loss.clip_low=0.2", "loss.clip_high=0.2", "loss.kl_coef=0.04",
                       "loss.kl_ratio=true"]),
    "dapo_kl_ratio": ({"loss_type": "dapo", "beta": 0.04, "epsilon_high": 0.28},
                      ["loss.name=dapo", "loss.kl_coef=0.04", "loss.kl_ratio=true"]),
    "gspo_kl_ratio": ({"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 0.05,
                       "epsilon_high": 0.08, "beta": 0.04},
                      ["loss.name=gspo", "loss.clip_low=0.05", "loss.clip_high=0.08", "loss.kl_coef=0.04",
                       "loss.kl_ratio=true"]),
}


def trl_trainer(tok, model, tmp_path, **settings):  # noqa: F811
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=len(COMPLETIONS),
                      num_generations=G, max_completion_length=MAX_COMPLETION, temperature=TEMPERATURE,
                      use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], save_strategy="no",
                      disable_tqdm=True, seed=0, **settings)
    data = Dataset.from_list([{"prompt": "p0"}, {"prompt": "p1"}])
    trainer = GRPOTrainer(model=model, reward_funcs=fixed_reward, args=args, train_dataset=data,
                          processing_class=tok)
    trainer._generate = lambda prompts: ([list(PROMPTS[i // G]) for i in range(len(prompts))],
                                         [list(c) for c in COMPLETIONS], None, [str(c) for c in COMPLETIONS],
                                         None, {}, None, None)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()  # a model TRL loaded from a folder starts in eval mode
    return trainer


def fixed_logprobs(model, seed: int) -> torch.Tensor:
    """``[B, C]`` log-probs of the model at TEMPERATURE on each completion token plus N(0, 0.3^2) noise."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(COMPLETIONS), MAX_COMPLETION)
    with torch.no_grad():
        for b, c in enumerate(COMPLETIONS):
            ids = torch.tensor([PROMPTS[b // G] + c])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1] / TEMPERATURE, -1)
            p = len(PROMPTS[b // G])
            out[b, :len(c)] = logp[p - 1:, :].gather(-1, ids[0, p:, None])[:, 0]
    return out + 0.3 * torch.randn(out.shape, generator=gen)


def trl_inputs(trainer, old: torch.Tensor, ref: torch.Tensor | None) -> dict:
    """TRL's scored batch (its rewards, advantages and token counts) with the fixed old/ref log-probs."""
    inputs = trainer._generate_and_score_completions([{"prompt": f"p{i // G}"} for i in range(len(COMPLETIONS))])
    width = inputs["completion_ids"].shape[1]  # TRL pads completions to a multiple of its own choosing
    pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[1]))[:, :width]  # noqa: E731
    inputs["old_per_token_logps"] = pad(old)
    if ref is not None:
        inputs["ref_per_token_logps"] = pad(ref)
    return inputs


def trl_loss_and_grads(trainer, inputs: dict, parts: int = 1) -> tuple[float, dict]:
    """TRL's loss and gradient, its batch split into ``parts`` micro-batches as its accumulation does."""
    from trl.trainer.utils import split_tensor_dict

    model = trainer.model
    model.zero_grad(set_to_none=True)
    trainer.current_gradient_accumulation_steps = parts  # as TRL runs it: one generation batch split into
    trainer.args.steps_per_generation = parts            # `parts` accumulation steps
    total = 0.0
    for chunk in split_tensor_dict({k: v for k, v in inputs.items() if k != "num_items_in_batch"}, parts):
        chunk["num_items_in_batch"] = inputs["num_items_in_batch"]
        loss = trainer.compute_loss(model, chunk)
        loss.backward()
        total += float(loss.detach())
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}


def trajkit_loss_and_grads(model, overrides: list[str], old: torch.Tensor, ref: torch.Tensor | None,
                           micro_batch_size: int = 3) -> tuple[float, dict, torch.Tensor]:
    """trajkit's loss and gradient through score() and update_policy (lr 0, no clipping of the gradient)."""
    cfg = load_config(None, [f"rollout.group_size={G}", f"rollout.max_new_tokens={MAX_COMPLETION}",
                             f"rollout.temperature={TEMPERATURE}", f"optim.micro_batch_size={micro_batch_size}",
                             "optim.grad_clip=1e30", *overrides])
    samples = [Sample(list(PROMPTS[b // G]), list(c), [0.0] * len(c), [1] * len(c)) for b, c in enumerate(COMPLETIONS)]
    advantages, _ = score(samples, REWARDS, cfg)
    batch = collate(samples, advantages, pad_id=0)
    p = len(PROMPTS[0])

    def layout(x):  # [B, C] completion-token layout -> trajkit's next-token layout [B, L-1]
        out = torch.zeros_like(batch.mask)
        out[:, p - 1:p - 1 + MAX_COMPLETION] = x[:, :out.shape[1] - p + 1]
        return out
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    metrics = update_policy(model, optimizer, batch, layout(old), layout(ref) if ref is not None else None, cfg)
    return metrics["loss/pg"], {n: p.grad.clone() for n, p in model.named_parameters()}, advantages


def assert_grads_equal(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    moved = 0
    for name, g in theirs.items():
        torch.testing.assert_close(ours[name], g, rtol=1e-4, atol=1e-6, msg=name)
        moved += int(g.abs().sum() > 0)
    assert moved == len(theirs)  # every parameter gets a gradient: the check is not between zeros


@pytest.fixture(scope="module")
def base(tok):  # noqa: F811
    assert tok.eos_token_id == 2 and tok.pad_token_id == 0
    model = tiny_llama(tok)
    return model, fixed_logprobs(model, seed=1), fixed_logprobs(model, seed=2)


@pytest.mark.parametrize("case", list(CASES))
def test_loss_and_gradient_equal_trl(case, base, tok, tmp_path):  # noqa: F811
    model, old, ref = base
    settings, overrides = CASES[case]
    use_ref = ref if settings.get("beta", 0.0) else None
    policy = copy.deepcopy(model)
    if use_ref is not None:  # with beta > 0 TRL loads its reference model by name: give it a folder
        policy.save_pretrained(str(tmp_path / "policy"))
        policy = str(tmp_path / "policy")
    trainer = trl_trainer(tok, policy, tmp_path, **settings)
    inputs = trl_inputs(trainer, old, use_ref)
    theirs_loss, theirs = trl_loss_and_grads(trainer, inputs)
    ours_loss, ours, advantages = trajkit_loss_and_grads(copy.deepcopy(model), overrides, old, use_ref)
    torch.testing.assert_close(advantages, inputs["advantages"], rtol=1e-6, atol=1e-6)
    assert ours_loss == pytest.approx(theirs_loss, rel=1e-5, abs=2e-7)
    assert_grads_equal(ours, theirs)
    # the batch exercises clipping: some ratio is outside each clip range (TRL's own clip metric)
    clipped = trainer._metrics["train"]["clip_ratio/region_mean"]
    assert clipped and clipped[-1] > 0, case


def test_bnpo_is_trajkits_dapo_on_one_micro_batch_and_differs_when_accumulated(base, tok, tmp_path):  # noqa: F811
    model, old, _ = base
    bnpo = trl_trainer(tok, copy.deepcopy(model), tmp_path, loss_type="bnpo", epsilon_high=0.28)
    dapo = trl_trainer(tok, copy.deepcopy(model), tmp_path, loss_type="dapo", epsilon_high=0.28)
    bnpo_in, dapo_in = trl_inputs(bnpo, old, None), trl_inputs(dapo, old, None)
    one_loss, one = trl_loss_and_grads(bnpo, bnpo_in, parts=1)
    ours_loss, ours, _ = trajkit_loss_and_grads(copy.deepcopy(model), ["loss.name=dapo"], old, None)
    assert ours_loss == pytest.approx(one_loss, rel=1e-5, abs=2e-7)
    assert_grads_equal(ours, one)
    # two micro-batches of 4 rows: 17 and 16 tokens. bnpo averages per micro-batch; dapo over the batch
    split_loss, _ = trl_loss_and_grads(bnpo, bnpo_in, parts=2)
    dapo_loss, dapo_grads = trl_loss_and_grads(dapo, dapo_in, parts=2)
    ours_loss, ours, _ = trajkit_loss_and_grads(copy.deepcopy(model), ["loss.name=dapo"], old, None,
                                                micro_batch_size=4)
    assert ours_loss == pytest.approx(dapo_loss, rel=1e-5, abs=2e-7)
    assert_grads_equal(ours, dapo_grads)
    assert abs(split_loss - dapo_loss) > 1e-3 * abs(dapo_loss)
