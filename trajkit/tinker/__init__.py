"""A Tinker-compatible training API over trajkit: LoRA training clients, futures, sampling, checkpoints.

The real ``tinker`` SDK (0.38.0) and tinker-cookbook drive it unchanged: ``ServiceClient(base_url=URL,
api_key="tml-...")`` against ``trajkit serve --api tinker --model DIR``. Modules: :mod:`.app` (routes),
:mod:`.service` (state and operations), :mod:`.training` (LoRA clients on one base model), :mod:`.losses`
(Tinker's losses as tensor functions), :mod:`.sampling` (trajkit's engine with an adapter merged),
:mod:`.wire` (protobuf), :mod:`.futures`, :mod:`.checkpoints` (``tinker://`` paths), :mod:`.server`.
See docs/tinker.md for what is and is not implemented.
"""
