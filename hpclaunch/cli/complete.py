"""Shell completion callbacks for click options and arguments (`shell_complete=`); the candidates come from
hpclaunch/cli/completion.py. Enable with `eval "$(_HPCLAUNCH_COMPLETE=bash_source hpclaunch)"` (docs/completion.md)."""

from __future__ import annotations

from click import Context, Parameter
from click.shell_completion import CompletionItem

from hpclaunch.cli import completion


def _items(candidates: list[completion.Candidate]) -> list[CompletionItem]:
    return [CompletionItem(value, help=help_ or None) for value, help_ in candidates]


def profile(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    if completion.looks_like_path(incomplete):
        return [CompletionItem(incomplete, type="file")]
    return _items(completion.profiles(incomplete))


def recipe(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    if completion.looks_like_path(incomplete):
        return [CompletionItem(incomplete, type="file")]
    return _items(completion.recipes(incomplete))


def preset(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    """The presets of the recipe already on the command line (RECIPE, or the first of RECIPES)."""
    chosen = ctx.params.get("recipe") or next(iter(ctx.params.get("recipes") or ()), None)
    if chosen is None:
        # completing `--preset` itself: click stops parsing at the option that lacks its value, leaving
        # the arguments before it unparsed in ctx.args
        chosen = next((arg for arg in ctx.args if not arg.startswith("-")), None)
    return _items(completion.presets(chosen, incomplete))


def job(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    return _items(completion.jobs(incomplete))
