"""The Hermes tool-use environment: call parsing, sandboxed execution, forced-token masks, trace export."""
import json

from trajkit.engine import Completion, SamplingParams
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.envs.rewards import RewardSet
from trajkit.envs.sample import validate_sample
from trajkit.envs.calculator import evaluate
from trajkit.envs.toolenv import CALCULATOR, CalculatorTask, run_calls, to_hermes_row
from trajkit.rl.trainer import Trainer
from trajkit.traces.hermes import parse_row

TOK = byte_tokenizer()


def score_of(task, sample):
    """The task's own reward functions on one episode."""
    return RewardSet.build(task.reward_funcs)([sample])[0]


def encode(text):
    return TOK.encode(text, add_special_tokens=False)

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*7"}}\n</tool_call>'


def scripted(turns):
    """A fake engine: returns the next scripted assistant message (sampled tokens, logprob -0.5 each)."""
    it = iter(turns)

    def generate(prompt_ids, params):
        out = []
        for _ in prompt_ids:
            text, finish = next(it)
            ids = encode(text) + ([TOK.eos_token_id] if finish == "stop" else [])
            out.append(Completion(ids, [-0.5] * len(ids), finish))
        return out
    return generate


def test_run_calls_parses_and_executes():
    assert run_calls(CALL, 0.5) == [{"name": "calculator", "content": "84"}]
    assert run_calls("84", 0.5) is None  # no call: a final answer
    bad = run_calls("<tool_call>\n{not json\n</tool_call>", 0.5)
    assert bad[0]["content"].startswith("error: not valid JSON")
    other = run_calls('<tool_call>\n{"name": "shell", "arguments": {}}\n</tool_call>', 0.5)
    assert other[0]["content"] == "error: unknown tool 'shell'"


def test_sandbox_refuses_and_limits():
    assert evaluate("2**10") == "1024"
    assert evaluate("2**100000").startswith("error: exponent")
    assert evaluate("__import__('os')") == "error: name not allowed: __import__"
    assert evaluate("__import__('os').system('true')") == "error: Call not allowed"
    assert evaluate("(lambda: 1)()").startswith("error:")
    assert evaluate("1" + "*9" * 40, timeout_s=0.0) == "error: time limit exceeded"


def test_episode_masks_forced_tokens_and_scores_the_final_answer():
    task = CalculatorTask(seed=0, tokenizer=TOK, max_turns=3)
    prompt = task.prompt(0)
    question = prompt.meta["question"]  # rendered into prompt.ids
    prompt.answer = "84"
    sample = task.env.rollout(scripted([(CALL, "stop"), ("84", "stop")]), [prompt], SamplingParams())[0]
    validate_sample(sample)
    first = len(encode(CALL)) + 1
    # written out by hand: ChatML glue, the tool result inside a user turn, the next assistant opening
    forced = encode('\n<|im_start|>user\n<tool_response>\n{"name": "calculator", "content": "84"}\n'
                    '</tool_response><|im_end|>\n<|im_start|>assistant\n')
    last = len(encode("84")) + 1
    assert sample.loss_mask == [1] * first + [0] * len(forced) + [1] * last
    assert sample.completion_ids[first:first + len(forced)] == forced
    assert sample.logprobs[first:first + len(forced)] == [0.0] * len(forced)
    assert sample.num_model_tokens == first + last
    # the whole episode is exactly the template's render of the conversation
    chat = [{"role": "system", "content": "You may call tools."}, {"role": "user", "content": question},
            {"role": "assistant", "content": CALL}, {"role": "tool", "content": '{"name": "calculator", "content": "84"}'},
            {"role": "assistant", "content": "84"}]
    assert TOK.decode(sample.prompt_ids + sample.completion_ids) == TOK.apply_chat_template(
        chat, tools=[CALCULATOR], tokenize=False).rstrip("\n")
    assert score_of(task, sample) == [1.0]
    assert sample.metadata["turns"] == 2 and sample.metadata["tool_calls"] == 1


def test_turn_limit_and_truncation_end_the_episode():
    task = CalculatorTask(seed=0, tokenizer=TOK, max_turns=2)
    looping = task.env.rollout(scripted([(CALL, "stop"), (CALL, "stop")]), [task.prompt(0)], SamplingParams())[0]
    assert looping.metadata["finish_reason"] == "max_turns" and score_of(task, looping) == [0.0]
    assert looping.loss_mask[-1] == 1  # no forced tool turn after the last allowed turn
    cut = task.env.rollout(scripted([("<tool_call>\n{", "length")]), [task.prompt(0)], SamplingParams())[0]
    assert cut.metadata["finish_reason"] == "length" and cut.metadata["turns"] == 1


def test_episode_saves_as_a_hermes_row_that_traces_reads():
    task = CalculatorTask(seed=0, tokenizer=TOK)
    prompt = task.prompt(0)
    prompt.meta["question"], prompt.answer = "What is 12*7?", "84"
    sample = task.env.rollout(scripted([(CALL, "stop"), ("84", "stop")]), [prompt], SamplingParams())[0]
    row = json.loads(json.dumps(to_hermes_row(sample, "ep-0")))
    trace = parse_row(row)
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = trace.messages[2].tool_calls[0]
    assert call.name == "calculator" and call.arguments == {"expression": "12*7"} and call.error is None
    assert "calculator" in trace.tools
    assert not [d for d in trace.diagnostics if d.severity != "info"]


def test_saved_episodes_are_read_by_traces_stats(tmp_path, capsys):
    from trajkit.cli.main import main
    from trajkit.envs.toolenv import save_episodes

    task = CalculatorTask(seed=0, tokenizer=TOK)
    episodes = [task.demonstration(task.prompt(i)) for i in range(3)]
    path = tmp_path / "episodes.jsonl"
    assert save_episodes(episodes, str(path)) == 3
    capsys.readouterr()
    assert main(["traces", "stats", str(path), "--json", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["traces"] == 3 and stats["tool_calls"] == 3


def test_demonstration_is_a_valid_masked_episode():
    task = CalculatorTask(seed=3, tokenizer=TOK)
    demo = task.demonstration(task.prompt(5))
    validate_sample(demo)
    assert 0 in demo.loss_mask and score_of(task, demo) == [1.0]


def test_calculator_task_trains_a_step_with_the_engine(tiny):
    trainer = Trainer(tiny("task.name=calculator", "rollout.max_new_tokens=4", "task.max_turns=2"), logger=False)
    result = trainer.step_once()
    assert len(result.samples) == 8 and result.metrics["gen/calls"] >= 1
    for s in result.samples:
        validate_sample(s)
