"""The "done means" run by hand (not collected by pytest; heavy: run under ``flock /tmp/heavy.lock``): one GRPO step
of ``grpo_smollm2`` with ``task.name=verifiers task.env=vf-sum`` and the overrides of
``trajkit train grpo_smollm2 task.name=verifiers task.env=vf-sum steps=1 eval.every=0 rollout.prompts_per_step=2
rollout.group_size=4 rollout.max_new_tokens=32``, then per sample: the trained ids (loss_mask 1) == the ids the
gateway sampled in the episode's session, the log-probs equal, and the reward == the rubric recomputed here from
the reply and the task's numbers. Prints one JSON line per sample and the verdict.

    PYTHONPATH=. python tests/envs/verifiers/parity_smollm2.py
"""
import json
import random
import re
import time

from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer

over = ["task.name=verifiers", "task.env=vf-sum", "steps=1", "eval.every=0", "rollout.prompts_per_step=2",
        "rollout.group_size=4", "rollout.max_new_tokens=32", "log.out_dir=runs/vf_parity", "log.report_to=[]"]
t0 = time.time()
trainer = Trainer(load_config("grpo_smollm2", over))
t1 = time.time()
try:
    result = trainer.step_once()
    t2 = time.time()
    gw = trainer.state.task.env.gateway
    ok = True
    for s in result.samples:
        recs = gw.sessions.find(s.metadata["session"]).records
        ids_ok = [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == \
            [t for r in recs for t in r.choices[0].token_ids]
        lp_ok = [x for x, m in zip(s.logprobs, s.loss_mask) if m] == [x for r in recs for x in r.choices[0].logprobs]
        ep = json.loads(s.metadata["columns"]["harness_output"])
        idx = s.metadata["columns"]["vf_task"]
        rng = random.Random(idx)
        want = rng.randint(1, 9) + rng.randint(1, 9)
        found = re.findall(r"-?\d+", ep["replies"][-1] if ep["replies"] else "")
        rub = 1.0 if found and int(found[-1]) == want else 0.0
        ok &= ids_ok and lp_ok and s.raw_reward == ep["reward"] == rub
        print(json.dumps({"session": s.metadata["session"], "task": idx, "calls": len(recs),
                          "endpoint": recs[0].endpoint,
                          "ids==sampled": ids_ok, "logprobs==": lp_ok, "reward": s.raw_reward, "rubric": rub,
                          "reply": ep["replies"][-1][:80] if ep["replies"] else None, "error": ep["error"]}))
    m = result.metrics
    print(json.dumps({k: m.get(k) for k in ("reward/raw", "mismatch/max_abs", "loss/grad_norm") if k in m}))
    print("ALL trained ids == gateway sampled ids and rewards == rubric:", ok)
    print(f"setup {t1 - t0:.0f} s, step {t2 - t1:.0f} s")
finally:
    trainer.close()
print(f"wall {time.time() - t0:.0f} s")
