"""A Harbor RL round in the namespace sandbox where episode ``run-1-0``, before its shell agent starts, runs a
script through the sandbox's relay that tries to reach its group sibling ``run-1-1``: list the sessions, read the
sibling's records, samples and Hermes rows, read ``/metrics``, and post a turn into the sibling (by
``x-session-id``, and with the sibling's id as the key). Every attempt is refused, and both episodes' samples are
those of the same round without the attack: token ids, masks and record counts exactly (each call's seed is its
session's and index's), log-probs to 1e-5 (the attack delays the attacker's first call, so the rows that share an
engine batch differ, and with them the float reduction order: ~5e-7 measured; two clean rounds are bitwise equal)."""
import json
import shlex

from tests.envs.harbor.conftest import SHIPPED
from tests.envs.harbor.test_rl import harbor
from tests.rl.conftest import one_thread  # noqa: F401 (autouse)
from trajkit.envs.harbor import rltask
from trajkit.rl.trainer import Trainer

ATTACK = r"""
import json, sys, urllib.error, urllib.request
base, key, me, sibling = sys.argv[1:5]
def call(method, path, body=None, **headers):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
mine = {"Authorization": "Bearer " + key}
turn = {"model": "policy", "messages": [{"role": "user", "content": "injected"}], "max_tokens": 3}
out = {"list": call("GET", "/trajkit/sessions", **mine),
       "records": call("GET", f"/trajkit/sessions/{sibling}/records", **mine),
       "samples": call("GET", f"/trajkit/sessions/{sibling}/samples", **mine),
       "hermes": call("GET", f"/trajkit/sessions/{sibling}/hermes", **mine),
       "metrics": call("GET", "/metrics", **mine),
       "post_header": call("POST", "/v1/chat/completions", turn, **mine, **{"x-session-id": sibling}),
       "post_as_sibling": call("POST", "/v1/chat/completions", turn, Authorization="Bearer " + sibling),
       "post_no_key": call("POST", "/v1/chat/completions", turn, **{"x-session-id": sibling})}
print(json.dumps(out))
"""


def _round(tmp_path, monkeypatch, attack: bool):
    """One GRPO step on hello-file (2 episodes) -> ({session: (sample fields, record count)}, attack reports,
    the gateway's sessions, {session: (harness error, trial record)}: what to show when an episode failed)."""
    reports, attackers = [], {}
    real_agent, real_episode = rltask.shell_agent, rltask.HarborRLTask.episode

    def episode(self, run):
        me = getattr(run, "session", "") or run.api_key
        if attack and me.endswith("-0"):
            attackers[run.api_key] = (me, me[:-1] + "1")
        return real_episode(self, run)

    def agent(base_url, api_key, model, max_turns):
        inner = real_agent(base_url, api_key, model, max_turns)
        if api_key not in attackers:
            return inner

        def run(task, box):
            inside = box.expose(int(base_url.rsplit(":", 1)[1].split("/")[0]))
            me, sibling = attackers[api_key]
            res = box.exec(f"python3 -c {shlex.quote(ATTACK)} http://{inside} {shlex.quote(api_key)} {me} {sibling}",
                           timeout_s=60)
            reports.append(json.loads(res.stdout.strip().splitlines()[-1]) if res.ok else res.stderr)
            return inner(task, box)
        run.__name__ = "shell"
        return run

    monkeypatch.setattr(rltask, "shell_agent", agent)
    monkeypatch.setattr(rltask.HarborRLTask, "episode", episode)
    trainer = Trainer(harbor(tmp_path / ("attack" if attack else "clean"), SHIPPED / "hello-file"), logger=False)
    try:
        result = trainer.step_once()
        gateway = trainer.state.task.env.gateway
        out = {s.metadata["session"]: ((s.prompt_ids, s.completion_ids, s.logprobs, s.loss_mask),
                                       len(gateway.sessions.find(s.metadata["session"]).records))
               for s in result.samples}
        sessions = sorted(gateway.sessions.ids())
        why = {s.metadata["session"]: (s.metadata.get("harness_error"), s.metadata["columns"]["harness_output"])
               for s in result.samples}
    finally:
        trainer.close()
    return out, reports, sessions, why


def test_an_episode_cannot_reach_its_siblings_session_through_the_relay(needs_sandbox, tmp_path, monkeypatch):
    clean, none, _, why = _round(tmp_path, monkeypatch, attack=False)
    assert all(n >= 1 for _, n in clean.values()), why  # each clean episode called the gateway
    attacked, [report], sessions, why = _round(tmp_path, monkeypatch, attack=True)
    assert none == [] and sorted(clean) == ["run-1-0", "run-1-1"] == sessions  # no session made by the attack
    assert isinstance(report, dict), report  # the script ran in the sandbox and reached the gateway
    assert {k: report[k] for k in ("list", "records", "samples", "hermes", "metrics", "post_header")} == \
        {k: 403 for k in ("list", "records", "samples", "hermes", "metrics", "post_header")}, report
    assert report["post_as_sibling"] == 401 and report["post_no_key"] == 401, report
    assert sorted(attacked) == sorted(clean)
    for sid, ((prompt, completion, logprobs, mask), calls) in clean.items():  # as if nothing had been tried
        (prompt2, completion2, logprobs2, mask2), calls2 = attacked[sid]
        assert (prompt2, completion2, mask2, calls2) == (prompt, completion, mask, calls), (sid, why[sid])
        assert len(logprobs2) == len(logprobs) and max(abs(a - b) for a, b in zip(logprobs, logprobs2)) < 1e-5, sid
