"""Script form of ``trajkit bench train`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import train

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=train.DESCRIPTION)
    train.add_arguments(parser)
    sys.exit(train.run(parser.parse_args()))
