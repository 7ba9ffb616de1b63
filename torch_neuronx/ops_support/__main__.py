"""`python -m torch_neuronx.ops_support --markdown`: print the op-support table as docs/op-support.md."""
from __future__ import annotations

import argparse

from . import markdown


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.ops_support",
                                     description="TorchNeuron's op support (Y / CPU_FALLBACK / N) as this package has it.")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown (docs/op-support.md)")
    args = parser.parse_args(argv)
    if not args.markdown:
        parser.error("say what to print: --markdown")
    print(markdown(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
