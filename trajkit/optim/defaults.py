"""Defaults that configs and argument parsers read without importing torch (:mod:`.sketch` needs it)."""

# The linear layers LoGRA sketches by default, a regex over module names: the q/k/v/o and gate/up/down
# projections of Hugging Face Llama, Qwen2/3 and Mistral-style decoders.
DEFAULT_TARGETS = r"(^|\.)(q|k|v|o|gate|up|down)_proj$"
