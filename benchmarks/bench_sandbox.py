"""Script form of ``trajkit bench sandbox`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import sandbox

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=sandbox.DESCRIPTION)
    sandbox.add_arguments(parser)
    sys.exit(sandbox.run(parser.parse_args()))
