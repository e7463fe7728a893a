"""ECHO's auxiliary loss: which tokens count (from the samples' own loss masks), its value and gradient by
hand, and through ``update_policy`` against the cross-entropy written per sequence from the source samples."""
import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl.echo import echo_loss, observation_mask
from trajkit.rl.update import update_policy

from .conftest import TINY

# A: two sampled turns with a tool result (20, 21) between them and a trailing forced token (22);
# B: a completion that starts with forced glue (30, before any sampled token: not counted) and ends forced (31);
# C: single-turn, all sampled.
SAMPLES = [Sample([1, 2, 3], [10, 11, 20, 21, 12, 22], [-0.5] * 6, [1, 1, 0, 0, 1, 0]),
           Sample([1, 2], [30, 13, 14, 31], [-0.5] * 4, [0, 1, 1, 0]),
           Sample([1], [15, 16], [-0.5] * 2, [1, 1])]
# completion token i of a row sits at P - 1 + i in next-token space: A's 20, 21, 22 at 4, 5, 7; B's 31 at 4
OBS = [[0, 0, 0, 0, 1, 1, 0, 1], [0, 0, 0, 0, 1, 0, 0, 0], [0] * 8]


def test_observation_tokens_are_the_forced_ones_after_the_first_sampled():
    batch = collate(SAMPLES, torch.zeros(3), pad_id=0)
    assert observation_mask(batch.mask, batch.lengths).tolist() == OBS
    # the counted positions predict exactly the samples' forced tokens after their first sampled one
    targets = batch.input_ids[:, 1:][observation_mask(batch.mask, batch.lengths).bool()].tolist()
    assert targets == [20, 21, 22, 31]


def test_echo_loss_and_gradient_by_hand():
    logp = torch.tensor([[-9.0, -9.0, -9.0, -9.0, -1.0, -2.0, -9.0, -3.0],
                         [-9.0, -9.0, -9.0, -9.0, -4.0, -9.0, -9.0, -9.0],
                         [-9.0] * 8], dtype=torch.float64, requires_grad=True)
    obs = torch.tensor(OBS, dtype=torch.float64)
    loss = echo_loss(logp, obs, num_obs=4)
    assert float(loss.detach()) == pytest.approx((1.0 + 2.0 + 3.0 + 4.0) / 4)
    loss.backward()
    assert torch.equal(logp.grad, -obs / 4)
    # micro-batches normalised by the slice's count sum to the slice's value
    parts = echo_loss(logp[:1], obs[:1], num_obs=4) + echo_loss(logp[1:], obs[1:], num_obs=4)
    assert float(parts.detach()) == pytest.approx(float(loss.detach()), abs=1e-15)


def _agent_samples(gen):
    """Five stitched-like samples: sampled spans with forced spans between and after them."""
    samples = []
    for n, prompt in ((5, [1, 2]), (3, [1, 2, 7]), (6, [1]), (4, [1, 2]), (5, [1, 2, 7])):
        ids = torch.randint(3, 250, (n,), generator=gen).tolist()
        mask = [1 if (i % 3) != 2 else 0 for i in range(n)]  # every third token forced
        samples.append(Sample(prompt, ids, [0.0] * n, mask))
    return samples


def _reference(policy, samples, adv, coef):
    """GRPO at ratio 1 plus ``coef`` x the mean NLL over every sample's forced tokens after its first sampled
    one, each sequence forwarded on its own from its ids and loss mask."""
    policy.zero_grad(set_to_none=True)
    pg, nll, count = 0.0, 0.0, 0
    for s, a in zip(samples, adv.tolist()):
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        logits = policy(input_ids=ids).logits[0, len(s.prompt_ids) - 1:-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.completion_ids).unsqueeze(-1)).squeeze(-1)
        sampled = [i for i, m in enumerate(s.loss_mask) if m]
        forced = [i for i, m in enumerate(s.loss_mask) if not m and i > sampled[0]]
        pg = pg + (-(a * torch.exp(logp[sampled] - logp[sampled].detach()))).mean()
        nll = nll - logp[forced].sum()
        count += len(forced)
    echo = nll / count
    (pg / len(samples) + coef * echo).backward()
    return [p.grad.clone() for p in policy.parameters()], float(echo.detach())


@pytest.mark.parametrize("advantages", ["zero", "mixed"])
def test_update_policy_gradient_equals_the_formula(advantages):
    """Zero advantages (a group whose rewards agree): the gradient is ECHO's alone, and not zero."""
    cfg = load_config(None, TINY + ["optim.micro_batch_size=2", "optim.grad_clip=1e9", "loss.echo_coef=0.3"])
    policy = random_model(cfg.policy, vocab_size=259)
    gen = torch.Generator().manual_seed(0)
    samples = _agent_samples(gen)
    adv = torch.zeros(5) if advantages == "zero" else torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75])
    batch = collate(samples, adv, pad_id=0)
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    batch.engine_logp = old * batch.mask
    metrics = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    got = [p.grad.clone() for p in policy.parameters()]
    want, echo = _reference(policy, samples, adv, coef=0.3)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert metrics["loss/echo"] == pytest.approx(echo, rel=1e-5)
    assert sum(float(g.norm()) for g in got) > 0.0


def test_echo_off_leaves_no_metric_and_no_gradient_from_forced_tokens(tiny):
    from trajkit.rl.trainer import Trainer

    result = Trainer(tiny(), logger=False).step_once()
    assert "loss/echo" not in result.metrics
    on = Trainer(tiny("loss.echo_coef=0.1"), logger=False).step_once()
    assert on.metrics["loss/echo"] == 0.0  # the copy task is single-turn: no forced completion token


def test_an_agent_step_logs_the_nll_of_its_stitched_forced_tokens(tiny):
    """Through the gateway: two chat turns per episode, so each stitched sample has the second turn's user
    message and template glue as forced tokens. ``loss/echo`` equals the mean NLL of those tokens under the
    policy before the step, recomputed per sample from the samples' ids and loss masks."""
    import copy

    from tests.envs.test_agent import ROWS, odd_length, two_turns
    from trajkit.envs.agent import AgentTask
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.rl.trainer import Trainer

    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = Trainer(tiny("loss.echo_coef=0.1", "rollout.group_size=2", "optim.micro_batch_size=8"), task=task,
                      logger=False)
    before = copy.deepcopy(trainer.state.side.policy)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    nll, count = 0.0, 0
    with torch.no_grad():
        for s in result.samples:
            sampled = [i for i, m in enumerate(s.loss_mask) if m]
            forced = [i for i, m in enumerate(s.loss_mask) if not m and sampled and i > sampled[0]]
            if not forced:
                continue
            logits = before(input_ids=torch.tensor([s.ids])).logits[0, len(s.prompt_ids) - 1:-1].float()
            logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.completion_ids).unsqueeze(-1)).squeeze(-1)
            nll -= float(logp[forced].sum())
            count += len(forced)
    assert count > 0  # the second turn's forced tokens are there
    assert result.metrics["loss/echo"] == pytest.approx(nll / count, rel=1e-4)
