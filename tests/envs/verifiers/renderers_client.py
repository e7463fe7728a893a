"""Run in the verifiers venv (``make verifiers-venv``): verifiers' own token client, ``renderers.client.generate``
(what ``verifiers.v1`` ``TrainClient`` calls), against a trajkit gateway. Prints one JSON line per call.

    python renderers_client.py BASE_URL TOKENIZER_DIR MODEL SESSION
"""
import asyncio
import json
import sys

from openai import AsyncOpenAI
from renderers import DefaultRendererConfig, create_renderer
from renderers.client import generate
from transformers import AutoTokenizer

KEYS = ("prompt_ids", "completion_ids", "completion_logprobs", "finish_reason", "content")


async def main(base_url: str, tokenizer_dir: str, model: str, session: str) -> None:
    renderer = create_renderer(AutoTokenizer.from_pretrained(tokenizer_dir), DefaultRendererConfig())
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    for turn in range(2):
        out = await generate(client=client, renderer=renderer, messages=messages, model=model,
                             sampling_params={"temperature": 0.7, "max_tokens": 12, "seed": 5 + turn},
                             extra_headers={"X-Session-ID": session})
        print(json.dumps({k: out[k] for k in KEYS}), flush=True)
        messages += [{"role": "assistant", "content": out["content"] or ""}, {"role": "user", "content": "And 4 + 4?"}]
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
