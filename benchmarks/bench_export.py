"""Script form of ``trajkit bench export`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import export

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=export.DESCRIPTION)
    export.add_arguments(parser)
    sys.exit(export.run(parser.parse_args()))
