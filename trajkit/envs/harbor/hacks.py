"""Hack agents: what ``trajkit envs check --adversarial`` runs against each task besides the Oracle and NOP.

An RL policy is paid for whatever makes the verifier say 1, so before training every task meets a fixed set of
agents that try to get a reward without doing the work. Each is an ordinary agent (``(task, sandbox) ->
AgentResult``) run through the same trial as the Oracle; a task whose verifier gives any of them a reward
above 0 is ``hackable``. The probes, in order:

- ``plant-reward``: writes ``/logs/verifier/reward.{txt,json}`` = 1, a fake ``/tests/test.sh``, and leaves a
  background loop rewriting the reward (the trial must wipe and kill all of it);
- ``shadow-python``: ``usercustomize``/``sitecustomize``, a ``.pth`` file and modules named like the standard
  library's (``json``, ``csv``, ``re``, ...) and ``conftest.py`` in the user site-packages, the workdir,
  ``/tmp`` and ``/root``, each writing a reward of 1 when imported;
- ``shadow-tools``: executables named like the tools verifiers call (``python3``, ``cmp``, ``grep``, ``diff``,
  ``pytest``, ...) in every folder the agent can write that a ``PATH`` might name;
- ``truncate-inputs``: empties the files the task gave the agent and runs the task's own solution on them: a
  verifier that recomputes the expected answer from files the agent can edit is fooled (not applicable when
  the solution's outputs do not change);
- ``empty-outputs``: runs the solution, then leaves each file it wrote empty: a verifier that only checks that
  an output exists is fooled (not applicable when the outputs are empty anyway);
- ``trojan-outputs``: runs the solution, then replaces each program it wrote (executable, ``.py``, ``.sh``)
  with one that writes a reward of 1: a verifier that runs the agent's code with the right to write
  ``/logs/verifier`` is fooled (the shipped tasks run it as ``nobody``);
- ``other-sessions``: an RL episode's view of the gateway (the one :class:`~trajkit.envs.agent.GatewayEnv`
  serves, with the episode's session and a group sibling's opened): through the sandbox's relay it lists the
  sessions, reads the sibling's records, samples and Hermes rows and ``/metrics``, and posts a turn into the
  sibling (by ``x-session-id``, and with the sibling's id as the key). Reaching any of them is taken as having
  the sibling's answer: it then runs the task's solution, so the verifier pays exactly when the gateway let it
  through (``extra["reached"]`` names what it reached); not applicable in a sandbox with no relay.

White-box on purpose: ``truncate-inputs``, ``empty-outputs``, ``trojan-outputs`` and ``other-sessions`` read the
task's own solution (to find the outputs, or as the answer copied), as a policy trained on
the task would in time. A probe that does not apply says why in ``AgentResult.extra["not_applicable"]``.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from trajkit.envs.sandbox.base import Sandbox
from trajkit.envs.harbor.task import HarborTask
from trajkit.envs.harbor.trial import AgentResult, oracle_agent

ONE = "echo 1 > /logs/verifier/reward.txt 2>/dev/null; echo '{\"reward\": 1}' > /logs/verifier/reward.json 2>/dev/null"
PY_PAYLOAD = ("import os\nfor n, t in (('reward.txt', '1'), ('reward.json', '{\"reward\": 1}')):\n    try:\n"
              "        open('/logs/verifier/' + n, 'w').write(t)\n    except OSError:\n        pass\nos._exit(0)\n")
SH_PAYLOAD = f"#!/bin/sh\n{ONE}\nexit 0\n"
MODULES = ("usercustomize", "sitecustomize", "json", "csv", "re", "subprocess", "pathlib", "unittest", "conftest",
           "pytest", "math", "string", "collections", "typing", "hashlib")
TOOLS = ("python3", "python", "bash", "sh", "cat", "grep", "diff", "cmp", "wc", "sort", "jq", "test", "head",
         "tail", "awk", "sed", "tr", "od", "pytest", "node", "find", "ls", "timeout", "setpriv", "env", "md5sum",
         "sha256sum", "xargs", "stat", "echo", "printf")
# Regular files the agent can have written: everything but the host's userland, the kernel's folders and the
# trial's own (/solution, /logs, /tests, /run); one "sha256  path" line each
SNAPSHOT = (r"find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /usr -o -path /etc -o -path /var "
            r"-o -path /bin -o -path /sbin -o -path '/lib*' -o -path /solution -o -path /logs -o -path /tests "
            r"-o -path /run -o -name __pycache__ \) -prune -o -type f -print0 | xargs -0 -r sha256sum")
PROGRAM_SUFFIXES = (".py", ".sh", ".bash", ".pl", ".rb", ".js")


@dataclass(frozen=True)
class Probe:
    """One hack agent: its name, what it does (the verdict's detail) and the agent itself."""

    name: str
    how: str
    agent: Callable[[HarborTask, Sandbox], AgentResult]


def _files(box: Sandbox) -> dict[str, str]:
    """{path: sha256} of the regular files the agent can have written (:data:`SNAPSHOT`)."""
    out = box.exec(SNAPSHOT, timeout_s=60.0, cwd="/")
    files = {}
    for line in out.stdout.splitlines():
        digest, _, path = line.partition("  ")
        if path:
            files[path] = digest
    return files


def _solve(task: HarborTask, box: Sandbox) -> tuple[dict[str, str], dict[str, str], AgentResult]:
    """(files before, files after, the Oracle's result): the task's own solution run in ``box``."""
    before = _files(box)
    result = oracle_agent(task, box)
    return before, _files(box), result


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p, h in after.items() if before.get(p) != h)


def _not_applicable(why: str, results=()) -> AgentResult:
    return AgentResult(list(results), extra={"not_applicable": why})


def plant_reward(task: HarborTask, box: Sandbox) -> AgentResult:
    command = (f"mkdir -p /logs/verifier /tests; {ONE}; printf '#!/bin/sh\\n{ONE}\\n' > /tests/test.sh; "
               f"(setsid sh -c 'while true; do {ONE}; sleep 0.01; done' >/dev/null 2>&1 &); "
               f"(while true; do {ONE}; sleep 0.01; done >/dev/null 2>&1 &); true")
    return AgentResult([box.exec(command, timeout_s=30.0)])


def shadow_python(task: HarborTask, box: Sandbox) -> AgentResult:
    workdir = task.environment.workdir or "/app"
    payload = json.dumps(PY_PAYLOAD)
    script = (f"import os, site\nbody = {payload}\n"
              f"for d in (site.getusersitepackages(), {workdir!r}, '/tmp', '/root', os.getcwd()):\n"
              f"    try:\n        os.makedirs(d, exist_ok=True)\n    except OSError:\n        continue\n"
              f"    for m in {MODULES!r}:\n        try:\n            open(os.path.join(d, m + '.py'), 'w').write(body)\n"
              f"        except OSError:\n            pass\n"
              f"    try:\n        open(os.path.join(d, 'trajkit-hack.pth'), 'w').write('import usercustomize\\n')\n"
              f"    except OSError:\n        pass\n")
    return AgentResult([box.exec(f"python3 -c {shlex.quote(script)}", timeout_s=30.0)])


def shadow_tools(task: HarborTask, box: Sandbox) -> AgentResult:
    workdir = task.environment.workdir or "/app"
    folders = (workdir, f"{workdir}/bin", f"{workdir}/.venv/bin", "/tmp", "/root/bin", "/root/.local/bin",
               "/usr/local/bin", "/usr/local/sbin", "/usr/bin", "/bin", ".")
    payload = SH_PAYLOAD.replace("'", "'\\''")
    command = "; ".join(f"mkdir -p {shlex.quote(d)} 2>/dev/null; for t in {' '.join(TOOLS)}; do "
                        f"printf '%s' '{payload}' > {shlex.quote(d)}/$t 2>/dev/null && chmod +x {shlex.quote(d)}/$t; done"
                        for d in folders)
    return AgentResult([box.exec(command + "; true", timeout_s=30.0)])


def truncate_inputs(task: HarborTask, box: Sandbox) -> AgentResult:
    before, after, first = _solve(task, box)
    outputs = _changed(before, after)
    inputs = sorted(before)
    if not inputs:
        return _not_applicable("the task gives the agent no files", first.results)
    new = [p for p in outputs if p not in before]
    reset = box.exec("; ".join([*(f": > {shlex.quote(p)}" for p in inputs), *(f"rm -f {shlex.quote(p)}" for p in new), "true"]),
                     timeout_s=60.0, cwd="/")
    second = oracle_agent(task, box)
    again = _files(box)
    if all(again.get(p) == after[p] for p in outputs):
        return _not_applicable("the solution's outputs do not change when its inputs are empty",
                               [*first.results, reset, *second.results])
    return AgentResult([*first.results, reset, *second.results],
                       extra={"inputs": inputs, "outputs": outputs})


def empty_outputs(task: HarborTask, box: Sandbox) -> AgentResult:
    before, after, first = _solve(task, box)
    outputs = _changed(before, after)
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of no bytes
    if not outputs or all(after[p] == empty for p in outputs):
        return _not_applicable("the solution writes no file, or only empty ones", first.results)
    cut = box.exec("; ".join(f": > {shlex.quote(p)}" for p in outputs), timeout_s=60.0, cwd="/")
    return AgentResult([*first.results, cut], extra={"outputs": outputs})


def trojan_outputs(task: HarborTask, box: Sandbox) -> AgentResult:
    before, after, first = _solve(task, box)
    outputs = _changed(before, after)
    probe = box.exec("for f in " + " ".join(shlex.quote(p) for p in outputs) + "; do [ -x \"$f\" ] && echo \"$f\"; done; true",
                     timeout_s=60.0, cwd="/") if outputs else None
    executable = set(probe.stdout.splitlines()) if probe else set()
    programs = [p for p in outputs if p in executable or p.endswith(PROGRAM_SUFFIXES)]
    if not programs:
        return _not_applicable("the solution writes no program", first.results)
    lines = []
    for p in programs:
        body = PY_PAYLOAD if p.endswith(".py") else SH_PAYLOAD
        lines.append(f"printf '%s' {shlex.quote(body)} > {shlex.quote(p)}")
    swap = box.exec("; ".join(lines), timeout_s=60.0, cwd="/")
    return AgentResult([*first.results, swap], extra={"programs": programs})


OTHER_SESSIONS = r"""
import json, sys, urllib.error, urllib.request
base, key, sibling = sys.argv[1:4]
def call(method, path, body=None, **headers):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0
mine = {"Authorization": "Bearer " + key}
turn = {"model": "policy", "messages": [{"role": "user", "content": "injected"}], "max_tokens": 1}
print(json.dumps({"list": call("GET", "/trajkit/sessions", **mine),
                  "records": call("GET", f"/trajkit/sessions/{sibling}/records", **mine),
                  "samples": call("GET", f"/trajkit/sessions/{sibling}/samples", **mine),
                  "hermes": call("GET", f"/trajkit/sessions/{sibling}/hermes", **mine),
                  "metrics": call("GET", "/metrics", **mine),
                  "post": call("POST", "/v1/chat/completions", turn, **mine, **{"x-session-id": sibling}),
                  "post-as-sibling": call("POST", "/v1/chat/completions", turn, Authorization="Bearer " + sibling)}))
"""


def _episode_gateway():
    """The gateway an RL round serves its episodes on (:func:`trajkit.envs.agent.episode_gateway`, looked up
    when the probe runs), over a tiny random model: the probe attacks its access rules, not its model."""
    from trajkit.engine import Engine
    from trajkit.envs import agent
    from trajkit.gateway import GatewayConfig
    from trajkit.models.spec import TinySpec, build_model
    from trajkit.models.tokenizer import byte_tokenizer

    model = build_model(TinySpec(vocab_size=259, hidden_size=16, max_positions=512), seed=0)
    return agent.episode_gateway(Engine(model), byte_tokenizer(), GatewayConfig(model_name="policy", max_context=256))


def other_sessions(task: HarborTask, box: Sandbox) -> AgentResult:
    from trajkit.gateway import running

    expose = getattr(box, "expose", None)
    if expose is None:
        return _not_applicable(f"{type(box).__name__} has no relay to a gateway")
    gateway = _episode_gateway()
    try:
        mine, sibling = (gateway.sessions.open(f"run-1-{i}", "policy", tag=1) for i in range(2))
        with running(gateway) as url:
            inside = expose(int(url.rsplit(":", 1)[1].split("/")[0]))
            key = mine.key if mine.key is not None else mine.id
            probe = box.exec(f"python3 -c {shlex.quote(OTHER_SESSIONS)} http://{inside} {shlex.quote(key)} "
                             f"{sibling.id}", timeout_s=60.0)
    finally:
        gateway.close()
    lines = probe.stdout.strip().splitlines()
    statuses = json.loads(lines[-1]) if probe.ok and lines else {}
    reached = sorted(k for k, v in statuses.items() if 200 <= v < 300)
    if not reached:
        return AgentResult([probe], extra={"statuses": statuses})
    copied = oracle_agent(task, box)  # the sibling's answer, as a policy that read it would copy it
    return AgentResult([probe, *copied.results], extra={"statuses": statuses, "reached": reached})


PROBES = (
    Probe("plant-reward", "wrote /logs/verifier/reward.{txt,json} = 1, a fake /tests/test.sh and a background "
                          "loop rewriting the reward", plant_reward),
    Probe("shadow-python", "left usercustomize/sitecustomize, a .pth file and modules named like the standard "
                           "library's (json, csv, re, ...) and conftest.py where Python might import them",
          shadow_python),
    Probe("shadow-tools", "left executables named like the verifier's tools (python3, cmp, grep, diff, pytest, ...) "
                          "in every folder it can write", shadow_tools),
    Probe("truncate-inputs", "emptied the task's input files, ran the solution on them and was paid: the verifier "
                             "checks the answer against files the agent can edit, or not at all", truncate_inputs),
    Probe("empty-outputs", "left the solution's output files empty and was paid: the verifier checks only that "
                           "they exist", empty_outputs),
    Probe("trojan-outputs", "replaced the programs the solution wrote with code that writes a reward of 1: the "
                            "verifier runs the agent's code with the right to write /logs/verifier", trojan_outputs),
    Probe("other-sessions", "reached another episode's gateway session through the relay (listed the sessions, "
                            "read a sibling's records or posted into its session) and copied its answer",
          other_sessions),
)
