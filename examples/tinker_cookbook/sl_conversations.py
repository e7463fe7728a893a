"""tinker-cookbook's supervised recipe (``supervised.train``) on its shipped ``example_data/conversations.jsonl``,
against a trajkit Tinker server: run it with the cookbook venv's python (``make tinker-cookbook-venv``).

    trajkit serve --api tinker --model DIR --model-name DIR --port 8000 &
    ~/.cache/trajkit/tinker-cookbook-0.5.8/bin/python examples/tinker_cookbook/sl_conversations.py \\
        --base-url http://127.0.0.1:8000 --model DIR --steps 6 --log-path /tmp/sl

``--renderer qwen3_instruct``: SmolLM2's ChatML (``<|im_start|>role ... <|im_end|>``) is the format Qwen3's
instruct renderer writes; the cookbook's model registry does not know SmolLM2, so the renderer is named
explicitly. Prints each step's training loss (the recipe's ``train_mean_nll``) from its metrics.jsonl.
"""
import argparse
import asyncio
import json
import os
from pathlib import Path

import tinker_cookbook
from tinker_cookbook.renderers import TrainOnWhat
from tinker_cookbook.supervised import train
from tinker_cookbook.supervised.data import FromConversationFileBuilder
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True, help="the model folder, as served (--model-name)")
    p.add_argument("--renderer", default="qwen3_instruct")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--log-path", required=True)
    args = p.parse_args()
    os.environ.setdefault("TINKER_API_KEY", "tml-local")
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    data = Path(tinker_cookbook.__file__).parent / "example_data" / "conversations.jsonl"
    common = ChatDatasetBuilderCommonConfig(model_name_for_tokenizer=args.model, renderer_name=args.renderer,
                                            max_length=args.max_length, batch_size=args.batch_size,
                                            train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES)
    config = train.Config(log_path=args.log_path, model_name=args.model, recipe_name="trajkit_sl_conversations",
                          renderer_name=args.renderer,
                          dataset_builder=FromConversationFileBuilder(common_config=common, file_path=str(data)),
                          learning_rate=args.lr, lr_schedule="constant", lora_rank=args.rank,
                          base_url=args.base_url, save_every=0, eval_every=0, infrequent_eval_every=0,
                          max_steps=args.steps)
    asyncio.run(train.main(config))
    for line in (Path(args.log_path) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        print({k: row[k] for k in ("step", "train_mean_nll") if k in row})


if __name__ == "__main__":
    main()
