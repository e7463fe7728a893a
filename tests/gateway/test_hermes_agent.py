"""The real Hermes Agent (PyPI ``hermes-agent==0.19.0``, in its own virtualenv: ``make hermes-venv``) against
the gateway: its calls land in the session named by its API key, its own saved trajectory agrees with the
gateway's Hermes export turn for turn, and the stitched chain's sampled tokens are the recorded ones.

Two runs: a random tiny byte model (text replies; on ``finish_reason: length`` the agent asks it to
continue: a multi-call session), and a tiny model fine-tuned on what the agent really sends
(:mod:`.hermes_support`) that makes one ``terminal`` call, which the agent executes, then answers."""
import json
import os
import re

import pytest
import torch

from trajkit.cli.main import main
from trajkit.engine import Engine
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.gateway.export import session_hermes_rows, write_hermes
from trajkit.gateway.stitch import stitch
from trajkit.models.chat import render
from trajkit.models.load import load_model, load_tokenizer
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.recipes.scripted import ScriptedRecipe, scripted_model
from trajkit.traces.blocks import parse_assistant
from trajkit.traces.tools import tools_from_system_prompt

from . import hermes_support as hs

pytestmark = pytest.mark.usefixtures("hermes_venv")  # make test builds it while the other tests run
HERMES_WINDOW = 131072  # /v1/models reports the model's window by default; the agent refuses one under 64K


def _need_agent() -> None:
    py = hs.agent_python()
    if not py.exists():
        if os.environ.get("TRAJKIT_REQUIRE_FIXTURES"):
            pytest.fail(f"{py} is missing; run `make hermes-venv`")
        pytest.skip(f"the Hermes Agent virtualenv is missing ({py}); run `make hermes-venv`")


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _as_the_agent_saves(turn: dict) -> dict:
    """A turn of trajkit's Hermes text as the agent's saver writes it: it re-serialises each call's JSON
    (``json.dumps`` of the parsed arguments), adds an empty think block to a ``gpt`` turn without reasoning,
    collapses the newlines after ``</think>`` (and before ``<think>``) to one and strips the turn (a reply that
    starts with a newline, as the greedy model's continuation does on some prompts, is saved without it).
    trajkit writes the bytes of the conversation the chain was trained on
    (:mod:`trajkit.traces.hermes_text`): the model's reply, and the history as the agent sent it back (its
    arguments compact)."""
    if turn["from"] != "gpt":
        return turn
    segments, calls = parse_assistant(turn["value"], 0, [])
    value = "".join("<tool_call>\n" + json.dumps({"name": calls[seg.ref].name, "arguments": calls[seg.ref].arguments},
                                                 ensure_ascii=False) + "\n</tool_call>"
                    if seg.kind == "tool_call" and calls[seg.ref].ok else seg.raw for seg in segments)
    value = value if "<think>" in value else "<think>\n</think>\n" + value
    value = re.sub(r"(</think>)\n+", r"\1\n", re.sub(r"\n+(<think>)", r"\n\1", value))
    return {**turn, "value": value.strip()}


def _saved_matches_export(saved_path, session) -> list[dict]:
    """The agent's last saved trajectory equals the gateway's export of the session, turn for turn (system
    turns compared by their tool lists: the agent saves its own Hermes system prompt; ``gpt`` turns up to the
    saver's empty think block, :func:`_as_the_agent_saves`); the export."""
    saved = [json.loads(line) for line in saved_path.read_text().splitlines()]
    ours = session_hermes_rows(session)
    theirs, mine = saved[-1]["conversations"], ours[-1]["conversations"]
    assert [t["from"] for t in theirs] == [t["from"] for t in mine]
    assert tools_from_system_prompt(theirs[0]["value"]) == tools_from_system_prompt(mine[0]["value"])
    assert theirs[1:] == [_as_the_agent_saves(t) for t in mine[1:]]
    return ours


class ScriptedShape:
    """Holds a random model's replies to a fixed shape, whatever it samples: ``length`` printable ASCII bytes
    other than ``<`` (no control byte, space, tag opener or special token), then its end of turn. The
    agent then stores and sends back every reply unchanged (nothing to strip, no newline translation, no
    U+FFFD, never an empty reply to retry), so the test's outcome does not depend on the sampled bytes.

    A pre-hook on the model sees each forward's input: more than one new token is a prefill, the start of
    a reply (the gateway prefills each request's prompt); the output layer's hook then masks the logits by
    the reply's position. Meant for one request at a time (the agent's calls are sequential)."""

    def __init__(self, model, length: int, vocab: int = 259, eos: int = 258):
        allowed = torch.zeros(vocab, dtype=torch.bool)
        allowed[0x21:0x7F] = True
        allowed[ord("<")] = False
        self.printable = torch.where(allowed, 0.0, float("-inf"))
        self.end = torch.full((vocab,), float("-inf"))
        self.end[eos] = 0.0
        self.length, self.position = length, 0
        model.register_forward_pre_hook(self._starts, with_kwargs=True)
        model.lm_head.register_forward_hook(self._mask)
        self.model = model

    def _starts(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.position = 0 if ids.shape[1] > 1 else self.position + 1

    def _mask(self, module, args, out):
        return out + (self.printable if self.position < self.length else self.end).to(out.dtype)


def test_the_hermes_agent_runs_against_the_gateway_and_its_trajectory_matches_the_export(tmp_path):
    _need_agent()
    model = ScriptedShape(build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=32768), seed=0,
                                      init_scale=5.0), length=16).model
    # each reply: 16 visible bytes, then its end; the first request stops at its 12-token default, so the
    # agent asks it to continue (a multi-call session), and that reply ends the run
    gw = Gateway(Engine(model), byte_tokenizer(), GatewayConfig(model_name="tiny", default_max_tokens=12,
                                                                  reported_context_length=HERMES_WINDOW))
    with running(gw) as url:
        proc = hs.run_agent(url, "agent-session", "tiny", "Run `echo hi`.", tmp_path)
    gw.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert gw.sessions.ids() == ["agent-session"]
    session = gw.sessions.find("agent-session")
    assert len(session.records) >= 1 and session.records[0].tools
    _saved_matches_export(tmp_path / "trajectory_samples.jsonl", session)
    reasons = [r.choices[0].finish_reason for r in session.records]
    assert reasons[0] == "length" and reasons[-1] == "stop" and len(reasons) >= 2  # a multi-call session
    chains = stitch(session.records)
    sampled = [t for r in session.records for t in r.choices[0].token_ids]
    assert all(32 < t < 127 and t != ord("<") for t in sampled if t != 258)
    assert len(chains) == 1  # the agent's history came back as a token prefix of every next prompt
    assert [t for t, m in zip(chains[0].completion_ids, chains[0].loss_mask) if m] == sampled


@pytest.fixture(scope="module")
def calling_model(tmp_path_factory):
    """(model, tokenizer) fine-tuned to make the agent's ``terminal`` call and answer (cached; the first
    build takes about a minute on a loaded 2-core CPU)."""
    _need_agent()
    script = hs.capture_script(byte_tokenizer(), tmp_path_factory.mktemp("capture"))
    folder = scripted_model([script], ScriptedRecipe(perturb_name=hs.PERTURB_NAME), hs.perturb)
    return load_model(folder / "model"), load_tokenizer(folder / "tokenizer")


def test_the_hermes_agent_runs_a_real_tool_call_through_the_gateway(calling_model, tmp_path, capsys):
    model, tok = calling_model
    gw = Gateway(Engine(model), tok, GatewayConfig(model_name="tiny", force_temperature=0.0,
                                                    reported_context_length=HERMES_WINDOW))
    with running(gw) as url:
        proc = hs.run_agent(url, "agent-call", "tiny", hs.TASK, tmp_path)
    gw.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["completed"] and result["final_response"] == hs.FINAL["content"]
    assert (tmp_path / "hello.txt").read_text() == "hello\n"  # the agent ran the command for real
    [tool] = [m for m in result["messages"] if m["role"] == "tool"]
    assert json.loads(tool["content"])["output"] == "hello"

    session = gw.sessions.find("agent-call")
    first, second = session.records
    assert first.choices[0].message["tool_calls"][0]["function"]["name"] == "terminal"
    assert json.loads(first.choices[0].message["tool_calls"][0]["function"]["arguments"]) == {"command": hs.COMMAND}
    assert second.messages[-1]["role"] == "tool" and json.loads(second.messages[-1]["content"])["output"] == "hello"

    ours = _saved_matches_export(tmp_path / "trajectory_samples.jsonl", session)
    assert [t["from"] for t in ours[-1]["conversations"]] == ["system", "human", "gpt", "tool", "gpt"]

    [chain] = stitch(session.records)  # the reply is what the agent sends back: one chain, no fork
    sampled = [t for r in session.records for t in r.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == sampled
    conversation = render(tok, second.messages + [second.choices[0].message], second.tools)
    assert _decode(tok, chain.ids) == conversation.removesuffix("\n")
    assert _decode(tok, second.choices[0].token_ids) == hs.FINAL_TEXT + tok.eos_token

    path = tmp_path / "session.jsonl"
    write_hermes(ours, path)
    assert main(["traces", "stats", str(path), "--json", "-q"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["traces"] == 1 and stats["tool_calls"] == 1 and stats["malformed_tool_calls"] == 0


def test_the_hermes_agent_finishes_when_its_max_tokens_exceed_the_models_window(calling_model, tmp_path):
    """Issue 18: the agent's default settings against a model whose whole window (8192) is smaller than the
    ``max_tokens`` it asks for after a reply stopped at the length limit (4096 * 2). The first reply is cut
    (``default_max_tokens=8``), the agent asks to continue with 8192, the gateway clamps it to the room left
    (it was a 400 the agent read as prompt overflow: "Cannot compress further", no trajectory), and the agent
    ends its loop and saves its trajectory, whatever the model writes after the cut."""
    model, tok = calling_model
    gw = Gateway(Engine(model), tok, GatewayConfig(model_name="tiny", force_temperature=0.0, default_max_tokens=8,
                                                    reported_context_length=HERMES_WINDOW))
    asked, chat = [], gw.chat

    async def spy(body, sid, live=None):
        asked.append(body.get("max_tokens", body.get("max_completion_tokens")))
        return await chat(body, sid, live)
    gw.chat = spy
    with running(gw) as url:
        proc = hs.run_agent(url, "agent-small", "tiny", hs.TASK, tmp_path)
    gw.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = gw.sessions.find("agent-small").records
    assert len(asked) == len(records), asked  # every request was answered (before: a 400, and the agent quit)
    over = [i for i, m in enumerate(asked) if m is not None and len(records[i].prompt_ids) + m > gw.max_context]
    assert over, (asked, [len(r.prompt_ids) for r in records])  # the agent did ask for more than the room left
    assert all(len(r.prompt_ids) + len(r.choices[0].token_ids) <= gw.max_context for r in records)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["completed"]
    _saved_matches_export(tmp_path / "trajectory_samples.jsonl", gw.sessions.find("agent-small"))


def solved(harness_output, **kwargs) -> list[float]:
    """The verifier: the agent completed and its final answer is the scripted one (the command's output)."""
    out = []
    for text in harness_output:
        result = json.loads(text.splitlines()[-1]) if text else {}
        out.append(float(bool(result.get("completed")) and result.get("final_response") == hs.FINAL["content"]))
    return out


def test_an_rl_step_with_the_hermes_agent_as_the_harness(calling_model, tmp_path):
    """The RL trainer's agent task with the real Hermes Agent as the harness command: two agent runs (one
    group) against the gateway over the trainer's own engine, each calling ``terminal`` for real; the
    samples train exactly the tokens the engine sampled in those sessions, at the policy version that
    sampled them; the step's update runs on them. (The scripted model solves the task in both runs, so the
    group's advantages are 0 and the update leaves the weights as they are: checked as such. A step with a
    spread of rewards through a scripted harness is tests/envs/test_agent.py.)"""
    import copy

    from trajkit.rl import Trainer
    from trajkit.envs.agent import AgentTask
    from trajkit.rl.config import load_config
    from trajkit.envs.sample import validate_sample

    _need_agent()
    model, tok = calling_model
    runs = tmp_path / "runs"
    runs.mkdir()
    command = (f'cd "$(mktemp -d {runs}/run-XXXX)" && HERMES_HOME="$PWD" {hs.agent_python()} {hs.DRIVER} '
               "{base_url} {api_key} {model} {task}")
    task = AgentTask([{"prompt": hs.TASK}], tok, command, reward_funcs=[solved], timeout_s=240,
                     gateway=GatewayConfig(model_name="policy", reported_context_length=HERMES_WINDOW))
    cfg = load_config(None, ["steps=1", "threads=1", "draft.kind=none", "rollout.prompts_per_step=1",
                             "rollout.group_size=2", "rollout.temperature=1.0", "rollout.max_new_tokens=200",
                             "optim.lr=1e-3", "log.report_to=[]", f"log.out_dir={tmp_path / 'log'}"])
    trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, task=task, logger=False)
    before = {k: v.clone() for k, v in trainer.state.side.policy.state_dict().items()}
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    assert len(result.samples) == 2 and len(list(runs.iterdir())) == 2
    assert (next(runs.iterdir()) / "trajectory_samples.jsonl").exists()  # the agent's own saved trajectory
    for s in result.samples:
        validate_sample(s)
        records = task.env.gateway.sessions.find(s.metadata["session"]).records
        assert len(records) >= 1 and all(r.policy_version == 1 == s.policy_version for r in records)
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == \
            [t for r in records for t in r.choices[0].token_ids]  # one chain: the agent sent its history back
    assert "reward/solved" in result.metrics and 0.0 <= result.metrics["reward/solved"] <= 1.0
    # the policy's own log-probs of the trained tokens, recomputed by the trainer, are the engine's: the
    # masks sit exactly on what was sampled, at the rollout temperature the gateway forced
    assert result.metrics["mismatch/max_abs"] < 1e-3
    changed = any(not torch.equal(before[k], v) for k, v in trainer.state.side.policy.state_dict().items())
    assert changed == any(s.advantage != 0 for s in result.samples)  # zero advantage: the step moves nothing
