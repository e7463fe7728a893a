"""Training through the gateway: rollouts made by an external agent harness, token-exact.

The harness the agent will really run in (its prompts, tools, retries, context handling) produces the
rollouts, instead of a re-implementation of it inside the trainer. This is the agent-loop design of
NVIDIA's Polar and of verl's and OpenRLHF's agent loops: an OpenAI-compatible server in front of the
rollout engine, one session per harness run, and the exact token ids recorded on the server
(:mod:`trajkit.gateway`).

One generation round of :class:`GatewayEnv`, for prompts ``p_0 .. p_{B-1}`` (each task repeated ``G``
times, a group, by the trainer):

1. the round's ``generate`` is a :class:`~trajkit.envs.client.GenerationClient` (the trainer's: its backend,
   the lock its ``weight_sync`` stage holds, and its ``gen/*`` counters), given as an argument; on first use
   a :class:`~trajkit.gateway.Gateway` is started on a loopback port over that backend, holding the lock for
   every engine call: a sync waits for the running call to drain, and each record carries the
   ``policy_version`` that sampled it. Any backend serves: trajkit's engine (continuous batching of the
   sessions, exact prefix reuse) or vLLM (whole generate calls, its own prefix cache; ``Gateway.degraded``
   says what is off);
2. each run's session is opened for the round (:class:`trajkit.gateway.sessions.Forced`): every request is
   sampled at the round's temperature with top-k/top-p off and ``max_new_tokens`` as the default budget (the
   loss assumes that distribution, whatever the harness asks for); every request is seeded (a seed the harness
   sends is replaced) from the round's seed, its run's row in the round and its index in the session, so
   the step's rollouts are a function of the step's seed as in the plain rollout path, and not of the rounds
   run before (an evaluation or a profile between two steps changes no seed of the next). The shared
   :class:`~trajkit.gateway.GatewayConfig` is never rewritten;
3. the harness runs once per prompt, all concurrently (the gateway batches their requests), each with its
   own API key: a random secret bound to its session (``run-ROUND-I``) when the session is opened, revoked
   when the round ends. The gateway is locked (:mod:`trajkit.gateway.access`): a request reaches only the
   session its key is bound to, and nothing that reads across sessions (``/trajkit/*``, ``/metrics``); a
   Python callable given a :class:`HarnessRun`, or a shell command (:func:`command_harness`);
4. each session is stitched (:func:`trajkit.gateway.stitch.stitch`) into a :class:`~trajkit.envs.sample.Sample`:
   the chain that holds the run's last call; ``loss_mask`` 1 exactly on the sampled ids, the engine's
   log-probs there; 0 and logprob 0.0 on everything the harness or the template put in between;
   ``policy_version`` the oldest version among its calls (all equal in a synchronous step);
5. the rewards (a verifier: TRL-style reward functions) read ``metadata["prompt"]`` (the messages up to the
   task), ``metadata["completion"]`` (every message after: assistant turns, tool results, and the final
   reply) and the row's columns, plus ``harness_output`` (what the harness returned or printed).

Nothing hangs: a run still going ``timeout_s`` after the round started is abandoned and counted failed, and a
dead gateway thread (its scheduler) fails the round with :class:`EnvironmentDied`, its traceback and the task's
name, as soon as the runs return (they get errors from the gateway at once).

A run that fails (the harness raised, exited non-zero or timed out, or made no call) becomes an empty sample
(no tokens, ``metadata["harness_error"]``); its reward is what the reward functions give an empty completion.
A round in which every run fails raises :class:`HarnessError` (the command is broken, not the policy), unless
the environment is made with ``raise_when_all_fail=False`` (Harbor trials, where a whole group can time out).

Rounds at once: an asynchronous trainer (:mod:`trajkit.rl.producer`) runs up to ``K + 1`` rounds from
different threads (``concurrent_rollouts``). They share one gateway per backend and lock (a client of
another batch over the same backend reuses it; it is never restarted while a round runs); each session is
tagged with its round, a round waits for its own sessions' requests only, and its number is the one the
trainer reserved on its client in step order (:attr:`~trajkit.envs.client.GenerationClient.round`; else
the counter's next, as in a synchronous run). Each round's ``gen/*`` counters are the engine calls that
served its sessions (:class:`~trajkit.envs.client.ServedBackend`): a call that served two rounds (a whole
generate call with rows of both, or a continuous-batching session from idle to idle) counts whole in each,
so two overlapping batches' counters can add up to more than the engine did; one round at a time counts
every call once, as before.

Deviation from a fully asynchronous agent loop (Polar): a weight push waits for the engine call in
progress, and with continuous batching the gateway's scheduler holds the lock from the moment its batch
admits rows until the batch is empty, so a push lands between batches of calls, never inside one; a
harness may see the weights change between two of its calls (each token keeps its call's version). Chains
that fork (a harness that rewrites its history) keep only the chain of the last call, and the sampled tokens
of the others are not trained (``metadata["dropped_chains"]``).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from trajkit.engine import SamplingParams
from trajkit.errors import ConfigError
from trajkit.envs.client import GenerationClient, ServedBackend, as_client
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.gateway.sessions import Forced
from trajkit.gateway.stitch import Chain, stitch
from trajkit.envs.data import DatasetTask
from trajkit.envs.rewards import RewardFunc
from trajkit.envs.sample import Sample
from trajkit.envs.base import Generate, Prompt
from trajkit.envs.single_turn import exact_match


class HarnessError(RuntimeError):
    """A harness run failed (its message names the run and holds the end of its stderr)."""


@dataclass
class HarnessRun:
    """What one harness run gets: the gateway's ``base_url`` (``http://127.0.0.1:PORT/v1``), the
    ``api_key`` bound to its session (a secret: the only key that reaches it), the served ``model`` name, the
    ``task`` text (the row's prompt; a message list is passed as JSON), the row's other ``columns`` and the
    ``session`` id (``run-ROUND-I``: what records and messages name; not a credential, and not what seeds its
    calls: the row's seed key, :meth:`GatewayEnv.rollout_part`)."""

    base_url: str
    api_key: str
    model: str
    task: str
    columns: dict = field(default_factory=dict)
    session: str = ""

    @property
    def name(self) -> str:
        """What errors call the run: its session id (never its key)."""
        return self.session or "(unnamed)"


Harness = Callable[[HarnessRun], Any]  # returns anything; str(result) becomes the row's harness_output


def command_harness(template: str, timeout_s: float = 300.0) -> Harness:
    """A harness that runs ``template`` in a shell with ``{base_url}``, ``{api_key}``, ``{model}`` and ``{task}``
    filled in (shell-quoted), and ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` set; its output is its stdout as
    written (UTF-8, invalid bytes as U+FFFD, no newline translation: a ``\\r`` stays a ``\\r``), stripped of
    surrounding whitespace.

    >>> h = command_harness("echo {task}")
    >>> h(HarnessRun("http://127.0.0.1:1/v1", "k", "policy", "it's me"))
    "it's me"
    """
    if "{task}" not in template:
        raise ConfigError(f"task.agent.command: {template!r} has no {{task}}; the harness needs the task "
                          "(placeholders: {base_url} {api_key} {model} {task})")

    def run(r: HarnessRun) -> str:
        try:
            cmd = template.format(base_url=shlex.quote(r.base_url), api_key=shlex.quote(r.api_key),
                                  model=shlex.quote(r.model), task=shlex.quote(r.task))
        except (KeyError, IndexError) as exc:
            raise ConfigError(f"task.agent.command: unknown placeholder {exc} in {template!r} (use {{base_url}} "
                              "{api_key} {model} {task}; write {{ }} for a literal brace)") from None
        env = {**os.environ, "OPENAI_BASE_URL": r.base_url, "OPENAI_API_KEY": r.api_key}
        try:
            proc = subprocess.run(cmd, shell=True, env=env, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"run {r.name}: timed out after {timeout_s:g} s") from None
        if proc.returncode != 0:
            stderr = proc.stderr.decode("utf-8", errors="replace")
            raise HarnessError(f"run {r.name}: exit code {proc.returncode}: {stderr[-1000:]}")
        return proc.stdout.decode("utf-8", errors="replace").strip()
    return run


def record_reward(completions, harness_output, **kwargs) -> list[float | None]:
    """A reward function for environments whose harness writes its episode as a JSON record with a ``reward``
    (the OpenEnv and verifiers tasks): that reward; None (unscorable: masked) when the record says so or the
    episode never ran (no output)."""
    out = []
    for text in harness_output:
        record = json.loads(text) if text else None
        out.append(None if record is None or record["reward"] is None else float(record["reward"]))
    return out


def gateway_config(options) -> GatewayConfig:
    """The gateway of a task kind's section (:class:`trajkit.envs.registry.GatewayOptions`: ``gateway_max_batch``,
    ``gateway_prefix_cache``), the rest :class:`GatewayConfig`'s defaults."""
    return GatewayConfig(model_name="policy", max_batch=options.gateway_max_batch,
                         prefix_cache=options.gateway_prefix_cache)


def episode_gateway(backend, tokenizer, config: GatewayConfig, lock=None) -> Gateway:
    """The gateway harness runs are served on: locked (:mod:`trajkit.gateway.access`), so a run reaches only
    its own session (``envs check --adversarial``'s ``other-sessions`` probe attacks this same gateway)."""
    return Gateway(backend, tokenizer, config, lock=lock, locked=True)


class EnvironmentDied(RuntimeError):
    """A thread an environment relies on (its gateway's scheduler, its server) died; the message names the
    task and holds the thread's traceback."""


class GatewayEnv:
    """Episodes made by ``harness`` runs against a gateway over the round's generation client (module
    docstring). ``name``: the task's name in errors; ``timeout_s``: the longest a round waits for its runs."""

    def __init__(self, tokenizer, harness: Harness, model_name: str = "policy", max_parallel: int = 64,
                 config: GatewayConfig | None = None, raise_when_all_fail: bool = True, name: str = "agent",
                 timeout_s: float = 3600.0):
        self.tokenizer, self.harness, self.max_parallel = tokenizer, harness, max_parallel
        self.raise_when_all_fail = raise_when_all_fail  # False: a round of failed runs is a round of empty samples
        self.config = config or GatewayConfig(model_name=model_name)
        self.model = self.config.model_name.split(",")[0].strip()
        self.name, self.timeout_s = name, timeout_s
        self.gateway: Gateway | None = None
        self.base_url = ""
        self._served: ServedBackend | None = None  # the gateway's engine: counts each call in its rounds' clients
        self._serving_key: tuple | None = None  # (backend, lock) the gateway serves
        self._rounds: set[int] = set()  # rounds running now (any thread)
        self._mutex = threading.Lock()  # guards the gateway's start and stop, the rounds and the counter
        self._stack = ExitStack()
        self._prefix = "run"  # session ids are the same on every run
        self._round = 0

    def serve(self, client: GenerationClient) -> Gateway:
        """The gateway over ``client``'s backend and lock: started on first use and shared by every client
        over the same backend and lock (each round's calls are counted in its own client: :meth:`rollout_part`);
        restarted for another backend or lock, which a running round refuses."""
        with self._mutex:
            return self._serve(client)

    def _serve(self, client: GenerationClient) -> Gateway:
        key = (client.backend, client.lock)
        if self.gateway is not None and self._serving_key is not None and \
                all(a is b for a, b in zip(key, self._serving_key)):
            return self.gateway
        if self._rounds:
            raise RuntimeError(f"task {self.name}: a round over another backend or lock started while rounds "
                               f"{sorted(self._rounds)} run on this environment's gateway; run one backend's "
                               "rounds at a time (a gateway serves one backend and its lock)")
        self._stop()
        self._served = client.served()
        self.gateway = episode_gateway(self._served, self.tokenizer, self.config, client.lock)
        self.base_url = self._stack.enter_context(running(self.gateway))
        self._serving_key = key
        return self.gateway

    @contextmanager
    def _round_of(self, client: GenerationClient, round_no: int):
        """The gateway for round ``round_no``, its calls counted in ``client`` while it runs."""
        with self._mutex:
            if round_no in self._rounds:
                raise RuntimeError(f"task {self.name}: round {round_no} is running already (a round number is "
                                   "used once: GatewayEnv.next_round)")
            gateway = self._serve(client)
            self._rounds.add(round_no)
            self._served.route(round_no, client)
        try:
            yield gateway
        finally:
            with self._mutex:
                self._served.unroute(round_no)
                self._rounds.discard(round_no)

    def __getstate__(self) -> dict:
        """Pickled (a task sent to the Ray rollout workers): the configuration, not a running server."""
        state = dict(self.__dict__)
        state.update(gateway=None, base_url="", _served=None, _serving_key=None, _rounds=set(), _mutex=None,
                     _stack=ExitStack())
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _mutex=threading.Lock())

    def close(self) -> None:
        """Stop the server (the records stay in ``self.gateway``)."""
        with self._mutex:
            self._stop()

    def _stop(self) -> None:
        self._stack.close()
        if self.gateway is not None:
            self.gateway.close()
        self._serving_key = None

    # the trainer runs this environment's episodes where its generation runs: on a Ray run, on the rollout
    # workers (:meth:`rollout_part`, trajkit.cluster.split.RayRollouts.episodes), each over its own backend
    serves_generation = True

    # two rounds may run at once, from different threads (an asynchronous trainer's overlapping batches,
    # :mod:`trajkit.rl.producer`): they share the gateway, each waits for its own sessions' requests only
    concurrent_rollouts = True

    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        samples = self.rollout_part(generate, prompts, params, self.next_round(generate), 0)
        self.check_round(samples)
        return samples

    def next_round(self, generate: Generate | None = None) -> int:
        """A new round's number (its runs' session ids ``run-ROUND-I``; not their calls' seeds, which the round's
        seed and the row give: :meth:`rollout_part`): the one the trainer reserved on ``generate``
        (:attr:`GenerationClient.round`, taken once), else the counter's next. The counter counts every number
        handed out, reserved ones included."""
        reserved = getattr(generate, "round", None)
        if reserved is not None:
            generate.round = None
            return reserved
        with self._mutex:
            self._round += 1
            return self._round

    def rollout_part(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams, round_no: int,
                     first: int) -> list[Sample]:
        """The runs of rows ``first .. first + len(prompts) - 1`` of round ``round_no`` (another process may run
        the round's other rows: a Ray rollout worker runs its slice); each run's session id and each call's
        seed are the ones they have when the whole round runs here. A call's seed comes from the round's seed
        (``params.seed``), the row (seed key ``run-row-I``) and the call's index, never from ``round_no``: the
        round numbers count every round of the environment (evaluations and profiles too), so a seed drawn
        from them would change with how often a run evaluates. Failed runs are empty samples; the round's
        verdict on them is :meth:`check_round`'s, over all its rows."""
        with self._round_of(as_client(generate), round_no) as gateway:
            forced = Forced(params.temperature, params.seed, params.max_new_tokens)
            opened = [gateway.sessions.open(f"{self._prefix}-{round_no}-{first + i}", self.model, forced, tag=round_no,
                                            seed_key=f"{self._prefix}-row-{first + i}")
                      for i in range(len(prompts))]
            runs = [HarnessRun(self.base_url, s.key, self.model, _task_text(p), dict(p.columns), session=s.id)
                    for s, p in zip(opened, prompts)]
            try:
                outcomes = self._run_all(runs)
                self._check_alive(gateway)
                gateway.scheduler.drain(self.timeout_s, tag=round_no)  # this round's requests, not another's
            finally:
                gateway.sessions.revoke(s.id for s in opened)  # an abandoned run's later calls are refused
            return [self._sample(gateway, p, r, out, err) for p, r, (out, err) in zip(prompts, runs, outcomes)]

    def check_round(self, samples: Sequence[Sample]) -> None:
        """A round whose every run failed raises :class:`HarnessError` (unless ``raise_when_all_fail`` is
        False); some failed runs: a warning naming the first. It reads only ``samples`` (its own round's),
        so rounds running at once on other threads check theirs apart."""
        errors = [s.metadata["harness_error"] for s in samples if "harness_error" in s.metadata]
        if errors and len(errors) == len(samples) and self.raise_when_all_fail:
            raise HarnessError(f"task {self.name}: every harness run of this round failed; first: {errors[0]}")
        if errors:
            warnings.warn(f"task {self.name}: {len(errors)} of {len(samples)} harness runs failed; first: "
                          f"{errors[0]}", stacklevel=3)

    def _run_all(self, runs: list[HarnessRun]) -> list[tuple[Any, str | None]]:
        """Every run, concurrently; a run still going after ``timeout_s`` is abandoned (its thread is left to
        end on its own) and reported as failed."""
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.max_parallel, len(runs))),
                                  thread_name_prefix=f"trajkit-{self.name}-run")
        futures = [pool.submit(self._run, r) for r in runs]
        done, _ = wait(futures, timeout=self.timeout_s)
        pool.shutdown(wait=False, cancel_futures=True)
        return [f.result() if f in done else (None, f"run {r.name}: still running after {self.timeout_s:g} s "
                                                     "(abandoned)") for f, r in zip(futures, runs)]

    def _check_alive(self, gateway: Gateway) -> None:
        error = gateway.scheduler.error
        if error is not None:
            raise EnvironmentDied(f"task {self.name}: the gateway's scheduler thread died during the round; its "
                                  f"traceback:\n{error}")

    def _run(self, run: HarnessRun) -> tuple[Any, str | None]:
        try:
            return self.harness(run), None
        except Exception as exc:  # noqa: BLE001 - one failed run is one empty sample, never the whole step
            return None, f"{type(exc).__name__}: {exc}"

    def _sample(self, gateway: Gateway, prompt: Prompt, run: HarnessRun, output: Any, error: str | None) -> Sample:
        session = gateway.sessions.find(run.session)
        records = session.records if session is not None else []
        columns = {**prompt.columns, "harness_output": None if output is None else str(output)}
        meta = {"session": run.session, "prompt_index": prompt.index, "calls": len(records), "columns": columns}
        if error is None and not records:
            error = "the harness made no call to the gateway"
        if error is not None:
            return Sample(list(prompt.ids), [], [], [], {**meta, "prompt": prompt.source or prompt.text,
                                                       "completion": [], "harness_error": error})
        chains = stitch(records)
        last = len(records) - 1
        chain = next(c for c in chains if c.calls[-1][0] == last)
        prompt_msgs, completion = conversation(records, chain, self.tokenizer)
        meta.update(prompt=prompt_msgs, completion=completion, dropped_chains=len(chains) - 1,
                    policy_versions=chain.policy_versions, fork_at=chain.fork_at,
                    finish_reason=records[last].choices[chain.calls[-1][1]].finish_reason)
        versions = chain.versions_of_tokens()  # each turn's tokens: the weights of its call (async: may differ)
        known = all(v >= 0 for v, m in zip(versions, chain.loss_mask) if m)
        return Sample(list(chain.prompt_ids), list(chain.completion_ids), list(chain.logprobs),
                      list(chain.loss_mask), meta, policy_version=min(chain.policy_versions),
                      token_versions=versions if known else None)


def _task_text(prompt: Prompt) -> str:
    source = prompt.source if prompt.source is not None else prompt.text
    return source if isinstance(source, str) else json.dumps(source)


def conversation(records, chain: Chain, tokenizer) -> tuple[Any, Any]:
    """(prompt, completion) of a chain as the rewards see them. Chat calls: the last call's messages up to
    and including the first user message; then every later message and the returned reply. Completion
    calls: the decoded prompt of the chain and the text of its last choice."""
    call, k = chain.calls[-1]
    rec = records[call]
    if rec.endpoint != "chat":
        return tokenizer.decode(chain.prompt_ids, skip_special_tokens=False), rec.choices[k].text
    messages = list(rec.messages or []) + [rec.choices[k].message or {"role": "assistant", "content": ""}]
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), 0)
    return messages[:first_user + 1], messages[first_user + 1:]


class AgentTask:
    """Tasks from dataset rows (a ``prompt`` column with the task text; other columns for the verifier, as in
    :class:`~trajkit.envs.data.DatasetTask`), solved by ``harness`` runs through the gateway, rewarded by
    ``reward_funcs`` (default: the final reply's content equals the ``answer`` column)."""

    name = "agent"

    def __init__(self, train, tokenizer, harness: Harness | str, eval=None, *, seed: int = 0,
                 eval_fraction: float = 0.0, reward_funcs: Sequence[RewardFunc] = (exact_match,),
                 timeout_s: float = 300.0, strict: bool = False, gateway: GatewayConfig | None = None):
        self.rows = DatasetTask(train, tokenizer, eval, seed=seed, eval_fraction=eval_fraction, strict=strict)
        if isinstance(harness, str):
            harness = command_harness(harness, timeout_s)
        # gateway: e.g. the window /v1/models reports; a round waits at most a run's timeout and a margin
        self.env = GatewayEnv(tokenizer, harness, config=gateway, name=self.name, timeout_s=timeout_s + 30.0)
        self.reward_funcs = list(reward_funcs)

    def prompt(self, index: int, split: str = "train") -> Prompt:
        return self.rows.prompt(index, split)

    def num_prompts(self, split: str) -> int:
        return self.rows.num_prompts(split)
