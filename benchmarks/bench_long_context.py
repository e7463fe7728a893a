"""Script form of ``trajkit bench long-context`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import long_context

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=long_context.DESCRIPTION)
    long_context.add_arguments(parser)
    sys.exit(long_context.run(parser.parse_args()))
