"""Only for what pyproject.toml cannot say: the bundled folders (templates/, recipes/,
cluster_profiles/ at the top of the repository) ship inside the wheel as the packages
hpclaunch._bundled.*, next to the packages found under hpclaunch/. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

BUNDLED = {
    "hpclaunch._bundled.templates": "templates",
    "hpclaunch._bundled.recipes": "recipes",
    "hpclaunch._bundled.cluster_profiles": "cluster_profiles",
}

setup(
    packages=find_packages(include=["hpclaunch", "hpclaunch.*"]) + list(BUNDLED),
    package_dir={"hpclaunch": "hpclaunch", **BUNDLED},
)
