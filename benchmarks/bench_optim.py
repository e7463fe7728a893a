"""Script form of ``trajkit bench optim`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import optim

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=optim.DESCRIPTION)
    optim.add_arguments(parser)
    sys.exit(optim.run(parser.parse_args()))
