"""msprobe's ``compare`` flags on ``graphprobe compare``.

Accepted where the meaning is the same (msprobe 26.2,
``msprobe/core/compare/utils.py``, ``_compare_parser``):

=========================  ==================================================
msprobe                    graphprobe
=========================  ==================================================
``-tp/--target_path P``    TARGET (the run under test, msprobe's "NPU")
``-gp/--golden_path P``    BENCH (the reference)
``-o/--output_path D``     ``-o/--output D``
``-fm/--fuzzy_match``      ``--fuzzy``
``--xlsx``                 ``--xlsx``: the .xlsx workbook next to each CSV
``-m/--mode auto``         the default (statistics or tensor, read from the
                           dump)
=========================  ==================================================

Refused with the reason (:data:`UNSUPPORTED`), never silently ignored: the
mapping files (``-cm``, ``-am``, ``-dm``, ``-lm``: MindSpore-vs-PyTorch
name maps; graphprobe compares PyTorch with PyTorch, where names match),
``-da`` (msprobe's diff analysis; graphprobe's first divergence is printed
always), ``--rank``/``--step`` (pass the rank or step folder instead), the
offline-model and fusion-rule options, ``--consistent_check``/``--backend``
(train-vs-inference), ``--config`` (tensor post-processing), ``-tensor_log``, and ``-m`` modes other
than ``auto``.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["UNSUPPORTED", "add_msprobe_flags", "resolve_paths"]

#: msprobe compare flags that graphprobe refuses, and why.
UNSUPPORTED: dict[tuple[str, ...], str] = {
    ("-cm", "--cell_mapping"): "a MindSpore cell-to-PyTorch module name map; graphprobe compares PyTorch dumps with "
                               "PyTorch dumps, whose names match without a map",
    ("-am", "--api_mapping"): "a MindSpore-to-PyTorch API name map; graphprobe compares PyTorch with PyTorch",
    ("-dm", "--data_mapping"): "a name map between two frameworks' dumps; graphprobe compares PyTorch with PyTorch "
                               "(rows whose call indices differ: --fuzzy / -fm)",
    ("-lm", "--layer_mapping"): "a layer name map between two frameworks; graphprobe compares PyTorch with PyTorch",
    ("-da", "--diff_analyze"): "msprobe's first-diff analysis; graphprobe always prints its first divergence "
                               "(noise-aware) in the summary, the CSV column First Divergence and the HTML report",
    ("--rank",): "a rank filter of MindSpore/torchair/offline-model compares; to compare one rank pass its folder "
                 "(TARGET/step0/rank1 BENCH/step0/rank1)",
    ("--step",): "a step filter of MindSpore kernel compares; to compare one step pass its folder "
                 "(TARGET/step3 BENCH/step3)",
    ("-tensor_log", "--is_print_compare_log"): "a log switch of msprobe's tensor compare; graphprobe's summary "
                                               "and warnings always print",
    ("-fr", "--fusion_rule_file"): "a fusion rule of msprobe's offline (om/onnx) model compare, which graphprobe "
                                   "does not do",
    ("-qfr", "--quant_fusion_rule_file"): "a fusion rule of msprobe's offline model compare",
    ("-cfr", "--close_fusion_rule_file"): "a fusion rule of msprobe's offline model compare",
    ("--input_data",): "an input of msprobe's offline model compare, which graphprobe does not do",
    ("--input_shape",): "an input of msprobe's offline model compare",
    ("--output_size",): "an input of msprobe's offline model compare",
    ("--dym_shape_range",): "an input of msprobe's offline model compare",
    ("-ofs", "--onnx_fusion_switch"): "an option of msprobe's onnx model compare",
    ("--consistent_check",): "msprobe's training-vs-inference compare (verl, fsdp/megatron), which graphprobe "
                             "does not do",
    ("--backend",): "an option of msprobe's training-vs-inference compare",
    ("--config",): "msprobe's tensor post-processing config (valid lengths of an API's outputs), which graphprobe "
                   "does not read; statistics.slice limits what a graphprobe dump records",
}


class _Refuse(argparse.Action):
    """An msprobe flag graphprobe does not support: a usage error that says
    why (argparse would only say "unrecognized arguments")."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        why = next(w for flags, w in UNSUPPORTED.items() if option_string in flags)
        parser.error(f"{option_string} (an msprobe compare flag) is not supported: it is {why}")


class _Mode(argparse.Action):
    """``-m/--mode``: only msprobe's default, ``auto``, means what graphprobe
    does."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if values != "auto":
            parser.error(f"{option_string} {values}: only msprobe's mode 'auto' is supported (statistics or tensor "
                         "compare, read from the dump); msprobe's other modes (torchair, offline_model, ...) compare "
                         "dumps graphprobe does not write")


def add_msprobe_flags(parser: argparse.ArgumentParser) -> None:
    """Adds ``-tp``/``-gp`` (the paths by msprobe's names), ``--xlsx``,
    ``-m/--mode auto`` and the refused flags (hidden from ``--help``; listed
    in its epilog and :data:`UNSUPPORTED`). ``-o/--output_path`` and
    ``-fm/--fuzzy_match`` are spelled on graphprobe's own options."""
    parser.add_argument("-tp", "--target_path", dest="target_path", metavar="TARGET",
                        help="msprobe's name for TARGET (instead of the first positional argument)")
    parser.add_argument("-gp", "--golden_path", dest="golden_path", metavar="BENCH",
                        help="msprobe's name for BENCH (instead of the second positional argument)")
    parser.add_argument("--xlsx", action="store_true",
                        help="also write each result as an .xlsx workbook (msprobe's flag; the CSV's columns and "
                             "cells, numbers as numbers) next to its CSV; needs openpyxl (scripts/setup_env.sh installs it; "
                             "a pip install: pip install 'graphprobe[xlsx]')")
    parser.add_argument("-m", "--mode", action=_Mode, metavar="auto", help="msprobe's flag; only 'auto' (the default)")
    parser.set_defaults(compare_parser=parser)  # for the usage line of a missing TARGET/BENCH (resolve_paths)
    for flags in UNSUPPORTED:
        parser.add_argument(*flags, action=_Refuse, nargs="?", dest="msprobe_unsupported", help=argparse.SUPPRESS)
    refused = ", ".join("/".join(flags) for flags in UNSUPPORTED)
    parser.epilog = ((parser.epilog + "\n") if parser.epilog else "") + (
        "msprobe's compare flags are accepted where they mean the same: -tp/--target_path, -gp/--golden_path, "
        "-o/--output_path, -fm/--fuzzy_match, --xlsx, -m auto. Refused, each with the reason: " + refused + ".")


def resolve_paths(args: argparse.Namespace) -> str | None:
    """Sets ``args.target``/``args.bench`` from the positional arguments or
    ``-tp``/``-gp``; returns the usage error, or None."""
    for positional, flag, name in (("target", "target_path", "TARGET"), ("bench", "golden_path", "BENCH")):
        given, by_flag = getattr(args, positional, None), getattr(args, flag, None)
        if given is not None and by_flag is not None:
            return (f"{name} is given twice: as an argument ({given!r}) and as -{flag[0]}p ({by_flag!r}); "
                    "give it once")
        if given is None and by_flag is None:
            return (f"{name} is missing: graphprobe compare TARGET BENCH (or msprobe's -tp TARGET -gp BENCH)")
        setattr(args, positional, given if given is not None else by_flag)
    return None
