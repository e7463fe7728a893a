"""verifiers (``verifiers==0.4.0``, ``verifiers.v1``) tasksets in trajkit: trained on (``task.name=verifiers``,
:mod:`.rltask`) and checked (``trajkit envs check --verifiers``, :mod:`.check`).

verifiers runs in its own venv (``make verifiers-venv``; its pins conflict with trajkit's), so nothing here
imports it: :mod:`.process` starts :mod:`.driver` there as a child process and talks JSON lines with it;
:mod:`.prewarm` (setup) makes verifiers' ``null`` harness script installable offline; :mod:`.policy_server`
serves a scripted policy as the model of ``envs check``; ``tasksets/vf_sum`` is the example taskset (run in the
verifiers venv) and :mod:`.examples` its reference policy.
"""
