"""The render cache (hpclaunch/submission/render.py, hpclaunch/core/cache.py) gives exactly what a fresh render
gives, for every golden case and another run directory; a changed template or spec is a miss; a run
directory that needs shell quoting bypasses it; YAML read through the cache equals the parsed file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.config.loader import read_yaml
from hpclaunch.core import cache
from hpclaunch.submission import render as r
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy
from tests.unit.test_golden import CASES


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("HPCLAUNCH_NO_CACHE", raising=False)
    return tmp_path / "cache" / "hpclaunch"


def _spec(recipe: str, profile: str, preset: str | None, layout: str):
    return resolve(recipe, profile, CliOverrides(preset=preset, layout=layout))


@pytest.mark.parametrize("name,recipe,profile,preset,layout", CASES, ids=[c[0] for c in CASES])
def test_a_cached_render_equals_a_fresh_one_in_another_run_dir(hpc_home, cache_home, name, recipe, profile, preset,
                                                                layout):
    spec = _spec(recipe, profile, preset, layout)
    first, second = Path("/scratch/runs/20261123-010101-a-1a2b3c"), Path("/scratch/runs/20261123-020202-b-4d5e6f")
    r.render(with_recipe_copy(spec, first), first)  # fills the cache
    assert len(list((cache_home / "render").glob("*.json"))) == 1
    cached = r.render(with_recipe_copy(spec, second), second)
    fresh = r._render(with_recipe_copy(spec, second), second)
    assert cached == fresh
    assert str(first) not in "".join(cached.files.values())


def test_changed_template_or_spec_is_a_miss_and_unsafe_paths_bypass(hpc_home, cache_home, tmp_path, monkeypatch):
    spec = _spec("allreduce", "local", None, "1n2g")
    run = Path("/scratch/runs/x-1")
    r.render(with_recipe_copy(spec, run), run)
    user = tmp_path / "xdg" / "hpclaunch" / "templates" / "blocks"
    user.mkdir(parents=True)
    (user / "env.sh.j2").write_text("# --- environment (user override)\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    overridden = r.render(with_recipe_copy(spec, run), run)
    assert "# --- environment (user override)" in overridden.script
    other = _spec("allreduce", "local", None, "1n1g")
    assert "--ranks=1:1 -- " in r.render(with_recipe_copy(other, run), run).script
    assert len(list((cache_home / "render").glob("*.json"))) == 3
    odd = Path("/scratch/my runs/x")
    assert r.render(with_recipe_copy(spec, odd), odd).script == r._render(with_recipe_copy(spec, odd), odd).script
    assert len(list((cache_home / "render").glob("*.json"))) == 3  # not cached


def test_yaml_through_the_cache_equals_the_file_and_follows_its_content(cache_home, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("a: 1\nb: [x, 3e-4]\ntime: 04:00:00\n")
    assert read_yaml(f) == read_yaml(f) == {"a": 1, "b": ["x", 0.0003], "time": "04:00:00"}
    assert len(list((cache_home / "yaml").glob("*.json"))) == 1
    f.write_text("a: 2\n")
    assert read_yaml(f) == {"a": 2}
    assert cache.exact_json({"d": [1, 2.5, None, True]}) and not cache.exact_json({1: "int key"})


def test_no_cache_when_switched_off(hpc_home, cache_home, monkeypatch):
    monkeypatch.setenv("HPCLAUNCH_NO_CACHE", "1")
    spec = _spec("allreduce", "local", None, "1n2g")
    run = Path("/scratch/runs/x-2")
    r.render(with_recipe_copy(spec, run), run)
    assert not (cache_home / "render").exists()
