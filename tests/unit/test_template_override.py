"""A profile's own template folder, and a user folder, override the bundled templates block by block."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import REPO


def _profile_with_templates(tmp_path: Path) -> Path:
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["templates"] = "site-templates"  # relative to the profile file
    (tmp_path / "site-templates" / "blocks").mkdir(parents=True)
    (tmp_path / "site-templates" / "blocks" / "modules.sh.j2").write_text(
        "# --- modules (site override)\nsource /opt/site/init.sh\n")
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_profile_template_folder_overrides_a_block(hpc_home, hpclaunch, tmp_path):
    profile = _profile_with_templates(tmp_path)
    result = hpclaunch("submit", "allreduce", "--profile", str(profile), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "# --- modules (site override)\nsource /opt/site/init.sh\n" in result.stdout
    assert "module load" not in result.stdout  # the bundled block is replaced, not appended to
    assert "srun --kill-on-bad-exit=1" in result.stdout  # the other blocks are still the bundled ones


def test_user_template_folder_overrides_the_bundled_one(hpc_home, hpclaunch, tmp_path, monkeypatch):
    user = tmp_path / "xdg" / "hpclaunch" / "templates" / "blocks"
    user.mkdir(parents=True)
    (user / "env.sh.j2").write_text("# --- environment (user override)\nexport SITE=1\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "# --- environment (user override)\nexport SITE=1\n" in result.stdout
    assert "HF_HUB_OFFLINE" not in result.stdout
