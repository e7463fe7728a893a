"""Judgement checks over what the other packages write (files, not objects): each check has a statistic,
a threshold and a verdict (PASS / WARN / FAIL), and names the items it concerns.

- :mod:`trajkit.audit.leaks` — eval items in train data (``trajkit audit data``);
- :mod:`trajkit.audit.clean` — a run's metric without its leaked eval items (``trajkit audit data --run``);
- :mod:`trajkit.audit.seeds` — is a gain more than seed noise (``trajkit audit seeds``);
- :mod:`trajkit.audit.labels` — what a token export trains (``trajkit audit labels``);
- :mod:`trajkit.audit.tokenizers` — the same tokenizer at every stage? (``trajkit audit tokenizers``);
- :mod:`trajkit.audit.rewards` — null probes of reward functions (``trajkit audit rewards``), train reward
  vs held-out and the log-prob mismatch of runs (``trajkit audit run``);
- :mod:`trajkit.audit.loader` — the dataset rows a run drew, once per epoch (``trajkit audit run``);
- :mod:`trajkit.audit.report` — the verdicts, the table, the JSON, the exit code.

Method and sources of every check: ``docs/audit.md``.
"""
