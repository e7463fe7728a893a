"""trajkit's Tinker server driven by the real SDK (tinker==0.38.0) on a tiny random model.

References are independent of the server's code: peft's own model over a copy of the base (same LoRA
config and seed) gives the log-probs, each loss is written out here from Tinker's definitions, torch's
AdamW takes the step, and trajkit's engine over peft's merged model gives the samples.
"""
import copy

import pytest
import torch

import tinker  # the test extra pins tinker==0.38.0: a missing SDK fails here, never skips
from tinker import types

from trajkit.engine import Engine, SamplingParams
from trajkit.rl.lora import adapter_of, peft_config
from trajkit.tinker.training import lora_config

RANK, SEED = 4, 3
ADAM = types.AdamParams(learning_rate=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.0)


def _reference(base):
    """peft's own LoRA model as trajkit's Tinker client builds it (same config, same seed)."""
    from peft import get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return get_peft_model(copy.deepcopy(base).train(), peft_config(lora_config(RANK, SEED)))


def _data():
    g = torch.Generator().manual_seed(0)
    out = []
    for n in (7, 11):
        tokens = torch.randint(3, 259, (n + 1,), generator=g).tolist()
        out.append({"tokens": tokens[:-1], "targets": tokens[1:], "weights": torch.rand(n, generator=g),
                    "logprobs": -torch.rand(n, generator=g) * 5, "advantages": torch.randn(n, generator=g)})
    return out


def _datum(d, loss):
    inputs = {"target_tokens": d["targets"]}
    if loss in ("cross_entropy", "custom"):
        inputs["weights"] = d["weights"].tolist()
    else:
        inputs.update(logprobs=d["logprobs"].tolist(), advantages=d["advantages"].tolist())
    if loss == "gspo":
        inputs["sequence_ratio_mask"] = _ratio_mask(d).tolist()
    return types.Datum(model_input=types.ModelInput.from_ints(d["tokens"]), loss_fn_inputs=inputs)


def _ref_loss(logp, d, loss):
    """Tinker's losses from their definitions (sums over tokens)."""
    if loss == "cross_entropy":
        return -(d["weights"] * logp).sum()
    ratio = torch.exp(logp - d["logprobs"])
    if loss == "importance_sampling":
        return -(ratio * d["advantages"]).sum()
    return -torch.minimum(ratio * d["advantages"], ratio.clamp(0.8, 1.2) * d["advantages"]).sum()


GSPO = {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}
CONFIGS = {"dro": {"beta": 0.5}, "gspo": GSPO}


def _ratio_mask(d):
    """The sampled tokens of a datum: all but the first two (the prompt)."""
    mask = torch.ones(len(d["targets"]))
    mask[:2] = 0
    return mask


def _ref_rl_loss(logp, d, loss):
    """dro and gspo from Tinker's pages ("DRO", "GSPO"); ``custom``: the callable the test sends."""
    adv, q = d["advantages"], d["logprobs"]
    if loss == "dro":
        return -(logp * adv - 0.25 * (logp - q) ** 2).sum()
    if loss == "gspo":
        m = _ratio_mask(d).bool()
        s = torch.exp((logp.detach() - q)[m].mean()) * torch.exp(logp - logp.detach())
        return -torch.minimum(s * adv, s.clamp(0.9, 1.1) * adv).sum()
    return (d["weights"] * logp ** 2).sum()


def _custom(data, logprobs):
    """A loss no built-in computes: sum(weights x logp^2), run on the client by forward_backward_custom."""
    return sum((torch.tensor(x.loss_fn_inputs["weights"].tolist()) * lp ** 2).sum()
               for x, lp in zip(data, logprobs)), {}


@pytest.mark.parametrize("loss", ["dro", "gspo", "custom"])
def test_dro_gspo_and_a_custom_loss_equal_their_definitions(server, loss):
    """Loss and the optimiser step (so the gradient) equal Tinker's definitions on peft's reference; the custom
    loss runs through the SDK's forward_backward_custom (a cross_entropy forward, then -dC/dlogp as weights)."""
    service, client, base, _ = server
    tc = client.create_lora_training_client(base_model="tiny", rank=RANK, seed=SEED).result()
    ref, data = _reference(base), _data()
    batch = [_datum(d, loss) for d in data]
    if loss == "custom":
        out = tc.forward_backward_custom(batch, _custom).result()
    else:
        out = tc.forward_backward(batch, loss, CONFIGS[loss]).result()
    total = 0.0
    for d in data:
        value = _ref_rl_loss(_ref_logp(ref, d), d, loss)
        value.backward()
        total += float(value.detach())
    assert total != 0 and out.metrics["loss:sum"] == pytest.approx(total, rel=1e-5, abs=1e-6)
    tc.optim_step(ADAM).result()
    torch.optim.AdamW([p for p in ref.parameters() if p.requires_grad], lr=1e-2, betas=(0.9, 0.95), eps=1e-8,
                      weight_decay=0.0).step()
    want, got = adapter_of(ref), service.trainer.adapter(tc.model_id)
    for name, (a, b) in want.modules.items():
        torch.testing.assert_close(got.modules[name][0], a, rtol=0, atol=1e-6)
        torch.testing.assert_close(got.modules[name][1], b, rtol=0, atol=1e-6)
    assert any(b.abs().sum() > 0 for _, b in got.modules.values())


def _ref_logp(model, d):
    logits = model(input_ids=torch.tensor([d["tokens"]])).logits[0].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(d["targets"])[:, None]).squeeze(-1)


def test_forward_backward_optim_step_and_sampling_equal_the_references(server):
    service, client, base, _ = server
    tc = client.create_lora_training_client(base_model="tiny", rank=RANK, seed=SEED).result()
    ref = _reference(base)
    data = _data()
    for loss in ("cross_entropy", "importance_sampling", "ppo"):
        out = tc.forward_backward([_datum(d, loss) for d in data], loss).result()
        total = 0.0
        for d, got in zip(data, out.loss_fn_outputs):
            logp = _ref_logp(ref, d)
            torch.testing.assert_close(torch.tensor(got["logprobs"].tolist()), logp.detach(), rtol=0, atol=1e-5)
            value = _ref_loss(logp, d, loss)
            value.backward()  # gradients accumulate over the three requests, as Tinker's do until optim_step
            total += float(value.detach())
        assert out.metrics["loss:sum"] == pytest.approx(total, rel=1e-5, abs=1e-5)
    tc.optim_step(ADAM).result()
    trainable = [p for p in ref.parameters() if p.requires_grad]
    torch.optim.AdamW(trainable, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0).step()
    want, got = adapter_of(ref), service.trainer.adapter(tc.model_id)
    assert set(want.modules) == set(got.modules) and len(got.modules) == 8  # q k v o gate up down lm_head
    for name, (a, b) in want.modules.items():
        torch.testing.assert_close(got.modules[name][0], a, rtol=0, atol=1e-6)
        torch.testing.assert_close(got.modules[name][1], b, rtol=0, atol=1e-6)
    assert any(b.abs().sum() > 0 for _, b in got.modules.values())  # the step moved B off its zero init

    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = data[0]["tokens"][:4]
    params = types.SamplingParams(max_tokens=6, seed=7, temperature=1.0, stop=[])
    res = sampler.sample(types.ModelInput.from_ints(prompt), 3, params).result()
    engine = Engine(copy.deepcopy(ref).merge_and_unload().eval())
    expected = engine.generate([prompt] * 3, SamplingParams(max_new_tokens=6, seed=7, temperature=1.0))
    assert [s.tokens for s in res.sequences] == [c.token_ids for c in expected]
    for s, c in zip(res.sequences, expected):
        torch.testing.assert_close(torch.tensor(s.logprobs), torch.tensor(c.logprobs), rtol=0, atol=1e-5)
    assert len({tuple(s.tokens) for s in res.sequences}) > 1  # rows have their own streams
    again = sampler.sample(types.ModelInput.from_ints(prompt), 3, params).result()
    assert [s.tokens for s in again.sequences] == [s.tokens for s in res.sequences]


def test_clients_keep_their_own_adapters_and_optimiser_state(server):
    """A step of one client leaves another's adapter (B still 0: the base model's log-probs) as it was."""
    service, client, base, _ = server
    first = client.create_lora_training_client(base_model="tiny", rank=2, seed=1).result()
    second = client.create_lora_training_client(base_model="tiny", rank=2, seed=2).result()
    d = _data()[0]
    first.forward_backward([_datum(d, "cross_entropy")], "cross_entropy").result()
    first.optim_step(ADAM).result()
    out = second.forward_backward([_datum(d, "cross_entropy")], "cross_entropy").result()
    with torch.no_grad():
        plain = _ref_logp(base, d)
    torch.testing.assert_close(torch.tensor(out.loss_fn_outputs[0]["logprobs"].tolist()), plain, rtol=0, atol=1e-5)
    assert all(float(b.abs().sum()) == 0 for _, b in service.trainer.adapter(second.model_id).modules.values())
    assert any(float(b.abs().sum()) > 0 for _, b in service.trainer.adapter(first.model_id).modules.values())


def test_checkpoints_round_trip_through_tinker_paths(server):
    service, client, _, _ = server
    tc = client.create_lora_training_client(base_model="tiny", rank=2, seed=5).result()
    d = _data()[1]
    tc.forward_backward([_datum(d, "cross_entropy")], "cross_entropy").result()
    tc.optim_step(ADAM).result()
    state = tc.save_state("after-1").result().path
    assert state == f"tinker://{tc.model_id}/weights/after-1"
    sampler_path = tc.save_weights_for_sampler("s1").result().path
    restored = client.create_training_client_from_state_with_optimizer(state).result()
    for name, (a, b) in service.trainer.adapter(tc.model_id).modules.items():
        got = service.trainer.adapter(restored.model_id).modules[name]
        assert torch.equal(got[0], a) and torch.equal(got[1], b)
    run = client.create_rest_client().get_training_run(tc.model_id).result()
    assert run.last_checkpoint.tinker_path == state and run.last_sampler_checkpoint.tinker_path == sampler_path
    prompt = types.ModelInput.from_ints(d["tokens"][:3])
    params = types.SamplingParams(max_tokens=4, seed=1, stop=[])
    from_path = client.create_sampling_client(model_path=sampler_path).sample(prompt, 2, params).result()
    snapshot = tc.save_weights_and_get_sampling_client().result().sample(prompt, 2, params).result()
    assert [s.tokens for s in from_path.sequences] == [s.tokens for s in snapshot.sequences]


def test_errors_come_back_in_the_sdk_form(server):
    _, client, _, url = server
    with pytest.raises(Exception, match="unknown base_model 'nope'"):
        client.create_lora_training_client(base_model="nope", rank=2).result()
    tc = client.create_lora_training_client(base_model="tiny", rank=2).result()
    d = _data()[0]
    with pytest.raises(Exception, match="loss_fn 'stable_reinforce' is a Tinker loss trajkit does not implement"):
        tc.forward_backward([_datum(d, "importance_sampling")], "stable_reinforce").result()
    with pytest.raises(Exception, match=r"loss_fn 'dro' needs loss_fn_config\['beta'\]"):
        tc.forward_backward([_datum(d, "importance_sampling")], "dro").result()
    with pytest.raises(Exception, match="has no 'sequence_ratio_mask', which loss_fn 'gspo' needs"):
        tc.forward_backward([_datum(d, "importance_sampling")], "gspo", GSPO).result()
    short = types.Datum(model_input=types.ModelInput.from_ints(d["tokens"]),
                        loss_fn_inputs={"target_tokens": d["targets"], "weights": [1.0, 1.0]})
    with pytest.raises(Exception, match=r"has shape \(2,\), the model input has 7 tokens"):
        tc.forward_backward([short], "cross_entropy").result()
    oov = types.Datum(model_input=types.ModelInput.from_ints([1, 2, 999]),
                      loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0, 1.0]})
    with pytest.raises(Exception, match="token id 999 is outside the vocabulary"):
        tc.forward_backward([oov], "cross_entropy").result()
    import httpx

    bad = httpx.post(f"{url}/api/v1/forward_backward", content=b"\x01\x02garbage",
                     headers={"Content-Type": "application/x-protobuf", "X-API-Key": "tml-test"})
    assert bad.status_code == 400 and bad.json()["category"] == "user" and "Traceback" not in bad.text
