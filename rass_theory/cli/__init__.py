"""Command line: ``rass-theory``.

Each subcommand lives in its own module of this package and is registered below, so that
``rass-theory --help`` stays fast (subcommand modules import their heavy machinery lazily).
"""
from __future__ import annotations

import importlib

import click

# subcommand name -> (module, attribute holding the click command)
_SUBCOMMANDS = {
    "report": ("rass_theory.cli.report_cmd", "report"),
    "check": ("rass_theory.cli.check_cmd", "check"),
    "certify": ("rass_theory.cli.check_cmd", "certify"),
    "sweep-gm": ("rass_theory.cli.sweep_cmd", "sweep_gm"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(_SUBCOMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name in self.commands:
            return self.commands[name]
        if name not in _SUBCOMMANDS:
            return None
        module_name, attr = _SUBCOMMANDS[name]
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rass_theory")
def main():
    """rass-theory: exact theory and exactness checks for speculative sampling (RMC, D-GRS, RASS)."""


if __name__ == "__main__":  # pragma: no cover
    main()
