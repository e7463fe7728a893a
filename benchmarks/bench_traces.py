"""Script form of ``trajkit bench traces`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import traces

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=traces.DESCRIPTION)
    traces.add_arguments(parser)
    sys.exit(traces.run(parser.parse_args()))
