"""Bundled resources are found, and the app's window icon is the packaged icon's drawing."""

from attnviz.resources_path import resource_path

ROOT = resource_path().parent


def test_bundled_resources_exist():
    assert resource_path("tokenizer", "tokenizer.json").is_file()
    assert resource_path("images", "river-scene.png").is_file()


def test_window_icon_matches_the_desktop_icon():
    packaged = ROOT / "packaging" / "linux" / "icons" / "hicolor" / "scalable" / "apps" / "io.github.attnviz.attnviz.svg"
    assert resource_path("icons", "attnviz.svg").read_bytes() == packaged.read_bytes()
