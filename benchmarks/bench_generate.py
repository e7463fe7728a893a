"""Script form of ``trajkit bench generate`` (same code, same flags)."""
import argparse
import sys

from trajkit.bench import generate

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=generate.DESCRIPTION)
    generate.add_arguments(parser)
    sys.exit(generate.run(parser.parse_args()))
